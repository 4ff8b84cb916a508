"""Aggregation: closed-form weights, and exact equivalence under micro-batching and data parallelism."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rl_core.algorithms.aggregation import aggregate, aggregate_loss, token_weights
from rl_core.algorithms.losses import PolicyLossInputs
from rl_core.algorithms.objective import policy_objective
from rl_core.recipe import Recipe, apply_overrides

# Three responses of lengths 2, 4, 3; responses 0 and 1 answer prompt 7, response 2 answers prompt 3.
MASK = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.float64)
GROUPS = torch.tensor([7, 7, 3])


def test_token_weights_closed_form() -> None:
    w = token_weights(MASK, GROUPS, "token", dtype=torch.float64)
    assert torch.allclose(w, MASK / 9.0)


def test_sample_weights_closed_form() -> None:
    w = token_weights(MASK, GROUPS, "sample", dtype=torch.float64)
    expected = MASK * torch.tensor([[1 / 6], [1 / 12], [1 / 9]], dtype=torch.float64)
    assert torch.allclose(w, expected)


def test_prompt_weights_closed_form() -> None:
    w = token_weights(MASK, GROUPS, "prompt", dtype=torch.float64)
    # prompt 7 has T_g = 6 tokens, prompt 3 has 3; two prompts.
    expected = MASK * torch.tensor([[1 / 12], [1 / 12], [1 / 6]], dtype=torch.float64)
    assert torch.allclose(w, expected)


@pytest.mark.parametrize("mode", ["token", "sample", "prompt"])
def test_weights_sum_to_one_and_empty_batch_is_zero(mode: str) -> None:
    w = token_weights(MASK, GROUPS, mode, dtype=torch.float64)  # type: ignore[arg-type]
    assert w.sum().item() == pytest.approx(1.0)
    empty = token_weights(torch.zeros(2, 3), torch.tensor([0, 1]), mode)  # type: ignore[arg-type]
    assert torch.equal(empty, torch.zeros(2, 3))


def test_fully_masked_rows_do_not_count() -> None:
    mask = torch.tensor([[1, 1], [0, 0], [1, 0]])
    w = token_weights(mask, torch.tensor([0, 1, 2]), "sample", dtype=torch.float64)
    assert torch.allclose(w, torch.tensor([[0.25, 0.25], [0.0, 0.0], [0.5, 0.0]], dtype=torch.float64))
    w = token_weights(mask, torch.tensor([0, 1, 2]), "prompt", dtype=torch.float64)
    assert torch.allclose(w, torch.tensor([[0.25, 0.25], [0.0, 0.0], [0.5, 0.0]], dtype=torch.float64))


def test_aggregate_loss_value() -> None:
    per_token = torch.tensor([[1.0, 3.0, 0, 0], [2.0, 2.0, 2.0, 2.0], [6.0, 0.0, 3.0, 0]], dtype=torch.float64)
    # prompt: prompt 7 averages (1+3+2·4)/6 = 2, prompt 3 averages 9/3 = 3 -> (2+3)/2
    assert aggregate_loss(per_token, MASK, GROUPS, "prompt").item() == pytest.approx(2.5)
    # sample: (2 + 2 + 3) / 3 ; token: 21 / 9
    assert aggregate_loss(per_token, MASK, GROUPS, "sample").item() == pytest.approx(7 / 3)
    assert aggregate_loss(per_token, MASK, None, "token").item() == pytest.approx(21 / 9)
    with pytest.raises(ValueError, match="group_ids"):
        token_weights(MASK, None, "prompt")
    with pytest.raises(ValueError, match="unknown aggregation"):
        token_weights(MASK, GROUPS, "mean")  # type: ignore[arg-type]


def _batch(seed: int = 0) -> tuple[torch.nn.Linear, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A tiny 'policy': a linear layer scoring 8 fixed tokens of 6 responses from 3 prompts."""
    g = torch.Generator().manual_seed(seed)
    policy = torch.nn.Linear(5, 11).double()
    with torch.no_grad():
        for p in policy.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64))
    feats = torch.randn(6, 8, 5, generator=g, dtype=torch.float64)
    targets = torch.randint(0, 11, (6, 8), generator=g)
    lengths = torch.tensor([8, 3, 5, 1, 7, 2])
    mask = (torch.arange(8)[None, :] < lengths[:, None]).long()
    adv = torch.randn(6, generator=g, dtype=torch.float64)
    return policy, feats, targets, mask, adv


def _micro_loss(policy: torch.nn.Linear, feats, targets, mask, adv, old, weights, loss_type) -> torch.Tensor:  # type: ignore[no-untyped-def]
    lp = torch.log_softmax(policy(feats), -1).gather(-1, targets[..., None])[..., 0]
    cfg = apply_overrides(Recipe(), {"loss.type": loss_type}).loss
    return policy_objective(cfg, PolicyLossInputs(lp, old, adv, mask), weights).loss


