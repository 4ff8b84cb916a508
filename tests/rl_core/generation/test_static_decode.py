"""The static-shape decoder: rows kept in place and masked give today's samples; compiled and eager
steps give the same tokens; an in-place weight update reaches the compiled step."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl_core.generation import Generator, sample_next
from rl_core.generation.sampling import sample_with_uniforms
from rl_core.generation.static import StaticDecoder, bucket, supports_static
from rl_core.models import ModelConfig, build_model
from rl_core.tasks import Problem
from tests.support.tiny import TINY, small_recipe

from .test_generator import _trainer_logprobs

PROBLEMS = [Problem("a", "1+2=", "3"), Problem("b", "123+4567=", "4690"), Problem("c", "sort:9=", "9")]

RECIPES = {
    "interruption": {},
    "no-length-control-t0.7": {"length.mode": "none", "length.max_response_tokens": 24, "sampling.temperature": 0.7},
    "top-p": {"sampling.top_p": 0.9, "length.mode": "none", "length.max_response_tokens": 30},
}


def _generate(model: PreTrainedModel, tok: PreTrainedTokenizerBase, name: str, **kw: object) -> list:  # type: ignore[type-arg]
    return Generator(model, tok, small_recipe(**RECIPES[name]), seed=3, **kw).generate(PROBLEMS, 4)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(RECIPES))
def test_rows_kept_in_place_sample_what_dropped_rows_sample(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, name: str
) -> None:
    dropped = _generate(model, tokenizer, name, decode="dynamic")
    kept = _generate(model, tokenizer, name, decode="static", compile="eager")
    assert len({len(r.response_ids) for r in dropped}) > 1  # rows finished at different steps
    for a, b in zip(dropped, kept, strict=True):
        assert a.response_ids == b.response_ids
        assert a.injected == b.injected and a.versions == b.versions and a.finish_reason == b.finish_reason
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=2e-6, rtol=0)


def test_static_logprobs_equal_the_trainers(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    rollouts = _generate(model, tokenizer, "no-length-control-t0.7", decode="static")
    for r, ref in zip(rollouts, _trainer_logprobs(model, rollouts, 0.7), strict=True):
        assert torch.allclose(torch.tensor(r.logprobs), ref, atol=2e-5, rtol=0)


def test_qwen2_with_biases_and_a_plain_head_decodes_like_hf(tokenizer: PreTrainedTokenizerBase) -> None:
    cfg = ModelConfig(preset="tiny", arch="qwen2", hidden_size=32, intermediate_size=64)
    model = build_model(cfg, tokenizer, fp32_lm_head=False)
    assert supports_static(model)
    dropped = _generate(model, tokenizer, "interruption", decode="dynamic")
    kept = _generate(model, tokenizer, "interruption", decode="static")
    assert [r.response_ids for r in dropped] == [r.response_ids for r in kept]


def test_static_generation_is_deterministic_and_reuses_one_decoder(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    gen = Generator(model, tokenizer, small_recipe(), seed=5, decode="static")
    first = gen.generate(PROBLEMS, 2)
    again = Generator(model, tokenizer, small_recipe(), seed=5, decode="static").generate(PROBLEMS, 2)
    assert [r.response_ids for r in first] == [r.response_ids for r in again]
    gen.generate(PROBLEMS[::-1], 2)  # other prompt widths, same batch: the same decoder
    assert len(gen._decoders) == 1


def test_uniform_sampling_draws_by_the_cdf_and_ignores_zero_mass() -> None:
    probs = torch.tensor([[0.0, 0.5, 0.0, 0.5]])
    logits = probs.log().repeat(4, 1)
    tokens, _ = sample_with_uniforms(logits, torch.tensor([0.0, 0.49, 0.51, 0.999999]), temperature=1.0, top_p=1.0)
    assert tokens.tolist() == [1, 1, 3, 3]
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(20000, 1)
    tokens, _ = sample_next(logits, temperature=1.0, top_p=1.0, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(tokens, minlength=4).float() / 20000
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.15, 0.05]), atol=0.015)


def _decoder_logits(dec: StaticDecoder, feed: torch.Tensor, slot: int) -> torch.Tensor:
    return dec.step(feed, slot, torch.rand(dec.batch))[2].clone()


def _reference_logits(model: torch.nn.Module, ids: torch.Tensor, feed: torch.Tensor) -> torch.Tensor:
    """A fresh eager HF forward of prompt + fed token, last position's float32 logits (on the CPU)."""
    dev = next(model.parameters()).device
    full = torch.cat([ids, feed.unsqueeze(1)], dim=1).to(dev)
    with torch.no_grad():
        return model(input_ids=full).logits[:, -1].float().cpu()


