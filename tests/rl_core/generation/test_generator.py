"""The generator: KV-cache log-probs equal the trainer's, interruption, caps, stop tokens, determinism."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl_core.algorithms.fp32_head import token_logprobs
from rl_core.generation import Generator, Rollout, evaluate, sample_next
from rl_core.recipe import INTERRUPTION_PHRASE
from rl_core.tasks import Problem, build_task
from tests.support.tiny import small_recipe

PROBLEMS = [Problem("a", "1+2=", "3"), Problem("b", "123+4567=", "4690"), Problem("c", "sort:9=", "9")]


def _trainer_logprobs(model: torch.nn.Module, rollouts: list[Rollout], temperature: float = 1.0) -> list[torch.Tensor]:
    """token_logprobs on the finished sequences, left-padded into one batch (the trainer's computation), on the
    model's device; returned on the CPU."""
    seqs = [r.prompt_ids + r.response_ids for r in rollouts]
    width = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s)
        mask[i, width - len(s) :] = 1
    dev = next(model.parameters()).device
    with torch.no_grad():
        lp = token_logprobs(model, ids.to(dev), mask.to(dev), temperature=temperature).cpu()
    return [lp[i, width - len(r.response_ids) - 1 :] for i, r in enumerate(rollouts)]


def _check_invariants(r: Rollout) -> None:
    n = len(r.response_ids)
    assert len(r.logprobs) == len(r.versions) == len(r.loss_mask) == len(r.injected) == n
    assert all(lp == 0.0 for lp, inj in zip(r.logprobs, r.injected, strict=True) if inj)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_kv_cache_logprobs_equal_token_logprobs(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, temperature: float
) -> None:
    recipe = small_recipe(
        **{"length.mode": "none", "length.max_response_tokens": 24, "sampling.temperature": temperature}
    )
    rollouts = Generator(model, tokenizer, recipe, seed=1).generate(PROBLEMS, 4)
    assert [r.problem_id for r in rollouts] == [p.id for p in PROBLEMS for _ in range(4)]
    assert {len(r.response_ids) for r in rollouts} != {24}  # some rows stopped early (EOS) and left the batch
    for r, ref in zip(rollouts, _trainer_logprobs(model, rollouts, temperature), strict=True):
        _check_invariants(r)
        assert torch.allclose(torch.tensor(r.logprobs), ref, atol=2e-5, rtol=0), (r.logprobs, ref)
        assert all(v == 0 for v in r.versions)


def test_bf16_generator_with_fp32_head_matches_trainer_within_bf16_noise(tokenizer: PreTrainedTokenizerBase) -> None:
    from rl_core.models import build_model
    from tests.support.tiny import TINY

    model = build_model(TINY, tokenizer, dtype="bfloat16", fp32_lm_head=True)
    recipe = small_recipe(**{"length.mode": "none", "length.max_response_tokens": 16})
    rollouts = Generator(model, tokenizer, recipe, seed=0).generate(PROBLEMS, 2)
    for r, ref in zip(rollouts, _trainer_logprobs(model, rollouts, 1.0), strict=True):
        assert float((torch.tensor(r.logprobs) - ref).abs().max()) < 0.1