@pytest.mark.parametrize("mode", ["token", "sample", "prompt"])
@pytest.mark.parametrize("loss_type", ["cispo", "dapo", "gspo"])
def test_micro_batching_and_data_parallel_are_exact(mode: str, loss_type: str) -> None:
    policy, feats, targets, mask, adv = _batch()
    groups = torch.tensor([0, 0, 1, 1, 2, 2])
    with torch.no_grad():
        old = torch.log_softmax(policy(feats), -1).gather(-1, targets[..., None])[..., 0] + 0.3 * torch.randn(6, 8)
    weights = token_weights(mask, groups, mode, dtype=torch.float64)  # type: ignore[arg-type]

    def grads(slices: list[slice]) -> list[torch.Tensor]:
        policy.zero_grad()
        total = 0.0
        for s in slices:
            loss = _micro_loss(policy, feats[s], targets[s], mask[s], adv[s], old[s], weights[s], loss_type)
            loss.backward()
            total += loss.item()
        return [total] + [p.grad.clone() for p in policy.parameters()]  # type: ignore[union-attr]

    whole = grads([slice(0, 6)])
    accumulated = grads([slice(0, 1), slice(1, 4), slice(4, 6)])  # splits prompt groups, too
    # Two "ranks" holding interleaved rows: summing their losses/gradients equals the whole batch.
    rank_rows = [torch.tensor([0, 3, 5]), torch.tensor([1, 2, 4])]
    policy.zero_grad()
    for rows in rank_rows:
        _micro_loss(
            policy, feats[rows], targets[rows], mask[rows], adv[rows], old[rows], weights[rows], loss_type
        ).backward()
    dp = [p.grad.clone() for p in policy.parameters()]  # type: ignore[union-attr]
    assert accumulated[0] == pytest.approx(whole[0], abs=1e-12)
    for a, b, c in zip(whole[1:], accumulated[1:], dp, strict=True):
        assert torch.allclose(a, b, atol=1e-12) and torch.allclose(a, c, atol=1e-12)


def test_naive_per_micro_batch_mean_would_differ() -> None:
    """Guard that the invariance test can fail: averaging per micro-batch is not the batch mean."""
    policy, feats, targets, mask, adv = _batch()
    lp = torch.log_softmax(policy(feats), -1).gather(-1, targets[..., None])[..., 0].detach()
    per_token = -(adv[:, None] * lp) * mask
    whole = per_token.sum() / mask.sum()
    naive = sum(per_token[s].sum() / mask[s].sum() for s in (slice(0, 1), slice(1, 6))) / 2
    assert abs(float(whole) - float(naive)) > 1e-3
    exact = sum(
        aggregate(per_token[s], token_weights(mask, None, "token", dtype=torch.float64)[s])
        for s in (slice(0, 1), slice(1, 6))
    )
    assert float(exact) == pytest.approx(float(whole), abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_weight_invariants_on_random_batches(data: st.DataObject) -> None:
    """Each prompt (sample, token) carries exactly its equal share, and any row split sums to the whole."""
    b = data.draw(st.integers(1, 7), label="B")
    t = data.draw(st.integers(1, 5), label="T")
    lengths = torch.tensor(data.draw(st.lists(st.integers(0, t), min_size=b, max_size=b), label="lengths"))
    groups = torch.tensor(data.draw(st.lists(st.integers(0, 3), min_size=b, max_size=b), label="groups"))
    mask = (torch.arange(t)[None, :] < lengths[:, None]).double()
    per_token = torch.randn(b, t, generator=torch.Generator().manual_seed(data.draw(st.integers(0, 99))))
    per_token = per_token.double()

    w_prompt = token_weights(mask, groups, "prompt", dtype=torch.float64)
    live_groups = {int(g) for g, n in zip(groups, lengths, strict=True) if n > 0}
    for g in set(groups.tolist()):
        share = w_prompt[groups == g].sum().item()
        assert share == pytest.approx(1 / len(live_groups) if g in live_groups else 0.0)
    w_sample = token_weights(mask, groups, "sample", dtype=torch.float64)
    live_rows = int((lengths > 0).sum())
    for i in range(b):
        assert w_sample[i].sum().item() == pytest.approx(1 / live_rows if lengths[i] > 0 else 0.0)
    w_token = token_weights(mask, groups, "token", dtype=torch.float64)
    assert torch.allclose(w_token, mask / mask.sum().clamp(min=1))

    rows = data.draw(st.permutations(list(range(b))), label="row order")
    cut = data.draw(st.integers(0, b), label="cut")
    for w in (w_prompt, w_sample, w_token):
        whole = aggregate(per_token, w).item()
        parts = [torch.tensor(rows[:cut], dtype=torch.long), torch.tensor(rows[cut:], dtype=torch.long)]
        split = sum(aggregate(per_token[p], w[p]).item() for p in parts if p.numel())
        assert split == pytest.approx(whole, abs=1e-12)
