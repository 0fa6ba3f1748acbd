# The pricestream image: every command of the CLI (serve, serve-stream, services run NAME, heavy serve,
# jobs run features) and the Flink job's Python entry, with the JVM jars resolved from Maven Central and the
# project's UDF jar built in. The Kubernetes manifests (infra/k8s) run it with `args:` after the entrypoint.
#
# Build (no registry is needed: the base is a Debian root made with debootstrap, see `make image`):
#   podman build --build-arg BASE=localhost/pricestream-base:bookworm -t pricestream/pricestream:0.1.0 .
ARG BASE=localhost/pricestream-base:bookworm

FROM ${BASE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# CAs the building host added locally (a corporate or sandbox TLS proxy in front of PyPI and Maven Central;
# `make image` copies /usr/local/share/ca-certificates/*.crt here): trusted in this stage only
COPY .build/ca/ /usr/local/share/ca-certificates/
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential \
       openjdk-17-jdk-headless maven ca-certificates ca-certificates-java \
    && update-ca-certificates \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt
WORKDIR /src
COPY pyproject.toml README.md ./
COPY infra/requirements.lock infra/requirements.lock
COPY events events
COPY market market
COPY pipelines pipelines
COPY features features
COPY pricing pricing
COPY routing routing
COPY delivery delivery
COPY serving serving
COPY audit audit
COPY feedback feedback
COPY infra infra
COPY pricestream pricestream
RUN python3 -m venv /opt/pricestream/venv \
    && /opt/pricestream/venv/bin/pip install --no-cache-dir -c infra/requirements.lock . \
    && PRICESTREAM_CACHE_DIR=/opt/pricestream/cache /opt/pricestream/venv/bin/python -c \
       "from infra import jars; from infra.config import StackConfig; c = StackConfig(); jars.resolve_all(c); jars.build_udf(c)" \
    && PRICESTREAM_CACHE_DIR=/opt/pricestream/cache /opt/pricestream/venv/bin/python -c \
       "from pricestream.settings import Settings; from pricestream.wiring import bootstrap_frame; s = Settings(); bootstrap_frame(seed=s.seed, rows=s.bootstrap_rows, cache_dir=s.cache_dir)"

FROM ${BASE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 openjdk-17-jre-headless ca-certificates libgomp1 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --create-home --home-dir /var/lib/pricestream pricestream
COPY --from=build /opt/pricestream /opt/pricestream
# the FlinkDeployment's jarURI (infra/k8s/base/feature-job.yaml): Flink's Python driver from the PyFlink wheel
RUN mkdir -p /opt/flink/opt \
    && ln -s "$(find /opt/pricestream/venv -name 'flink-python-*.jar' -path '*pyflink/opt/*' | head -1)" \
       /opt/flink/opt/flink-python.jar
ENV PATH=/opt/pricestream/venv/bin:$PATH \
    PRICESTREAM_CACHE_DIR=/opt/pricestream/cache \
    PRICESTREAM_STATE_DIR=/var/lib/pricestream/state \
    PRICESTREAM_HTTP_HOST=0.0.0.0
USER 10001
WORKDIR /var/lib/pricestream
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PRICESTREAM_HTTP_PORT', '8000'), timeout=2)"]
ENTRYPOINT ["pricestream"]
CMD ["--help"]
