"""The cuda image is what it says, checked on the CPU (docker/cuda_image.py; the image itself is never built in CI).

1. The Dockerfile's cuda stages: a -devel base (nvcc for DeepSpeed's ops), pip arguments of their own (never
   PIP_EXTRA, whose default adds PyTorch's CPU index), every pip install under constraints/cuda.txt, the wheels'
   Python the base's.
2. constraints/cuda.txt: every dependency of the cuda stages' install pinned within pyproject's ranges, no local
   version (+cpu), for the base's Python and glibc, with a CUDA runtime of the base's CUDA.
3. docker/wheels-cuda, when `make wheelhouse-cuda` filled it: one wheel per pin, each installable on the base.
4. (slow: PyPI, metadata only, about 20 s and 2 MB) pip resolves the cuda stages' install under the lock for Python
   3.12 on Linux: exactly the lock, and torch is PyPI's CUDA build whose runtime is the base's CUDA.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cuda_image", REPO / "docker" / "cuda_image.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["cuda_image"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


ci = _load()
DOCKERFILE = (REPO / "Dockerfile").read_text()


@pytest.fixture(scope="module")
def base() -> Any:
    return ci.cuda_base(ci.parse_dockerfile(DOCKERFILE))


def test_the_dockerfile_cuda_stages() -> None:
    assert ci.check_dockerfile(DOCKERFILE) == []


def test_the_base_is_devel_ubuntu_24_04_python_3_12(base: Any) -> None:
    assert (base.flavor, base.ubuntu, base.python) == ("devel", "24.04", "3.12")


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        # The defects found in the rendered compose file, one at a time.
        ("-devel-ubuntu24.04", "-cudnn-runtime-ubuntu24.04", "has no nvcc"),
        (
            'ARG CUDA_PIP_EXTRA=""',
            'ARG CUDA_PIP_EXTRA=""\nARG PIP_EXTRA="--extra-index-url https://download.pytorch.org/whl/cpu"',
            "PIP_EXTRA",
        ),
        (
            'pip install $CUDA_PIP_EXTRA -c /src/constraints/cuda.txt "/src',
            'pip install $PIP_EXTRA "/src',
            "without -c",
        ),
        (
            "pip install $CUDA_PIP_EXTRA -c /src/constraints/cuda.txt pip",
            "pip install -c /src/constraints/cuda.txt pip",
            "without $CUDA_PIP_EXTRA",
        ),
        ("ARG CUDA_PYTHON=3.12", "ARG CUDA_PYTHON=3.11", "has Python 3.12"),
        ("-devel-ubuntu24.04", "-devel-ubuntu22.04", "has Python 3.10"),
        ("COPY docker/wheels-cuda /wheels", "COPY docker/wheels /wheels", "docker/wheels-cuda"),
    ],
)
def test_the_check_refuses(old: str, new: str, problem: str) -> None:
    assert old in DOCKERFILE
    problems = ci.check_dockerfile(DOCKERFILE.replace(old, new, 1))
    assert any(problem in p for p in problems), problems


def test_the_lock(base: Any) -> None:
    lock = ci.read_lock()
    assert ci.check_lock(lock, base) == []
    assert "+" not in str(lock.pins["torch"])
    assert "deepspeed" in lock.pins


def test_the_lock_check_refuses_a_cpu_torch(base: Any, tmp_path: Path) -> None:
    text = ci.LOCK.read_text()
    torch = next(line for line in text.splitlines() if line.startswith("torch=="))
    runtime = next(line for line in text.splitlines() if line.startswith("nvidia-cuda-runtime=="))
    bad = tmp_path / "cuda.txt"
    text = text.replace(torch, torch + "+cpu").replace(runtime + "\n", "")
    bad.write_text(text.replace("# python: 3.12", "# python: 3.11"))
    problems = ci.check_lock(ci.read_lock(bad), base)
    assert any("+cpu" in p for p in problems), problems
    assert any("pins no CUDA runtime" in p for p in problems), problems
    assert any("Python 3.11" in p for p in problems), problems


def test_the_wheelhouse_check(base: Any, tmp_path: Path) -> None:
    """Wheel names alone (empty files): a cp311 wheel, a +cpu torch and a missing pin are refused."""
    lock = ci.Lock("3.12", "manylinux_2_39_x86_64", {"torch": ci.Version("2.13.0"), "six": ci.Version("1.17.0")})
    (tmp_path / "six-1.17.0-py2.py3-none-any.whl").touch()
    (tmp_path / "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl").touch()
    assert ci.check_wheelhouse(tmp_path, lock, base) == []
    (tmp_path / "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl").unlink()
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    problems = ci.check_wheelhouse(tmp_path, lock, base)
    assert any("does not install on Python 3.12" in p for p in problems), problems
    assert any("local version" in p for p in problems), problems
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").unlink()
    assert any("torch==2.13.0 has no wheel" in p for p in ci.check_wheelhouse(tmp_path, lock, base))


@pytest.mark.skipif(not any(ci.WHEELHOUSE.glob("*.whl")), reason="docker/wheels-cuda is empty (make wheelhouse-cuda)")
def test_the_wheelhouse(base: Any) -> None:
    assert ci.check_wheelhouse(ci.WHEELHOUSE, ci.read_lock(), base) == []


def _pypi_reachable() -> bool:
    try:
        with urllib.request.urlopen(ci.INDEX_URL.rstrip("/") + "/pip/", timeout=10):
            return True
    except OSError:
        return False


@pytest.mark.slow
def test_pypi_resolves_the_lock_to_a_cuda_torch(base: Any) -> None:
    if not _pypi_reachable():
        if os.environ.get("CI"):
            pytest.fail(f"{ci.INDEX_URL} is not reachable: the cuda image's lock cannot be checked")
        pytest.skip(f"{ci.INDEX_URL} is not reachable")
    assert ci.check_pypi(ci.read_lock(), base) == []


def test_compose_gives_the_cuda_stages_no_cpu_index() -> None:
    """docker-compose.yml's services built from the cuda target: what they pass to the cuda stages names no CPU index
    (PIP_EXTRA, which they may inherit from the CPU services' build, is read by no cuda stage)."""
    import yaml

    services = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    cuda = {
        name: s["build"]
        for name, s in services.items()
        if isinstance(s.get("build"), dict) and s["build"].get("target") == "cuda"
    }
    assert cuda, "no service of docker-compose.yml is built from the cuda target"
    for name, build in cuda.items():
        args = build.get("args") or {}
        args = dict(a.split("=", 1) for a in args) if isinstance(args, list) else args
        for key in ("CUDA_PIP_EXTRA", "CUDA_BASE", "CUDA_PYTHON"):
            assert not ci.CPU_INDEX.search(str(args.get(key, ""))), f"{name}: {key}={args[key]}"
