"""The FP32-accurate tensor-core head on CUDA: bf16x6 through ``torch.mm(..., out_dtype=float32)`` (no
fallback warning), as accurate as the exact float32 head, fused and chunked with the gradients of the unfused path,
and the engine colocated on one GPU running sync. Skipped without a GPU (conftest.py)."""

from __future__ import annotations

import copy

import torch

from rl_core.algorithms import split_matmul
from rl_core.algorithms.fused_head import fused_head_logprobs
from rl_core.engine.admission import AdmissionPolicy
from rl_core.engine.schedule import choose_schedule
from rl_core.engine.trainer import micro_batch_loss
from tests.rl_core.engine.test_compensated_head import BOUND, _sampled_batch

CUDA = torch.device("cuda:0")


def test_bf16x6_on_tensor_cores_is_as_accurate_as_float32() -> None:
    split_matmul._OUT_DTYPE_MM.pop("cuda", None)
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 reference at full float32 precision
    g = torch.Generator(device=CUDA).manual_seed(0)
    a = torch.randn(2048, 896, device=CUDA, generator=g)
    b = torch.randn(896, 8192, device=CUDA, generator=g) * 0.1
    exact = a.double() @ b.double()
    fp32 = (torch.mm(a, b).double() - exact).abs().max().item()
    x6 = (split_matmul.compensated_mm(a, b, "bf16x6").double() - exact).abs().max().item()
    assert split_matmul._OUT_DTYPE_MM.get("cuda", True) is True  # the tensor-core op, not the fallback
    assert x6 <= 2 * fp32, (x6, fp32)


def test_fused_head_on_cuda_meets_the_bound_and_the_unfused_gradients() -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    model, batch = _sampled_batch("small", seed=3)
    model = model.to(CUDA)
    from rl_core.algorithms.fp32_head import enable_fp32_lm_head
    from rl_core.engine.trainer import response_logprobs
    from tests.rl_core.engine.test_trainers import RECIPE

    ids, attn, mask = batch.input_ids.to(CUDA), batch.attention_mask.to(CUDA), batch.mask.bool().to(CUDA)
    with torch.no_grad():
        exact, _ = response_logprobs(model, ids, attn, batch, RECIPE, chunk_tokens=None)
        enable_fp32_lm_head(model, "bf16x6")
        lp, _ = response_logprobs(model, ids, attn, batch, RECIPE, chunk_tokens=16)
    assert (lp - exact)[mask].abs().max().item() <= BOUND
    other = copy.deepcopy(model)
    rows = slice(0, batch.rows)
    micro_batch_loss(model, batch, rows, RECIPE, CUDA, chunk_tokens=None).loss.backward()
    micro_batch_loss(other, batch, rows, RECIPE, CUDA, chunk_tokens=16).loss.backward()
    for (name, p), q in zip(model.named_parameters(), other.parameters(), strict=True):
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-3, msg=name)
    h = torch.randn(64, 32, device=CUDA, requires_grad=True)
    w = torch.randn(100, 32, device=CUDA, requires_grad=True)
    out, ent = fused_head_logprobs(h, w, None, torch.randint(0, 100, (64,), device=CUDA), scheme="bf16x6", chunk=8)
    out.sum().backward()
    assert out.device.type == "cuda" and not ent.requires_grad and h.grad is not None


def test_one_shared_gpu_runs_sync() -> None:
    choice = choose_schedule(AdmissionPolicy(mode="pipeline", k=8), "cuda:0", ["cuda:0"])
    assert choice.used.mode == "sync" and choice.note
    if torch.cuda.device_count() > 1:
        assert not choose_schedule(AdmissionPolicy(mode="pipeline", k=8), "cuda:0", ["cuda:1"]).changed
