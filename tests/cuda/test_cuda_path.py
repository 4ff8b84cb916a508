"""The GPU path on CUDA: the tensor-core FP32 head, the KV-cache generator with in-flight updates,
SharedWeights over CUDA IPC, DeepSpeed ZeRO 1-3, and the engine colocated on one GPU.

Each test is the CUDA counterpart of a CPU test (tests/rl_core/algorithms/test_fp32_head.py,
tests/rl_core/generation/, tests/rl_core/engine/test_weight_sync.py, tests/rl_core/engine/test_trainers.py,
tests/rl_core/engine/test_engine.py) and checks numbers, not only that the code runs. Skipped without a GPU
(conftest.py)."""

from __future__ import annotations

import copy
import importlib.util
import math
from pathlib import Path
from typing import Literal

import pytest
import torch
import torch.multiprocessing as mp
import torch.nn.functional as F

from rl_core.algorithms import fp32_head
from rl_core.algorithms.fp32_head import FP32LMHead
from rl_core.contracts.points import read_points
from rl_core.contracts.run_config import parse_run_config
from rl_core.engine.batch import build_train_batch, group_rewards
from rl_core.engine.runner import run
from rl_core.engine.trainer import TorchTrainer
from rl_core.engine.weights import SharedWeights
from rl_core.generation import Generator
from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.recipe import Recipe, apply_overrides
from rl_core.tasks import Problem
from tests.cuda.ipc_reader import read_versions
from tests.rl_core.engine.test_trainers import RECIPE, _groups, _model, assert_deepspeed_matches_torch
from tests.rl_core.generation.test_generator import _trainer_logprobs
from tests.support.tiny_run import tiny_config

CUDA = torch.device("cuda:0")
TINY = ModelConfig(preset="tiny", hidden_size=32, intermediate_size=64)
PROBLEMS = [Problem("a", "1+2=", "3"), Problem("b", "123+4567=", "4690"), Problem("c", "12+34=", "46")]


def _recipe(**overrides: object) -> Recipe:
    base: dict[str, object] = {"length.mode": "none", "length.max_response_tokens": 24}
    base.update(overrides)
    return apply_overrides(Recipe(), base)


# ---- FP32 head on bf16 operands -------------------------------------------------------------------------------


def test_bf16_operand_head_runs_one_tensor_core_matmul_with_float32_output() -> None:
    fp32_head._OUT_DTYPE_MM.pop("cuda", None)
    g = torch.Generator(device=CUDA).manual_seed(1)
    a = torch.randn(64, 896, device=CUDA, generator=g).bfloat16()
    b = torch.randn(896, 4096, device=CUDA, generator=g).bfloat16()
    out = fp32_head._mm_float_out(a, b)  # a fallback would warn, and RuntimeWarnings from rl_core are errors here
    assert fp32_head._OUT_DTYPE_MM.get("cuda", True) is True  # set to False only when the op is missing
    assert out.dtype == torch.float32 and out.device.type == "cuda"
    ref = a.double() @ b.double()  # the exact product of the rounded operands
    assert float((out.double() - ref).norm() / ref.norm()) < 1e-5  # float32 accumulation, not bf16 output
    assert not torch.equal(out, (a @ b).float())  # a bf16-output matmul rounds the result: different numbers


def test_fp32_head_on_cuda_gives_the_cpu_logits_and_gradients() -> None:
    torch.manual_seed(0)
    hidden = torch.randn(2, 5, 64)
    linear = torch.nn.Linear(64, 300, bias=False)
    upstream = torch.randn(2, 5, 300)
    results = {}
    for dev in ("cpu", "cuda"):
        for operands in (torch.float32, torch.bfloat16):
            head = FP32LMHead.wrapping(copy.deepcopy(linear).to(dev), operands)
            h = hidden.detach().clone().to(dev).requires_grad_(True)
            with torch.autocast(dev, dtype=torch.bfloat16):  # the head ignores autocast on CUDA too
                logits = head(h)
            assert logits.dtype == torch.float32
            (logits * upstream.to(dev)).sum().backward()
            assert h.grad is not None and head.weight.grad is not None
            results[dev, operands] = (logits.detach().cpu(), h.grad.cpu(), head.weight.grad.cpu())
    for operands, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        for got, want in zip(results["cuda", operands], results["cpu", operands], strict=True):
            assert float((got - want).norm() / want.norm()) < tol


