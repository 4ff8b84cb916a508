"""CUDA tests: the GPU path run for real. Every test here needs a CUDA GPU and is skipped, with that
reason, where ``torch.cuda.is_available()`` is false (CI, the CPU dev box). On a GPU machine run them on their own,
``python -m pytest tests/cuda``, so that DeepSpeed's process group is NCCL from the first test on
(``bench/gpu_session.sh`` does this and then runs ``bench/gpu.py``)."""

from __future__ import annotations

import pytest
import torch

CUDA = torch.cuda.is_available()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is false here)")
    for item in items:
        if "tests/cuda/" in item.path.as_posix():
            item.add_marker(skip)
