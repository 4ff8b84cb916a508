"""The base checkpoint: supervised warm-up, reproducible from a seed, cached by config hash, loadable by path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.models import base_checkpoint as bc
from rl_core.tasks import AdditionTaskConfig, MathTaskConfig
from tests.support.tiny import TINY

MATH = Path(__file__).resolve().parents[2] / "fixtures" / "math_small.jsonl"
TASK = AdditionTaskConfig(digits_max=2, train_size=50, validation_size=20)
SFT = bc.SFTConfig(steps=12, batch_size=16, warmup_steps=2, eval_prompts=8, answer_noise=0.5)


def _build(cache: Path, seed: int = 0) -> Path:
    return bc.build_base_checkpoint(TINY, TASK, seed=seed, cache_dir=cache, sft=SFT, demonstrations=200)


def test_reproducible_cached_and_loadable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = _build(tmp_path / "a")
    second = _build(tmp_path / "b")
    assert first.name == second.name == bc.base_checkpoint_key(TINY, TASK, SFT, 0)
    wa, wb = load_file(first / "model.safetensors"), load_file(second / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    info = bc.read_base_info(first)
    assert info.seed == 0 and info.sft["steps"] == 12 and info.pass_rate is not None and info.eval_prompts == 8
    assert info.final_loss > 0 and info.seconds > 0
    # Cached: a second call does not train again.
    monkeypatch.setattr(bc, "sft_train", lambda *a, **k: pytest.fail("retrained a cached checkpoint"))
    assert _build(tmp_path / "a") == first
    assert not [p for p in (tmp_path / "a").iterdir() if p.name.startswith(".")]  # no temporary leftovers
    # Loads like any local HF model, tokenizer included, and differs from the random init.
    cfg = ModelConfig(path=first)
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok)
    init = build_model(TINY, tok)
    assert tok.decode(tok("1+2=")["input_ids"]) == "<bos>1+2="
    assert not torch.equal(model.lm_head.weight, init.lm_head.weight)


def test_key_depends_on_every_input() -> None:
    base = bc.base_checkpoint_key(TINY, TASK, SFT, 0)
    assert bc.base_checkpoint_key(TINY, TASK, SFT, 1) != base
    assert bc.base_checkpoint_key(TINY.model_copy(update={"init_seed": 2}), TASK, SFT, 0) != base
    assert bc.base_checkpoint_key(TINY, TASK.model_copy(update={"digits_max": 3}), SFT, 0) != base
    assert bc.base_checkpoint_key(TINY, TASK, SFT.model_copy(update={"steps": 13}), 0) != base
    # Settings that do not change the weights do not change the key.
    assert bc.base_checkpoint_key(TINY, TASK, SFT.model_copy(update={"threads": 1, "eval_prompts": 0}), 0) == base


def test_default_cache_dir_follows_scalerl_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCALERL_HOME", str(tmp_path))
    assert bc.default_cache_dir() == tmp_path / "cache" / "base"


def test_math_task_cannot_be_a_warm_up_task(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synthetic task"):
        bc.build_base_checkpoint(
            TINY,
            MathTaskConfig(path=MATH, validation_size=2),  # type: ignore[arg-type]
            cache_dir=tmp_path,
        )


def test_answer_noise_changes_exactly_one_answer_digit_in_the_given_share() -> None:
    pairs = [(f"{i}+1=", f"<think>{i}+1+0={i + 1}</think>{i + 1}") for i in range(100, 1100)]
    assert bc.corrupt_answers(pairs, 0.0, seed=0) == pairs
    noisy = bc.corrupt_answers(pairs, 0.3, seed=0)
    assert noisy == bc.corrupt_answers(pairs, 0.3, seed=0) != bc.corrupt_answers(pairs, 0.3, seed=1)
    changed = 0
    for (p, clean), (q, dirty) in zip(pairs, noisy, strict=True):
        assert p == q
        think, answer = clean.split("</think>")
        dthink, danswer = dirty.split("</think>")
        assert dthink == think and len(danswer) == len(answer)  # the worked scratchpad stays correct
        diff = sum(a != b for a, b in zip(answer, danswer, strict=True))
        assert diff in (0, 1)
        changed += diff
    assert 250 <= changed <= 350
    assert bc.corrupt_answers([("p", "<think>x</think>abc")], 0.99, seed=0) == [("p", "<think>x</think>abc")]


@pytest.mark.parametrize(("run_seed", "base_seed", "expected"), [(3, None, 3), (3, 0, 0), (0, 5, 5)])
def test_the_base_model_seed_is_the_run_s_unless_the_config_fixes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_seed: int, base_seed: int | None, expected: int
) -> None:
    """Every seed of a grid can start from one base model (``base_checkpoint.seed``), as RL from one pretrained
    model does; without it each run seed warms up its own."""
    from rl_core.contracts.run_config import parse_run_config
    from rl_core.engine import models

    seen: dict[str, int] = {}

    def fake_build(model: object, task: object, *, seed: int, **_: object) -> Path:
        seen["seed"] = seed
        return tmp_path

    monkeypatch.setattr(bc, "build_base_checkpoint", fake_build)
    cfg = parse_run_config(
        {
            "seed": run_seed,
            "recipe": "scalerl",
            "model": {"preset": "tiny"},
            "task": {"kind": "synthetic-addition"},
            "budget": {"steps": 1},
            "base_checkpoint": {"enabled": True, "seed": base_seed},
        }
    )
    models.resolve_model_config(cfg)
    assert seen["seed"] == expected