def check_update_reaches_step(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, mode: str, atol: float = 1e-5
) -> None:
    """A decode step of ``mode`` (on the model's device) gives a fresh eager forward's logits, before and after an
    in-place weight load through ``Generator.load_weights``."""
    torch.manual_seed(0)
    gen = Generator(model, tokenizer, small_recipe(), decode="static", compile=mode)  # type: ignore[arg-type]
    b, width = 3, 8
    ids = torch.randint(3, 40, (b, width))
    feed = torch.randint(3, 40, (b,))
    with torch.inference_mode():
        dec = gen._decoder(b, bucket(width + 16, 8))
        dec.prefill(ids, torch.ones_like(ids))
        before = _decoder_logits(dec, feed, width).cpu()
        assert torch.allclose(before, _reference_logits(model, ids, feed), atol=atol)
    with torch.no_grad():  # outside inference mode: the fresh model's tensors must be normal ones
        fresh = copy.deepcopy(model)
        for p in fresh.parameters():
            p.add_(torch.randn_like(p) * 0.2)
        state = {k: v.clone() for k, v in fresh.state_dict().items()}
    with torch.inference_mode():
        gen.load_weights(1, state)  # in place: the same tensors the step reads
        dec.prefill(ids, torch.ones_like(ids))
        after = _decoder_logits(dec, feed, width).cpu()
    assert not torch.allclose(before, after, atol=10 * atol)
    assert torch.allclose(after, _reference_logits(fresh, ids, feed), atol=atol)


def test_an_in_place_update_reaches_the_eager_static_step(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    check_update_reaches_step(model, tokenizer, "eager")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_compiled_step_samples_the_eager_tokens_and_sees_weight_updates(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    """torch.compile (inductor) of the decode step: same tokens as eager for the same seed and weights; after an
    in-place update its logits equal a fresh eager model's on the new weights."""
    torch._dynamo.reset()
    eager = _generate(model, tokenizer, "interruption", decode="static", compile="eager")
    compiled = _generate(model, tokenizer, "interruption", decode="static", compile="inductor")
    assert [r.response_ids for r in eager] == [r.response_ids for r in compiled]
    for a, b in zip(eager, compiled, strict=True):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=2e-5, rtol=0)
    check_update_reaches_step(model, tokenizer, "inductor")


def test_unsupported_models_fall_back_to_dynamic_decoding(tokenizer: PreTrainedTokenizerBase) -> None:
    model = build_model(TINY, tokenizer)
    model.config.model_type = "something-else"
    assert not supports_static(model)
    out = Generator(model, tokenizer, small_recipe(), seed=1).generate(PROBLEMS[:1], 2)
    assert len(out) == 2
    with pytest.raises(ValueError, match="static"):
        Generator(model, tokenizer, small_recipe(), decode="static").generate(PROBLEMS[:1], 1)


def test_weights_loaded_between_batches_outside_inference_mode_reach_the_next_batch(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    """Sync mode loads weights between ``generate`` calls, outside inference mode, into a decoder whose buffers
    (the float32 copy of a bf16 FP32 head) were made inside it."""
    model = build_model(TINY, tokenizer, dtype="bfloat16", fp32_lm_head=True)
    gen = Generator(model, tokenizer, small_recipe(), seed=1, decode="static")
    gen.generate(PROBLEMS[:1], 2)
    dec = next(iter(gen._decoders.values()))
    assert dec._head_w32 is not None
    state = {k: v + 0.5 for k, v in model.state_dict().items() if v.is_floating_point()}
    gen.load_weights(1, state)
    assert torch.equal(dec._head_w32, model.get_output_embeddings().weight.float())
    assert all(v == 1 for r in gen.generate(PROBLEMS[:1], 2) for v in r.versions)


def test_a_reseeded_generator_samples_what_a_fresh_one_samples(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    gen = Generator(model, tokenizer, small_recipe(), seed=11)
    gen.generate(PROBLEMS, 2)
    gen.reseed(4)
    fresh = Generator(model, tokenizer, small_recipe(), seed=4).generate(PROBLEMS, 2)
    assert [r.response_ids for r in gen.generate(PROBLEMS, 2)] == [r.response_ids for r in fresh]
