# Two commands set up everything on a fresh machine:
#   make demo   - the main job (creates .venv, installs, runs the demo)
#   make test   - lint, type-check and the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU machines pin the CPU torch build; machines with an NVIDIA driver take torch from pyproject's range.
CONSTRAINTS := $(shell command -v nvidia-smi >/dev/null 2>&1 || echo "-c constraints/cpu.txt")
EXTRAS ?= train,deepspeed,server,worker,dev

.PHONY: setup demo test lint typecheck bench clean

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

typecheck: setup
	$(BIN)/mypy

test: lint typecheck
	$(BIN)/python -m pytest -q

bench: setup
	$(BIN)/python bench/forecast_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
