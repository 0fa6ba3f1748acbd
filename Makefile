# The two set-up commands of the README: `make demo` and `make test`.
# Both install what they need (Python packages, JVM jars via Maven, redis-server via
# apt-get), start the local stack, and are safe to run again.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test setup system-deps lint typecheck unit down

demo: setup
	$(VENV)/bin/pricestream up
	$(VENV)/bin/pricestream demo

test: setup
	$(VENV)/bin/pricestream up
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy events market pipelines features pricing routing delivery serving audit feedback infra pricestream
	$(PY) -m pytest -q -p no:cacheprovider

setup: system-deps $(STAMP)

system-deps:
	@bash infra/install_system_deps.sh

$(STAMP): pyproject.toml infra/requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip setuptools wheel
	$(PY) -m pip install -q -c infra/requirements.lock -e '.[dev]'
	@touch $(STAMP)

down:
	$(VENV)/bin/pricestream down
