"""The engine with ``generator.backend: vllm``: a real PipelineRL run whose generator process is vLLM, weights
reaching it in flight over the engine's weight channel (shared memory, then gloo buckets)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("vllm")

from rl_core.contracts.points import read_points
from rl_core.contracts.run_config import parse_run_config
from rl_core.engine.runner import run
from tests.support.tiny_run import tiny_config

VLLM_MODEL = {
    "preset": "tiny",
    "arch": "qwen2",
    "num_hidden_layers": 1,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 2,  # head_dim 32: vLLM's CPU attention needs >= 32
    "num_key_value_heads": 1,
}


@pytest.mark.parametrize("transport", ["shared_memory", "gloo"])
def test_the_engine_trains_with_a_vllm_generator(tmp_path: Path, transport: str) -> None:
    cfg = tiny_config(
        **{
            "model": VLLM_MODEL,
            "generator.backend": "vllm",
            "generator.vllm": {"max_num_seqs": 16},
            "weight_sync": {"transport": transport},
            "budget.steps": 5,
        }
    )
    result = run(parse_run_config(cfg), tmp_path)
    assert result.status == "succeeded", result.reason
    points = read_points(tmp_path / "metrics.jsonl")
    assert [p.step for p in points] == [0, 1, 2, 3, 4, 5]
    steps = points[1:]
    # Pipeline k=2: every token at most 2 versions old, which needs the weights to reach vLLM (undelivered
    # updates would leave every token at version 0, 4 behind at the last step) ...
    assert all(p.metrics["train/staleness_max"] <= 2 for p in steps)
    # ... and some responses were generated across a weight update (in-flight, the KV cache kept).
    assert max(p.metrics["train/mixed_version_fraction"] for p in steps) > 0
    assert all(p.metrics["train/tokens"] > 0 for p in steps if p.metrics["train/skipped"] == 0.0)
