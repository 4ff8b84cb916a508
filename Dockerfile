# scalerl images. Two targets:
#   cpu  - API server, migrations, cpu worker (and CPU training):  docker build --target cpu  -t scalerl:cpu .
#   cuda - GPU worker (the engine on CUDA):                         docker build --target cuda -t scalerl:cuda .
# Both run as an unprivileged user; state lives in /data (SCALERL_HOME), run directories in /data/runs.

# ---- cpu -------------------------------------------------------------------------------------------------------
FROM python:3.11-slim AS cpu
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 SCALERL_HOME=/data
WORKDIR /app
COPY pyproject.toml README.md ./
COPY constraints ./constraints
COPY scalerl ./scalerl
COPY rl_core ./rl_core
COPY server ./server
COPY worker ./worker
COPY web ./web
# The CPU torch build (pinned by constraints/cpu.txt) comes from PyTorch's CPU index, never the CUDA wheels.
RUN pip install --extra-index-url https://download.pytorch.org/whl/cpu -c constraints/cpu.txt ".[train,server,worker]" \
    && useradd --create-home --uid 1000 scalerl && mkdir -p /data && chown scalerl /data
USER scalerl
VOLUME ["/data"]
EXPOSE 8765
CMD ["scalerl", "server", "--host", "0.0.0.0", "--port", "8765"]

# ---- cuda ------------------------------------------------------------------------------------------------------
FROM nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04 AS cuda
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1 \
    SCALERL_HOME=/data SCALERL_ENGINE_DEVICE=cuda
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-pip python3-dev build-essential \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY scalerl ./scalerl
COPY rl_core ./rl_core
COPY server ./server
COPY worker ./worker
COPY web ./web
# torch from PyPI is the CUDA build; deepspeed for ZeRO trainers.
RUN pip install ".[train,server,worker,deepspeed]" \
    && useradd --create-home --uid 1001 scalerl && mkdir -p /data && chown scalerl /data
USER scalerl
VOLUME ["/data"]
CMD ["scalerl", "worker", "--queues", "gpu"]
