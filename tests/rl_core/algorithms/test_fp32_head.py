"""FP32 LM head on tiny HF causal LMs (built from configs, no downloads): dtype, tying, gradients, log-probs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from rl_core.algorithms.fp32_head import (
    FP32LMHead,
    enable_fp32_lm_head,
    has_fp32_lm_head,
    logprobs_from_logits,
    token_logprobs,
)

SMALL = {
    "vocab_size": 96,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}


def _qwen(tied: bool = False, seed: int = 0) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(Qwen2Config(**SMALL, tie_word_embeddings=tied)).eval()


def _llama(tied: bool = True, seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**SMALL, tie_word_embeddings=tied)).eval()


def _ids(batch: int = 2, length: int = 7, seed: int = 1) -> torch.Tensor:
    return torch.randint(1, SMALL["vocab_size"], (batch, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_head_computes_fp32_logits_from_the_stored_weight(dtype: torch.dtype) -> None:
    model = _qwen().to(dtype)
    weight = model.lm_head.weight
    keys = list(model.state_dict())
    enable_fp32_lm_head(model)
    assert has_fp32_lm_head(model) and isinstance(model.lm_head, torch.nn.Linear)
    assert model.lm_head.weight is weight and weight.dtype == dtype
    assert list(model.state_dict()) == keys
    captured: list[torch.Tensor] = []
    model.lm_head.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    with torch.no_grad():
        logits = model(_ids()).logits
    assert logits.dtype == torch.float32
    hidden = captured[0]
    assert hidden.dtype == dtype  # the body stays in reduced precision
    assert torch.equal(logits, F.linear(hidden.float(), weight.float()))
    # Without the head the same hidden state gives logits rounded to the reduced dtype.
    assert not torch.equal(logits, F.linear(hidden, weight).float())


def test_enable_is_idempotent_and_rejects_non_lms() -> None:
    model = _qwen()
    enable_fp32_lm_head(model)
    head = model.lm_head
    enable_fp32_lm_head(model)
    assert model.lm_head is head
    with pytest.raises(TypeError, match="not a causal LM"):
        enable_fp32_lm_head(torch.nn.Linear(2, 2))


@pytest.mark.parametrize("make", [_llama, lambda: _qwen(tied=True)])
def test_tied_embeddings_stay_tied_and_train_the_same_weight(make) -> None:  # type: ignore[no-untyped-def]
    reference, patched = make(), make()
    enable_fp32_lm_head(patched)
    emb = patched.get_input_embeddings().weight
    assert patched.lm_head.weight is emb
    patched.tie_weights()
    assert isinstance(patched.lm_head, FP32LMHead) and patched.lm_head.weight is emb
    assert len(list(patched.parameters())) == len(list(reference.parameters()))
    ids = _ids()
    for m in (reference, patched):
        m.zero_grad()
        m(ids, labels=ids).loss.backward()
    # In fp32 the FP32 head is a no-op numerically: identical loss gradients reach the one shared weight.
    assert torch.allclose(emb.grad, reference.get_input_embeddings().weight.grad, atol=1e-6)  # type: ignore[arg-type]
    assert patched.lm_head.weight.grad is emb.grad


def test_head_ignores_autocast() -> None:
    model = _qwen()
    enable_fp32_lm_head(model)
    ids = _ids()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(ids).logits
    assert logits.dtype == torch.float32


def test_generate_works_with_the_fp32_head() -> None:
    model = _qwen().to(torch.bfloat16)
    enable_fp32_lm_head(model)
    out = model.generate(_ids(1, 4), max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert out.shape == (1, 9)


def test_token_logprobs_matches_manual_log_softmax_and_temperature() -> None:
    model = _qwen()
    ids = _ids()
    with torch.no_grad():
        lp = token_logprobs(model, ids, temperature=0.7)
        logits = model(ids).logits[:, :-1] / 0.7
    manual = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
    assert lp.shape == (2, 6) and torch.allclose(lp, manual, atol=1e-6)
    assert torch.allclose(logprobs_from_logits(logits * 0.7, ids[:, 1:], 0.7), manual, atol=1e-6)


def test_token_logprobs_with_left_padding_uses_generation_positions() -> None:
    model = _qwen()
    ids = _ids(1, 6)
    padded = torch.cat([torch.zeros(1, 3, dtype=ids.dtype), ids], dim=1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones(1, 6, dtype=torch.long)], dim=1)
    with torch.no_grad():
        plain = token_logprobs(model, ids)
        left = token_logprobs(model, padded, mask)
    assert torch.allclose(left[:, 3:], plain, atol=1e-5)


def test_token_logprobs_is_differentiable() -> None:
    model = _qwen()
    enable_fp32_lm_head(model)
    lp = token_logprobs(model, _ids())
    lp.sum().backward()
    assert model.lm_head.weight.grad is not None and model.model.embed_tokens.weight.grad is not None


@pytest.mark.parametrize("tied", [True, False])
def test_save_and_reload_keep_weights_and_tying(tmp_path, tied: bool) -> None:  # type: ignore[no-untyped-def]
    model = _qwen(tied=tied)
    enable_fp32_lm_head(model)
    model.save_pretrained(tmp_path)
    reloaded = Qwen2ForCausalLM.from_pretrained(tmp_path).eval()
    enable_fp32_lm_head(reloaded)
    assert (reloaded.lm_head.weight is reloaded.get_input_embeddings().weight) is tied
    ids = _ids()
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded(ids).logits)


@pytest.mark.parametrize("mode", ["no_grad", "inference_mode"])
def test_generation_upcasts_the_head_once_per_weight_update(mode: str) -> None:
    model = _qwen(tied=True).to(torch.bfloat16)
    enable_fp32_lm_head(model)
    head = model.get_output_embeddings()
    ids = _ids()
    context = torch.no_grad if mode == "no_grad" else torch.inference_mode
    with context():
        first = model(ids).logits
        cached = head.__dict__["_fp32_cache"][1]
        again = model(ids).logits
        assert head.__dict__["_fp32_cache"][1] is cached  # no new upcast while the weight is unchanged
        torch.testing.assert_close(again, first, rtol=0, atol=0)
        # An in-place load (what a generator's weight update does) invalidates the cached copy.
        head.weight.copy_(head.weight * 0.5)
        updated = model(ids).logits
    assert head.__dict__["_fp32_cache"][1] is not cached
    want = F.linear(model.model.norm(model.model(ids).last_hidden_state).float(), head.weight.float())
    torch.testing.assert_close(updated, want.detach(), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(updated, first)


def _hidden(model: Qwen2ForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    return model.model(ids).last_hidden_state


def test_bf16_operands_give_float32_logits_of_the_rounded_operands() -> None:
    model = _qwen(tied=True)  # float32 master weights, as in the trainer
    ids = _ids()
    exact = model(ids).logits
    enable_fp32_lm_head(model, "bfloat16")
    head = model.get_output_embeddings()
    assert isinstance(head, FP32LMHead) and head.operands == torch.bfloat16
    with torch.no_grad():
        h = _hidden(model, ids)
        want = F.linear(h.bfloat16().float(), head.weight.bfloat16().float())
        got = model(ids).logits
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    assert not torch.equal(got, exact)  # the operands really were rounded ...
    torch.testing.assert_close(got, exact, rtol=0.05, atol=0.05)  # ... by bf16's precision, no more
    enable_fp32_lm_head(model, "float32")  # a second call sets the operands
    assert head.operands == torch.float32
    with pytest.raises(ValueError, match="operands must be"):
        enable_fp32_lm_head(model, "float16")  # type: ignore[arg-type]


def test_bf16_operands_backward_matches_the_rounded_reference() -> None:
    torch.manual_seed(3)
    hidden = torch.randn(2, 5, 64, requires_grad=True)
    linear = torch.nn.Linear(64, 96, bias=False)
    head = FP32LMHead.wrapping(linear, "bfloat16")
    upstream = torch.randn(2, 5, 96)
    (head(hidden) * upstream).sum().backward()
    ref_h = hidden.detach().clone().requires_grad_(True)
    ref_w = linear.weight.detach().clone().requires_grad_(True)
    # Straight-through rounding: the gradient of the rounded-operand matmul with respect to each operand.
    h16 = ref_h + (ref_h.bfloat16().float() - ref_h).detach()
    w16 = ref_w + (ref_w.bfloat16().float() - ref_w).detach()
    (F.linear(h16, w16) * upstream).sum().backward()
    assert hidden.grad is not None and linear.weight.grad is not None
    assert hidden.grad.dtype == torch.float32 and linear.weight.grad.dtype == torch.float32
    # The incoming gradient is rounded to bf16 too: agreement to bf16 precision.
    torch.testing.assert_close(hidden.grad, ref_h.grad, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(linear.weight.grad, ref_w.grad, rtol=2e-2, atol=2e-2)


def test_in_a_bf16_generator_both_operand_modes_compute_the_same_logits() -> None:
    ids = _ids()
    fp32_ops = enable_fp32_lm_head(_qwen(tied=True).to(torch.bfloat16), "float32")
    bf16_ops = enable_fp32_lm_head(_qwen(tied=True).to(torch.bfloat16), "bfloat16")
    with torch.no_grad():
        torch.testing.assert_close(bf16_ops(ids).logits, fp32_ops(ids).logits, rtol=1e-6, atol=1e-5)


def test_a_missing_out_dtype_matmul_falls_back_loudly_to_the_same_logits(monkeypatch: pytest.MonkeyPatch) -> None:
    from rl_core.algorithms import split_matmul

    monkeypatch.setattr(split_matmul, "_OUT_DTYPE_MM", {"cpu": True})  # pretend the CPU has the tensor-core op
    a = torch.randn(4, 16).bfloat16()
    b = torch.randn(16, 8).bfloat16()
    with pytest.warns(RuntimeWarning, match="falls back to a float32 matmul"):
        out = split_matmul.mm_float_out(a, b)  # this CPU build has no out_dtype matmul: it must say so
    torch.testing.assert_close(out, a.float() @ b.float())
    assert split_matmul._OUT_DTYPE_MM["cpu"] is False  # asked once, then remembered