# ---- the KV-cache generator and in-flight weight updates --------------------------------------------------------


def test_kv_cache_generator_on_cuda_reports_the_trainers_logprobs() -> None:
    tok = build_tokenizer(TINY)
    model = build_model(TINY, tok, CUDA, fp32_lm_head=True)
    rollouts = Generator(model, tok, _recipe(**{"precision.generator_dtype": "float32"}), seed=1).generate(PROBLEMS, 4)
    assert {len(r.response_ids) for r in rollouts} != {24}  # some rows stopped early and left the batch
    for r, ref in zip(rollouts, _trainer_logprobs(model, rollouts), strict=True):
        assert torch.allclose(torch.tensor(r.logprobs), ref, atol=1e-4, rtol=0)
    bf16 = build_model(TINY, tok, CUDA, dtype="bfloat16", fp32_lm_head=True)
    rollouts = Generator(bf16, tok, _recipe(), seed=0).generate(PROBLEMS, 2)
    for r, ref in zip(rollouts, _trainer_logprobs(bf16, rollouts), strict=True):
        assert float((torch.tensor(r.logprobs) - ref).abs().max()) < 0.1  # bf16 noise, as on the CPU


def test_an_in_flight_update_on_cuda_changes_the_policy_mid_sequence_in_place() -> None:
    tok = build_tokenizer(TINY)
    model = build_model(TINY, tok, CUDA, dtype="bfloat16", fp32_lm_head=True)
    recipe = _recipe()
    baseline = Generator(copy.deepcopy(model), tok, recipe, seed=3).generate(PROBLEMS, 3)
    silenced = {k: v.clone() for k, v in model.state_dict().items()}
    silenced["model.norm.weight"].zero_()  # hidden state 0: a uniform next-token distribution
    calls = [0]

    def poll() -> tuple[int, dict[str, torch.Tensor]] | None:
        calls[0] += 1
        return (7, silenced) if calls[0] == 5 else None  # after decode step 4

    ptrs = {n: p.data_ptr() for n, p in model.named_parameters()}
    swapped = Generator(model, tok, recipe, seed=3).generate(PROBLEMS, 3, weights=poll)
    uniform = -math.log(model.config.vocab_size)
    long_rows = 0
    for before, after in zip(baseline, swapped, strict=True):
        k = min(4, len(after.response_ids))
        assert after.response_ids[:k] == before.response_ids[:k]
        assert after.versions == [0] * k + [7] * (len(after.response_ids) - k)
        assert all(abs(lp - uniform) < 1e-3 for lp in after.logprobs[k:])
        long_rows += len(after.response_ids) > 4
    assert long_rows >= 3
    assert {n: p.data_ptr() for n, p in model.named_parameters()} == ptrs  # loaded in place, on the GPU


# ---- SharedWeights over CUDA IPC --------------------------------------------------------------------------------


def test_shared_weights_reach_a_spawned_process_over_cuda_ipc_exactly_and_in_order() -> None:
    tok = build_tokenizer(TINY)
    trainer_model = build_model(TINY, tok, CUDA, dtype="float32")
    state = trainer_model.state_dict()
    shared = SharedWeights(state, device=CUDA, dtype=torch.bfloat16, timeout_s=60)
    ctx = mp.get_context("spawn")
    go, back = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=read_versions, args=(shared, go, back), daemon=True)
    proc.start()
    try:
        ready = back.get(timeout=120)
        assert ready[0] == "ready", ready
        assert set(ready[1].values()) == {"cuda:0"}  # the reader maps the trainer's GPU copy, no host copy
        for version in (1, 2, 3):
            with torch.no_grad():
                for v in state.values():
                    if v.is_floating_point():
                        v.normal_()
            want = {k: v.to(torch.bfloat16).cpu() for k, v in state.items() if v.is_floating_point()}
            shared.publish(state, version)
            go.put(version)
            kind, got, tensors = back.get(timeout=120)
            assert kind == "ok" and got == version
            assert tensors.keys() == want.keys()
            for k in want:
                assert torch.equal(tensors[k], want[k]), k
        go.put(None)
        proc.join(timeout=60)
        assert proc.exitcode == 0
    finally:
        if proc.is_alive():
            proc.terminate()


