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

# The image of infra/k8s's manifests, built with podman from a Debian root made by debootstrap (no registry
# needed). `make image-check` runs `pricestream --help` and a /healthz probe of `serve` in it.
IMAGE      ?= pricestream/pricestream:0.1.0
BASE_IMAGE ?= localhost/pricestream-base:bookworm
PODMAN     ?= podman --runtime /usr/sbin/runc

.PHONY: image image-base image-check
image-base:
	@bash infra/image_base.sh $(BASE_IMAGE)

image: image-base
	@rm -rf .build/ca && mkdir -p .build/ca && echo "local CAs of the building host" > .build/ca/README
	@cp /usr/local/share/ca-certificates/*.crt .build/ca/ 2>/dev/null || true
	$(PODMAN) build --build-arg BASE=$(BASE_IMAGE) -t $(IMAGE) .

image-check: image
	$(PODMAN) run --rm $(IMAGE) --help
	$(PODMAN) run --rm --network host -e PRICESTREAM_HTTP_PORT=18765 \
	  -e PRICESTREAM_AUDIT=false --entrypoint bash $(IMAGE) -c \
	  'pricestream serve & for i in $$(seq 120); do python3 -c "import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:18765/healthz\", timeout=2)" && exit 0; sleep 2; done; exit 1'
