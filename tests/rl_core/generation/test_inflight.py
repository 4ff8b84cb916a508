"""In-flight weight updates: new weights mid-sequence over the stale KV cache, in place, with version tags."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping

import pytest
import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

from rl_core.algorithms.fp32_head import token_logprobs
from rl_core.generation import Generator, WeightLoader
from rl_core.tasks import Problem
from tests.support.tiny import small_recipe

PROBLEMS = [Problem("a", "12+34=", "46"), Problem("b", "5+678=", "683")]
RECIPE = small_recipe(**{"length.mode": "none", "length.max_response_tokens": 20})


def _schedule(updates: dict[int, tuple[int, Mapping[str, torch.Tensor]]]):  # type: ignore[no-untyped-def]
    """A weights() callback returning ``updates[k]`` on its k-th call (call 0 precedes the prefill; call k
    follows decode step k, when every row has k tokens)."""
    calls = [0]

    def poll() -> tuple[int, Mapping[str, torch.Tensor]] | None:
        k = calls[0]
        calls[0] += 1
        return updates.get(k)

    return poll


def _silenced(model: PreTrainedModel) -> dict[str, torch.Tensor]:
    """Weights with the final norm zeroed: hidden state 0, logits 0, a uniform next-token distribution."""
    state = {k: v.clone() for k, v in model.state_dict().items()}
    state["model.norm.weight"].zero_()
    return state


def test_swap_mid_sequence_keeps_earlier_tokens_and_changes_later_ones(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    baseline = Generator(copy.deepcopy(model), tokenizer, RECIPE, seed=3).generate(PROBLEMS, 3)
    ptrs = {name: p.data_ptr() for name, p in model.named_parameters()}
    gen = Generator(model, tokenizer, RECIPE, seed=3)
    swapped = gen.generate(PROBLEMS, 3, weights=_schedule({4: (7, _silenced(model))}))
    uniform = -math.log(model.config.vocab_size)
    long_rows = 0
    for before, after in zip(baseline, swapped, strict=True):
        k = min(4, len(after.response_ids))
        # Tokens produced before the swap are exactly those of the run without a swap.
        assert after.response_ids[:k] == before.response_ids[:k]
        assert after.logprobs[:k] == before.logprobs[:k]
        assert after.versions[:k] == [0] * k
        # Every later token comes from the new weights: uniform distribution, version 7.
        assert after.versions[k:] == [7] * (len(after.response_ids) - k)
        assert all(abs(lp - uniform) < 1e-5 for lp in after.logprobs[k:])
        long_rows += len(after.response_ids) > 4
    assert long_rows >= 3
    assert {name: p.data_ptr() for name, p in model.named_parameters()} == ptrs  # updated in place
    assert model.lm_head.weight is model.get_input_embeddings().weight  # still tied
    assert gen.version == 7 and gen.stats.weight_updates == 1
    later = gen.generate(PROBLEMS[:1], 1)  # the next call continues at the loaded version
    assert set(later[0].versions) == {7}


def test_new_weights_run_over_the_stale_kv_cache(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> None:
    swap_at = 3
    model_a = copy.deepcopy(model)
    torch.manual_seed(11)
    state_b = {k: v + 0.05 * torch.randn_like(v) for k, v in model.state_dict().items()}
    gen = Generator(model, tokenizer, RECIPE, seed=4)
    rollouts = gen.generate(PROBLEMS, 2, weights=_schedule({swap_at: (1, state_b)}))
    model_b = model  # now holds state_b
    checked = 0
    for r in rollouts:
        n = len(r.response_ids)
        if n <= swap_at + 1:
            continue
        checked += 1
        prompt = torch.tensor([r.prompt_ids])
        resp = torch.tensor([r.response_ids])
        with torch.no_grad():
            # KV of the prompt and the first swap_at - 1 response tokens come from the old weights ...
            cache = DynamicCache()
            model_a(input_ids=torch.cat([prompt, resp[:, : swap_at - 1]], 1), past_key_values=cache, use_cache=True)
            # ... then the new weights continue over that cache.
            out = model_b(input_ids=resp[:, swap_at - 1 : n - 1], past_key_values=cache, use_cache=True)
            expected = torch.log_softmax(out.logits[0].float(), -1).gather(-1, resp[0, swap_at:, None]).squeeze(-1)
            recomputed = token_logprobs(model_b, torch.cat([prompt, resp], 1))[0, len(r.prompt_ids) - 1 :]
        got = torch.tensor(r.logprobs[swap_at:])
        assert torch.allclose(got, expected, atol=2e-5), (got, expected)
        # A generator that re-ran the prefix with the new weights would report different log-probs.
        assert not torch.allclose(got, recomputed[swap_at:], atol=1e-3)
        assert r.versions == [0] * swap_at + [1] * (n - swap_at)
    assert checked >= 2


def test_several_updates_tag_each_token_with_its_version(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase
) -> None:
    state = {k: v.clone() for k, v in model.state_dict().items()}
    gen = Generator(model, tokenizer, RECIPE, seed=0)
    rollouts = gen.generate(
        PROBLEMS, 2, version=10, weights=_schedule({0: (11, state), 2: (12, state), 5: (13, state)})
    )
    for r in rollouts:
        expected = ([11] * 2 + [12] * 3 + [13] * 20)[: len(r.response_ids)]
        assert r.versions == expected
        assert r.min_version == 11


def test_loader_rejects_unknown_names_and_shapes_without_writing(model: PreTrainedModel) -> None:
    loader = WeightLoader(model)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    good = {"model.norm.weight": torch.zeros_like(before["model.norm.weight"])}
    with pytest.raises(ValueError, match="unknown weight 'nope'"):
        loader.load({**good, "nope": torch.zeros(1)})
    with pytest.raises(ValueError, match="shape"):
        loader.load({**good, "lm_head.weight": torch.zeros(3, 3)})
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert loader.load(good) == 1 and torch.equal(model.model.norm.weight, torch.zeros_like(model.model.norm.weight))
    half = {"model.norm.weight": torch.ones(model.config.hidden_size, dtype=torch.bfloat16)}
    loader.load(half)  # values are cast into the model's dtype
    assert model.model.norm.weight.dtype == torch.float32 and bool((model.model.norm.weight == 1).all())
