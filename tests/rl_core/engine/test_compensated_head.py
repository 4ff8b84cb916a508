"""The error-compensated tensor-core head: bf16 pieces whose cross products restore float32 accuracy, fused
with the log-softmax and chunked over tokens. Accuracy against the exact FP32 head on a sampled batch of the
project's tiny models (max |delta log-prob| <= 1e-5), gradients against the unfused path, and no [N, V] tensor
saved for backward."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from rl_core.algorithms.fp32_head import FP32LMHead, enable_fp32_lm_head
from rl_core.algorithms.fused_head import fused_head_logprobs
from rl_core.algorithms.split_matmul import compensated_mm, pieces
from rl_core.engine.batch import Group, Sample, TrainBatch, build_train_batch, group_rewards
from rl_core.engine.trainer import micro_batch_loss, response_logprobs
from rl_core.models import ModelConfig, build_model, build_tokenizer
from rl_core.recipe import apply_overrides

from .test_trainers import RECIPE

BOUND = 1e-5  # max |delta log-prob| against the exact FP32 head
HEAD_SCALE = {"tiny": 4.5, "small": 3.0}  # mean next-token entropy ~1.5-2 nats (measured; random init: ~4.6 = log V)


def test_three_bf16_pieces_hold_a_float32_number_to_its_last_bits() -> None:
    x = torch.randn(4096) * torch.logspace(-20, 20, 4096)
    for count, bits in ((1, 8), (2, 16), (3, 24)):
        parts = pieces(x, count)
        assert all(p.dtype == torch.bfloat16 for p in parts)
        total = sum(p.double() for p in parts)
        rel = ((total - x.double()).abs() / x.double().abs()).max().item()
        assert rel <= 2.0**-bits, (count, rel)


def test_compensated_matmul_is_as_accurate_as_float32_and_bf16_alone_is_not() -> None:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(64, 512, generator=g)
    b = torch.randn(512, 300, generator=g) * 0.05
    exact = a.double() @ b.double()
    fp32_err = (torch.mm(a, b).double() - exact).abs().max().item()
    err = {s: (compensated_mm(a, b, s).double() - exact).abs().max().item() for s in ("bfloat16", "bf16x3", "bf16x6")}
    assert err["bf16x6"] <= fp32_err  # small products first: no worse than a float32 matmul
    assert err["bf16x3"] > 4 * fp32_err  # two pieces: 16 bits, measurably short of float32
    assert err["bfloat16"] > 100 * err["bf16x3"]
    # bfloat16 operands need no pieces: every scheme is the one exact product.
    a16, b16 = a.bfloat16(), b.bfloat16()
    assert torch.equal(compensated_mm(a16, b16, "bf16x6"), a16.float() @ b16.float())


def _sampled_batch(preset: str, seed: int) -> tuple[torch.nn.Module, TrainBatch]:
    """A tiny model with the exact FP32 head, its head scaled so next-token entropy is ~1-2 nats (like a trained
    model at temperature 1, not the near-uniform random init), and a ScaleRL batch of responses it sampled."""
    cfg = ModelConfig.model_validate({"preset": preset})
    tok = build_tokenizer(cfg)
    model = build_model(cfg, tok, fp32_lm_head=True)
    with torch.no_grad():
        model.get_output_embeddings().weight.mul_(HEAD_SCALE[preset])
    torch.manual_seed(seed)
    vocab = int(model.config.vocab_size)
    groups = []
    for p in range(3):
        prompt = torch.randint(4, vocab, (1, 6 + p))
        with torch.no_grad():
            seqs = model.generate(
                prompt.repeat(4, 1), max_new_tokens=24, min_new_tokens=24, do_sample=True, top_k=0, pad_token_id=0
            )
        samples = tuple(
            Sample(
                problem_id=f"p{p}",
                prompt_ids=prompt[0].tolist(),
                response_ids=seqs[i, prompt.shape[1] :].tolist(),
                logprobs=[-1.0] * 24,
                versions=[0] * 24,
                loss_mask=[1] * 24,
                correct=i % 2 == 0,
            )
            for i in range(4)
        )
        groups.append(Group(f"p{p}", samples))
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    model.train()
    return model, batch


@pytest.mark.parametrize("preset", ["tiny", "small"])
def test_compensated_fused_head_matches_the_exact_fp32_head_on_a_sampled_batch(preset: str) -> None:
    model, batch = _sampled_batch(preset, seed=1)
    ids, attn, mask = batch.input_ids, batch.attention_mask, batch.mask.bool()
    with torch.no_grad():
        exact, exact_ent = response_logprobs(model, ids, attn, batch, RECIPE, chunk_tokens=None)
        assert 0.5 < exact_ent[mask].mean() < 3.0  # neither near-uniform (log V = 4.6) nor near-deterministic
        deltas = {}
        for scheme in ("bf16x6", "bf16x3", "bfloat16"):
            enable_fp32_lm_head(model, scheme)  # type: ignore[arg-type]
            lp, ent = response_logprobs(model, ids, attn, batch, RECIPE, chunk_tokens=7)
            deltas[scheme] = (lp - exact)[mask].abs().max().item()
            if scheme == "bf16x6":
                assert (ent - exact_ent)[mask].abs().max().item() <= BOUND
    assert deltas["bf16x6"] <= BOUND, deltas
    assert deltas["bfloat16"] > 10 * BOUND, deltas  # the plain tensor-core head misses the bound


@pytest.mark.parametrize(("scheme", "temperature"), [("bf16x6", 1.0), ("bf16x6", 0.7), ("float32", 1.0)])
def test_fused_chunked_gradients_equal_the_unfused_path(scheme: str, temperature: float) -> None:
    model, batch = _sampled_batch("tiny", seed=2)
    enable_fp32_lm_head(model, scheme)  # type: ignore[arg-type]
    recipe = apply_overrides(RECIPE, {"sampling.temperature": temperature, "precision.lm_head_operands": scheme})
    other = copy.deepcopy(model)
    rows = slice(0, batch.rows)
    cpu = torch.device("cpu")
    micro_batch_loss(model, batch, rows, recipe, cpu, chunk_tokens=None).loss.backward()  # whole logits
    micro_batch_loss(other, batch, rows, recipe, cpu, chunk_tokens=5).loss.backward()  # fused, 5 tokens a chunk
    full = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    fused = {n: p.grad for n, p in other.named_parameters() if p.grad is not None}
    assert full.keys() == fused.keys() and full
    for name, g in full.items():
        torch.testing.assert_close(fused[name], g, atol=1e-6, rtol=1e-4, msg=name)


def test_the_fused_head_saves_no_logits_for_backward() -> None:
    n, h, v, chunk = 96, 32, 500, 16
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(n, h, generator=g, requires_grad=True)
    weight = (torch.randn(v, h, generator=g) * 0.2).requires_grad_()
    targets = torch.randint(0, v, (n,), generator=g)
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        lp, ent = fused_head_logprobs(hidden, weight, None, targets, scheme="bf16x6", chunk=chunk)
    assert max(saved) <= v * h  # hidden, weight, targets, log-sum-exp: nothing of size n x v
    assert not ent.requires_grad and lp.requires_grad
    ref = torch.log_softmax(hidden.double() @ weight.double().t(), -1).gather(-1, targets[:, None]).squeeze(-1)
    assert (lp.double() - ref).abs().max().item() <= BOUND
    lp.sum().backward()
    assert hidden.grad is not None and weight.grad is not None
    assert math.isfinite(float(weight.grad.abs().sum()))


def test_the_head_keeps_its_parameters_and_reports_exact_operands_for_compensated_schemes() -> None:
    cfg = ModelConfig.model_validate({"preset": "tiny"})
    model = build_model(cfg, build_tokenizer(cfg), fp32_lm_head=True, lm_head_operands="bf16x6")
    head = model.get_output_embeddings()
    assert isinstance(head, FP32LMHead) and head.scheme == "bf16x6"
    assert head.weight is model.get_input_embeddings().weight  # tied embeddings stay tied
    assert head.operands == torch.float32  # an exact reimplementation (the static decoder) computes float32
    enable_fp32_lm_head(model, "bfloat16")
    assert head.scheme == "bfloat16" and head.operands == torch.bfloat16
    with pytest.raises(ValueError, match="operands must be"):
        enable_fp32_lm_head(model, "tf32")  # type: ignore[arg-type]
