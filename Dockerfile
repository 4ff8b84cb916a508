# scalerl images (docs/deployment.md). Targets:
#   service - the API, the migrations and the supervisor/alerts worker: no torch   docker build --target service -t scalerl:service .
#   cpu     - a training worker on CPU: the service's packages plus torch (CPU)    docker build --target cpu -t scalerl:cpu .
#   cuda    - a training worker on NVIDIA GPUs (torch from PyPI, CUDA)             docker build --target cuda -t scalerl:cuda .
# Every pip install of service and cpu takes PIP_EXTRA (a build argument) for where packages come from: by default
# PyPI plus PyTorch's CPU index; offline, `make images` passes PIP_EXTRA="--no-index --find-links /wheels" with
# docker/wheels filled by `make wheelhouse`. The cuda stages take CUDA_PIP_EXTRA instead (below). Dependencies are
# installed before the source is copied (a code change rebuilds one small layer), into /opt/scalerl (a virtualenv) in
# a build stage, so neither the wheels nor pip's build files stay in the final images. All run as an unprivileged
# user; state lives in /data (SCALERL_HOME), run directories in /data/runs.
# The legacy builder builds every stage before its target: cuda is last so that service and cpu never need its base.

ARG PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu"
# The cuda target's base: -devel, for nvcc (DeepSpeed compiles its ops at a run's start with the base's nvcc and refuses
# one whose CUDA major.minor is not torch's: PyPI's torch 2.13.0 is CUDA 13.0), Ubuntu 24.04 (apt's Python: 3.12). No
# cuDNN variant: torch brings its own (nvidia-cudnn-cu13). docker/cuda_image.py checks all of this against the lock.
ARG CUDA_BASE=nvidia/cuda:13.0.2-devel-ubuntu24.04

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
# No VOLUME for /data: a VOLUME gives every new container an anonymous volume, which `docker compose down` (no -v)
# leaves behind: one more per `down` and `up`. What must last is mounted by name (docker-compose.yml: the runs volume
# at /data/runs); a standalone container on SQLite keeps its home with `docker run -v NAME:/data`.
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
# No VOLUME for /data (as in service, above).
CMD ["scalerl", "worker", "--queues", "gpu"]

# ---- cuda: a training worker on NVIDIA GPUs ---------------------------------------------------------------------
# Never built with its nvidia/cuda base on the project's machines (no registry, no GPU). Its Python layer is pinned
# whole by constraints/cuda.txt (docker/cuda_image.py: torch is PyPI's CUDA build, every wheel for the base's Python)
# and installed with pip arguments of its own, CUDA_PIP_EXTRA (empty: PyPI), never PIP_EXTRA, whose default adds
# PyTorch's CPU index. Offline: CUDA_PIP_EXTRA="--no-index --find-links /wheels" with docker/wheels-cuda filled by
# `make wheelhouse-cuda`. `make image-cuda-check` builds these stages on a Debian stand-in of the base with Python
# 3.12 and no nvcc (CHECK_NVCC=0): the Python layer is checked there, CUDA is not.
FROM ${CUDA_BASE} AS cuda-base
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 \
    SCALERL_HOME=/data SCALERL_ENGINE_DEVICE=cuda PATH=/opt/scalerl/bin:$PATH
# python3-dev and a compiler stay: DeepSpeed compiles its ops (with the base's nvcc) at the first run.
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv python3-dev build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app

FROM cuda-base AS deps-cuda
# CUDA_PYTHON: the base's Python, the one constraints/cuda.txt and docker/wheels-cuda are for (a base with another
# one stops here, not at pip's "no matching distribution"). The last line refuses a torch that is not a CUDA build.
# deepspeed for ZeRO trainers; storage (fsspec, sshfs) for checkpoints in a run storage shared by hosts.
ARG CUDA_PIP_EXTRA=""
ARG CUDA_PYTHON=3.12
COPY docker/wheels-cuda /wheels
COPY constraints/cuda.txt /src/constraints/cuda.txt
COPY pyproject.toml /src/
RUN python3 -c "import sys; v = '%d.%d' % sys.version_info[:2]; sys.exit(v != '$CUDA_PYTHON' and f'the base has Python {v}; constraints/cuda.txt and docker/wheels-cuda are for $CUDA_PYTHON')" \
    && touch /src/README.md && python3 -m venv /opt/scalerl \
    && pip install $CUDA_PIP_EXTRA -c /src/constraints/cuda.txt pip "setuptools>=68" wheel \
    && pip install $CUDA_PIP_EXTRA -c /src/constraints/cuda.txt "/src[train,server,worker,deepspeed,storage]" \
    && pip uninstall -y -q scalerl \
    && python -c "import sys, torch; v = torch.__version__; sys.exit(None if torch.version.cuda and '+cpu' not in v else f'torch {v} is not a CUDA build')"

FROM cuda-base AS cuda
# CHECK_NVCC=1: DeepSpeed's own check that the base's nvcc is torch's CUDA (what it runs before compiling an op).
ARG CHECK_NVCC=1
COPY --from=deps-cuda /opt/scalerl /opt/scalerl
COPY pyproject.toml README.md /src/
COPY scalerl /src/scalerl
COPY rl_core /src/rl_core
COPY server /src/server
COPY worker /src/worker
COPY web /src/web
RUN pip install --no-deps --no-index --no-build-isolation /src && rm -rf /src \
    && python -c "import torch, deepspeed, server.store.migrations; from scalerl.cli.errors import require_shipped_data as c; c()" \
    && if [ "$CHECK_NVCC" = 1 ]; then python -c "from deepspeed.ops.op_builder.builder import assert_no_cuda_mismatch as a; a('scalerl')"; fi \
    && useradd --create-home --uid 1001 scalerl && mkdir -p /data/runs && chown -R scalerl /data
USER scalerl
# No VOLUME for /data: it would give every new container an anonymous volume that `docker compose down` (no -v)
# leaves behind; the runs volume is mounted by name at /data/runs (docker-compose.yml).
CMD ["scalerl", "worker", "--queues", "gpu"]