# ---- trainers ----------------------------------------------------------------------------------------------------


def test_torch_trainer_on_cuda_takes_the_cpu_step() -> None:
    base = _model()
    groups = _groups(base)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    cpu = TorchTrainer(copy.deepcopy(base), RECIPE, device=torch.device("cpu"), micro_batch_size=3)
    gpu = TorchTrainer(copy.deepcopy(base), RECIPE, device=CUDA, micro_batch_size=2)
    for _ in range(2):
        a, b = cpu.step(batch), gpu.step(batch)
        assert b.loss == pytest.approx(a.loss, rel=1e-4, abs=1e-6)
    want, got = cpu.weights(), gpu.weights()
    for k in want:
        torch.testing.assert_close(got[k].float().cpu(), want[k].float(), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed")
@pytest.mark.parametrize("stage", [1, 2, 3])
def test_deepspeed_zero_on_cuda_matches_the_torch_trainer(stage: int, tmp_path: Path) -> None:
    if torch.distributed.is_initialized() and torch.distributed.get_backend() != "nccl":
        pytest.skip("this process's group is not NCCL (a CPU DeepSpeed test ran first): run tests/cuda on its own")
    assert_deepspeed_matches_torch(CUDA, stage, tmp_path)


# ---- the engine colocated on one GPU ------------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "k"), [("pipeline", 2), ("sync", 1)])
def test_the_engine_runs_colocated_on_one_gpu_in_bf16(tmp_path: Path, mode: str, k: int) -> None:
    cfg = tiny_config(
        **{
            "device": "cuda",
            "recipe.pipeline": {"mode": mode, "k": k},
            "recipe.precision": {"generator_dtype": "bfloat16", "trainer_dtype": "bfloat16"},
        }
    )
    result = run(parse_run_config(cfg), tmp_path)
    assert result.status == "succeeded", result.reason
    points = read_points(tmp_path / "metrics.jsonl")
    assert [p.step for p in points] == [0, 1, 2, 3, 4]
    for p in points[1:]:
        m = p.metrics
        assert math.isfinite(m["train/loss"]) and m["compute/flops"] > 0
        assert m["train/staleness_max"] <= (k if mode == "pipeline" else 0)
    assert points[-1].pass_rate is not None
    assert (tmp_path / "checkpoints" / "latest").read_text() == "step_000004"


def test_bf16_operand_head_trains_like_the_exact_head_on_cuda() -> None:
    from rl_core.engine.trainer import micro_batch_loss

    recipe = apply_overrides(RECIPE, {"precision.trainer_dtype": "bfloat16"})
    cfg = ModelConfig.model_validate({"preset": "tiny", "num_hidden_layers": 1, "hidden_size": 32})
    grads = {}
    operand_modes: tuple[Literal["float32", "bfloat16"], ...] = ("float32", "bfloat16")
    for operands in operand_modes:
        model = build_model(cfg, build_tokenizer(cfg), CUDA, fp32_lm_head=True, lm_head_operands=operands)
        model.train()
        groups = _groups(model)
        batch = build_train_batch(groups, group_rewards(groups, recipe), recipe, pad_id=0)
        assert batch is not None
        micro_batch_loss(model, batch, slice(0, batch.rows), recipe, CUDA).loss.backward()  # type: ignore[no-untyped-call]
        grads[operands] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    a, b = grads["float32"], grads["bfloat16"]
    assert not torch.equal(a, b)
    assert float(F.cosine_similarity(a, b, dim=0)) > 0.99