def test_interruption_injects_the_phrase_masks_it_and_gives_an_answer_budget(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    recipe = small_recipe()
    rollouts = Generator(model, tokenizer, recipe, seed=0).generate(PROBLEMS, 8)
    phrase = tokenizer(INTERRUPTION_PHRASE, add_special_tokens=False)["input_ids"]
    interrupted = [r for r in rollouts if r.interrupted]
    assert interrupted, "a random tiny model should run out of thinking budget"
    for r in interrupted:
        _check_invariants(r)
        start = r.injected.index(True)
        assert 6 <= start <= 10  # the thinking budget is drawn from [6, 10] sampled tokens
        assert r.response_ids[start : start + len(phrase)] == phrase
        assert r.injected[start : start + len(phrase)] == [True] * len(phrase)
        assert r.loss_mask == [not i for i in r.injected]
        assert INTERRUPTION_PHRASE in r.text
        answer_tokens = len(r.response_ids) - start - len(phrase)
        assert 1 <= answer_tokens <= 8
        assert r.truncated == (r.finish_reason == "answer_budget")
    unmasked = Generator(model, tokenizer, small_recipe(**{"length.interruption.mask_injected": False}), seed=0)
    assert all(all(r.loss_mask) for r in unmasked.generate(PROBLEMS, 4))


def test_hard_cap_and_stop_tokens(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    recipe = small_recipe(**{"length.mode": "none", "length.max_response_tokens": 40})
    capped = Generator(model, tokenizer, recipe, seed=0, max_new_tokens=5).generate(PROBLEMS, 3)
    assert all(len(r.response_ids) <= 5 for r in capped)
    assert all(r.truncated and r.finish_reason == "length" for r in capped if len(r.response_ids) == 5)
    # Every token id is a stop token: each response is exactly one token, ended by "eos".
    stop_all = Generator(model, tokenizer, recipe, seed=0, stop_token_ids=range(len(tokenizer)))
    for r in stop_all.generate(PROBLEMS, 2):
        assert len(r.response_ids) == 1 and r.finish_reason == "eos" and not r.truncated and r.text == ""


def test_generation_is_deterministic_given_the_seed(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    recipe = small_recipe()
    a = Generator(model, tokenizer, recipe, seed=5).generate(PROBLEMS, 3)
    b = Generator(model, tokenizer, recipe, seed=5).generate(PROBLEMS, 3)
    c = Generator(model, tokenizer, recipe, seed=6).generate(PROBLEMS, 3)
    assert [r.response_ids for r in a] == [r.response_ids for r in b] != [r.response_ids for r in c]
    chunked = [Generator(model, tokenizer, recipe, seed=5, batch_size=4).generate(PROBLEMS, 3) for _ in range(2)]
    assert [r.response_ids for r in chunked[0]] == [r.response_ids for r in chunked[1]]
    assert [r.problem_id for r in chunked[0]] == [r.problem_id for r in a]


def test_state_dict_restores_sampling(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    gen = Generator(model, tokenizer, small_recipe(), seed=2)
    gen.generate(PROBLEMS, 1)
    state = gen.state_dict()
    first = gen.generate(PROBLEMS, 2)
    fresh = Generator(model, tokenizer, small_recipe(), seed=99)
    fresh.load_state_dict(state)
    assert [r.response_ids for r in fresh.generate(PROBLEMS, 2)] == [r.response_ids for r in first]


def test_custom_interruption_phrase_is_injected(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    recipe = small_recipe(**{"length.interruption.phrase": " Time is up.</think>"})
    rollouts = Generator(model, tokenizer, recipe, seed=0).generate(PROBLEMS, 6)
    interrupted = [r for r in rollouts if r.interrupted]
    assert interrupted
    for r in interrupted:
        assert " Time is up.</think>" in r.text and sum(r.injected) == len(" Time is up.") + 1


def test_chat_template_wraps_prompts(model: PreTrainedModel) -> None:
    from rl_core.models import char_tokenizer

    tok = char_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}Q:{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}A:{% endif %}"
    )
    gen = Generator(model, tok, small_recipe(), use_chat_template=True)
    ids = gen.prompt_ids(PROBLEMS[0])
    assert tok.decode(ids) == "Q:1+2=A:"
    assert gen.generate(PROBLEMS[:1], 1)[0].prompt_ids == ids


def test_top_p_restricts_sampling_but_reports_full_distribution_logprobs() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(2000, 1)
    gen = torch.Generator().manual_seed(0)
    tokens, logps = sample_next(logits, temperature=1.0, top_p=0.7, generator=gen)
    assert set(tokens.tolist()) == {0, 1}  # 0.5 + 0.3 >= 0.7: the nucleus is {0, 1}
    assert torch.allclose(logps, torch.log(torch.tensor([0.5, 0.3]))[tokens], atol=1e-6)
    tokens, _ = sample_next(logits, temperature=1.0, top_p=0.1, generator=gen)
    assert set(tokens.tolist()) == {0}
    tokens, logps = sample_next(logits[:1] * 0, temperature=0.5, top_p=1.0, generator=gen)
    assert math.isclose(float(logps[0]), -math.log(4), rel_tol=1e-6)


def test_prompt_longer_than_the_recipe_allows_is_an_error(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    gen = Generator(model, tokenizer, small_recipe(**{"length.max_prompt_tokens": 4}))
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        gen.generate([Problem("long", "12345+6789=", "x")], 1)


def test_evaluate_reports_mean_at_k(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    task = build_task({"kind": "synthetic-addition", "train_size": 20, "validation_size": 10})
    gen = Generator(model, tokenizer, small_recipe(), seed=0)
    result = evaluate(gen, task, k=2, limit=6, batch_prompts=4)
    assert (result.n_prompts, result.k) == (6, 2)
    assert 0.0 <= result.pass_rate <= 1.0 and result.tokens > 0 and result.seconds > 0
    assert gen.stats.rollouts == 12 and gen.stats.tokens_per_second > 0
