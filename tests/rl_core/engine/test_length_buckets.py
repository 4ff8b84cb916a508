"""Length-bucketed micro-batches: a partition of the rows, trimmed only of padding, and the same loss and gradient
as one padded forward of the whole batch."""

from __future__ import annotations

import copy
import random

import pytest
import torch

from rl_core.engine.batch import build_train_batch, group_rewards
from rl_core.engine.length_buckets import length_buckets, plan_buckets, row_lengths, take_rows
from rl_core.engine.trainer import TorchTrainer, micro_batch_loss
from tests.rl_core.engine.test_trainers import RECIPE, _groups, _model


@pytest.mark.parametrize("seed", range(20))
def test_buckets_partition_the_rows_within_the_row_cap(seed: int) -> None:
    rng = random.Random(seed)
    widths = [rng.randint(1, 80) for _ in range(rng.randint(1, 70))]
    cap = rng.choice([None, 1, 3, 8, 64])
    buckets = plan_buckets(widths, cap, overhead_tokens=rng.choice([0, 64, 384, 10_000]))
    assert sorted(i for b in buckets for i in b) == list(range(len(widths)))
    assert all(1 <= len(b) <= (cap or len(widths)) for b in buckets)


def test_the_plan_cuts_only_where_the_padding_saved_pays_for_the_forward() -> None:
    widths = [64] * 8 + [8] * 8
    assert len(plan_buckets(widths, None, overhead_tokens=100)) == 2  # 8 rows x 56 padded tokens saved > 100
    assert len(plan_buckets(widths, None, overhead_tokens=1000)) == 1


def test_a_bucket_keeps_its_rows_tokens_and_drops_only_padding() -> None:
    model = _model()
    groups = _groups(model)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    prompts, responses = row_lengths(batch)
    rows = [int(i) for i in torch.argsort(responses)[:3]]  # the shortest responses
    part = take_rows(batch, rows)
    assert part.rows == 3
    assert part.response_width == int(responses[rows].max()) < batch.response_width
    assert part.prompt_width == int(prompts[rows].max())
    for k, i in enumerate(rows):
        kept = part.input_ids[k][part.attention_mask[k].bool()]
        full = batch.input_ids[i][batch.attention_mask[i].bool()]
        assert torch.equal(kept, full)
        assert float(part.mask[k].sum()) == float(batch.mask[i].sum())
        assert torch.equal(part.weights[k], batch.weights[i, : part.response_width])


@pytest.mark.parametrize("overhead", [0, 16, 10_000])
def test_bucketed_loss_and_gradient_equal_one_padded_batch(overhead: int) -> None:
    base = _model()
    groups = _groups(base)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    results = []
    for parts in ([batch], length_buckets(batch, 4, overhead)):
        model = copy.deepcopy(base)
        model.zero_grad()
        total = torch.zeros(())
        for part in parts:
            r = micro_batch_loss(model, part, slice(0, part.rows), RECIPE, torch.device("cpu"))
            r.loss.backward()  # type: ignore[no-untyped-call]
            total = total + r.loss.detach()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        results.append((total, grads))
    (t0, g0), (t1, g1) = results
    assert t1.item() == pytest.approx(t0.item(), rel=1e-5, abs=1e-7)
    torch.testing.assert_close(g1, g0, rtol=1e-4, atol=1e-7)


def test_a_trainer_with_buckets_takes_the_same_step_as_without() -> None:
    base = _model()
    groups = _groups(base)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    after = []
    for overhead in (None, 0):
        model = copy.deepcopy(base)
        trainer = TorchTrainer(
            model, RECIPE, device=torch.device("cpu"), micro_batch_size=4, bucket_overhead_tokens=overhead
        )
        stats = trainer.step(batch)
        after.append((stats, model.state_dict()))
    (s0, w0), (s1, w1) = after
    assert s1.tokens == s0.tokens and s1.loss == pytest.approx(s0.loss, rel=1e-5, abs=1e-7)
    for k in w0:
        torch.testing.assert_close(w1[k], w0[k], rtol=1e-4, atol=1e-6)
