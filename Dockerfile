# longtools: one image for every process. `longtools api` (the default) and `longtools worker` are
# what docker-compose.yml runs; `longtools serve` (embedded dev Temporal) also works for one host.
# Every Python package is installed from a hash-pinned lock: requirements.lock (its runtime part,
# the very versions the tests ran with) and deploy/build.lock (hatchling, to build longtools itself).

FROM python:3.11.16-slim-bookworm AS build

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PYTHONDONTWRITEBYTECODE=1

WORKDIR /src
RUN python -m venv /opt/venv

# Dependencies first: this layer is rebuilt only when a lock changes.
COPY requirements.lock pyproject.toml ./
COPY deploy/runtime_lock.py deploy/build.lock deploy/
RUN python deploy/runtime_lock.py requirements.lock pyproject.toml > /tmp/runtime.lock \
 && /opt/venv/bin/pip install --require-hashes --no-deps -r /tmp/runtime.lock \
 && pip install --require-hashes --no-deps -r deploy/build.lock

# longtools itself, built by the hash-pinned hatchling above (no build-time download); then every
# module is imported once, so a package the code imports but the lock's runtime part lacks fails
# the build here rather than a container at start.
COPY README.md ./
COPY longtools/ longtools/
RUN pip wheel --no-deps --no-build-isolation --wheel-dir /tmp/dist . \
 && /opt/venv/bin/pip install --no-deps /tmp/dist/longtools-*.whl \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/python -c "import importlib, pkgutil; [importlib.import_module(m.name) \
      for p in ('longtools',) \
      for m in pkgutil.walk_packages(importlib.import_module(p).__path__, p + '.')]" \
 && /opt/venv/bin/longtools --help > /dev/null


FROM python:3.11.16-slim-bookworm

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    LONGTOOLS_HOST=0.0.0.0 \
    LONGTOOLS_PORT=8000 \
    LONGTOOLS_DATA_DIR=/data \
    LONGTOOLS_LOG_FORMAT=json

# A fixed uid/gid, so a volume shared by the API and worker containers has one owner.
RUN groupadd --system --gid 10001 longtools \
 && useradd --system --uid 10001 --gid longtools --home-dir /data --no-create-home \
      --shell /usr/sbin/nologin longtools \
 && mkdir -p /data \
 && chown longtools:longtools /data

COPY --from=build /opt/venv /opt/venv
COPY deploy/healthcheck.py /opt/longtools/healthcheck.py

USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8000

# Liveness: GET /livez is 200 while the API serves, whatever Temporal does, so a Temporal outage
# marks no replica unhealthy (readiness is GET /readyz: `healthcheck.py /readyz`).
# `longtools worker` serves no HTTP: docker-compose.yml turns this check off for workers.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "/opt/longtools/healthcheck.py"]

ENTRYPOINT ["longtools"]
CMD ["api"]
