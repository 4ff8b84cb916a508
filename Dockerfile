# scalerl images (docs/deployment.md). Targets:
#   service - the API, the migrations and the supervisor/alerts worker: no torch   docker build --target service -t scalerl:service .
#   cpu     - a training worker on CPU: the service's packages plus torch (CPU)    docker build --target cpu -t scalerl:cpu .
#   cuda    - a training worker on NVIDIA GPUs (torch from PyPI, CUDA)             docker build --target cuda -t scalerl:cuda .
# Every pip install takes PIP_EXTRA (a build argument) for where packages come from: by default PyPI plus PyTorch's
# CPU index; offline, `make images` passes PIP_EXTRA="--no-index --find-links /wheels" with docker/wheels filled by
# `make wheelhouse`. Dependencies are installed before the source is copied (a code change rebuilds one small
# layer), into /opt/scalerl (a virtualenv) in a build stage, so neither the wheels nor pip's build files stay in the
# final images. All run as an unprivileged user; state lives in /data (SCALERL_HOME), run directories in /data/runs.
# The legacy builder builds every stage before its target: cuda is last so that service and cpu never need its base.

ARG PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu"
ARG CUDA_BASE=nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04

# ---- base: what every image shares -----------------------------------------------------------------------------
FROM python:3.11-slim AS base
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 SCALERL_HOME=/data \
    PATH=/opt/scalerl/bin:$PATH
RUN useradd --create-home --uid 1000 scalerl && mkdir -p /data/runs && chown -R scalerl /data
WORKDIR /app

# ---- dependencies (build stages) -------------------------------------------------------------------------------
# pyproject.toml alone (no package, an empty README) resolves the extras' dependencies; the empty scalerl it builds
# is removed. So these layers are rebuilt only when pyproject.toml, constraints/ or the wheels change.
FROM base AS deps-service
ARG PIP_EXTRA
COPY docker/wheels /wheels
COPY constraints /src/constraints
COPY pyproject.toml /src/
RUN touch /src/README.md && python -m venv /opt/scalerl \
    && pip install $PIP_EXTRA -c /src/constraints/cpu.txt "setuptools>=68" wheel \
    && pip install $PIP_EXTRA -c /src/constraints/cpu.txt "/src[server,worker]" \
    && pip uninstall -y -q scalerl

FROM deps-service AS deps-cpu
ARG PIP_EXTRA
# torch pinned to the CPU build (constraints/cpu.txt): never PyPI's CUDA wheels.
# storage: fsspec and sshfs, for checkpoints in a run storage shared by hosts (SCALERL_RUN_STORAGE: a path, sftp://).
RUN pip install $PIP_EXTRA -c /src/constraints/cpu.txt "/src[train,server,worker,storage]" && pip uninstall -y -q scalerl

# ---- service: API, migrations, supervisor and alerts (no torch) ------------------------------------------------
FROM base AS service
COPY --from=deps-service /opt/scalerl /opt/scalerl
COPY pyproject.toml README.md /src/
COPY scalerl /src/scalerl
COPY rl_core /src/rl_core
COPY server /src/server
COPY worker /src/worker
COPY web /src/web
RUN pip install --no-deps --no-index --no-build-isolation /src && rm -rf /src \
    && python -c "import server.store.migrations, server.store.migrate; from scalerl.cli.errors import require_shipped_data as c; c()"
USER scalerl
VOLUME ["/data"]
EXPOSE 8765
CMD ["scalerl", "server", "--host", "0.0.0.0", "--port", "8765"]

# ---- cpu: a training worker on CPU (the engine, torch CPU) -----------------------------------------------------
FROM base AS cpu
ENV SCALERL_ENGINE_DEVICE=cpu
COPY --from=deps-cpu /opt/scalerl /opt/scalerl
COPY pyproject.toml README.md /src/
COPY scalerl /src/scalerl
COPY rl_core /src/rl_core
COPY server /src/server
COPY worker /src/worker
COPY web /src/web
RUN pip install --no-deps --no-index --no-build-isolation /src && rm -rf /src \
    && python -c "import torch, server.store.migrations; from scalerl.cli.errors import require_shipped_data as c; c()"
USER scalerl
VOLUME ["/data"]
CMD ["scalerl", "worker", "--queues", "gpu"]

# ---- cuda: a training worker on NVIDIA GPUs ---------------------------------------------------------------------
# Never built with its nvidia/cuda base on the project's machines (no registry, no GPU). `make image-cuda-check`
# builds these same stages on the Debian stand-in of python:3.11-slim (CUDA_BASE) from the local wheels, where torch
# is the CPU build: the Python layer (the extras with deepspeed, scalerl, the user) is checked, CUDA is not.
FROM ${CUDA_BASE} AS cuda-base
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 \
    SCALERL_HOME=/data SCALERL_ENGINE_DEVICE=cuda PATH=/opt/scalerl/bin:$PATH
# python3-dev and a compiler stay: DeepSpeed compiles its ops at the first run.
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app

FROM cuda-base AS deps-cuda
# Empty by default: torch from PyPI is the CUDA build (no constraints file); deepspeed for ZeRO trainers.
ARG PIP_EXTRA=""
COPY docker/wheels /wheels
COPY pyproject.toml /src/
RUN touch /src/README.md && python3 -m venv /opt/scalerl \
    && pip install $PIP_EXTRA "setuptools>=68" wheel \
    && pip install $PIP_EXTRA "/src[train,server,worker,deepspeed]" && pip uninstall -y -q scalerl

FROM cuda-base AS cuda
COPY --from=deps-cuda /opt/scalerl /opt/scalerl
COPY pyproject.toml README.md /src/
COPY scalerl /src/scalerl
COPY rl_core /src/rl_core
COPY server /src/server
COPY worker /src/worker
COPY web /src/web
RUN pip install --no-deps --no-index --no-build-isolation /src && rm -rf /src \
    && python -c "import torch, deepspeed, server.store.migrations; from scalerl.cli.errors import require_shipped_data as c; c()" \
    && useradd --create-home --uid 1001 scalerl && mkdir -p /data/runs && chown -R scalerl /data
USER scalerl
VOLUME ["/data"]
CMD ["scalerl", "worker", "--queues", "gpu"]
