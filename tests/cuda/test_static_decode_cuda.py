"""The static-shape decode step on CUDA: the CUDA graph (and the compiled step captured as one) samples
what the eager step samples, kept rows sample what dropped rows sample, and an in-place weight update reaches the
captured graph. Skipped without a GPU (conftest.py); the CPU twins are
tests/rl_core/generation/test_static_decode.py."""

from __future__ import annotations

import pytest
import torch

from rl_core.generation import Generator
from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.tasks import Problem
from tests.rl_core.generation.test_static_decode import check_update_reaches_step
from tests.support.tiny import small_recipe

CUDA = torch.device("cuda:0")
TINY = ModelConfig(preset="tiny", hidden_size=32, intermediate_size=64)
PROBLEMS = [Problem("a", "1+2=", "3"), Problem("b", "123+4567=", "4690"), Problem("c", "sort:9=", "9")]


def _model(dtype: str = "float32", arch: str = "llama") -> torch.nn.Module:
    cfg = ModelConfig(preset="tiny", arch=arch, hidden_size=64, intermediate_size=128)  # type: ignore[arg-type]
    return build_model(cfg, build_tokenizer(cfg), CUDA, dtype=dtype, fp32_lm_head=True)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["graph", "inductor-graph"])
def test_captured_step_samples_the_eager_tokens_and_the_dropped_rows_tokens(mode: str) -> None:
    model, tok = _model(), build_tokenizer(TINY)
    runs = {}
    for name, kw in {
        "dynamic": {"decode": "dynamic"},
        "eager": {"decode": "static", "compile": "eager"},
        mode: {"decode": "static", "compile": mode},
    }.items():
        gen = Generator(model, tok, small_recipe(), device=CUDA, seed=7, **kw)  # type: ignore[arg-type]
        runs[name] = gen.generate(PROBLEMS, 8)
    assert len({len(r.response_ids) for r in runs["dynamic"]}) > 1
    for name in ("eager", mode):
        assert [r.response_ids for r in runs[name]] == [r.response_ids for r in runs["dynamic"]], name
        for a, b in zip(runs[name], runs["dynamic"], strict=True):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4, rtol=0)


@pytest.mark.parametrize("mode", ["graph", "inductor-graph"])
def test_an_in_place_update_reaches_the_captured_graph(mode: str) -> None:
    check_update_reaches_step(_model(), build_tokenizer(TINY), mode, atol=1e-4)  # type: ignore[arg-type]


def test_bf16_qwen2_graph_step_matches_a_fresh_eager_model_after_an_update() -> None:
    check_update_reaches_step(_model("bfloat16", "qwen2"), build_tokenizer(TINY), "graph", atol=5e-2)  # type: ignore[arg-type]
