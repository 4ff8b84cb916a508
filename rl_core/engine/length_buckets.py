"""Micro-batches cut by length, each trimmed to its own rows' widths, so the trainer does not run on padding.

A step's batch is padded to its longest prompt and its longest response; RL responses vary widely in length (the
CPU side-by-side's average 40 of a 64-token cap), so one forward over the whole batch spends a third of its FLOPs on
padding. ``plan_buckets`` orders the rows by length and cuts them into contiguous runs minimising the padded tokens
plus a fixed cost per extra forward (``overhead_tokens``), by dynamic programming over the sorted lengths; each
bucket holds at most ``max_rows`` rows. ``take_rows`` is the bucket's ``TrainBatch``: its rows, with the all-padding
columns on both sides cut away.

Invariants: the buckets partition the rows (each row exactly once); a bucket never exceeds ``max_rows``; trimming
drops only columns where every row of the bucket is padding, and the per-token aggregation weights are the
batch-global ones, so the sum of the buckets' losses is the whole batch's loss (up to float rounding) whatever the
cut.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from rl_core.engine.batch import TrainBatch

#: The fixed cost of one more forward/backward, in padded tokens: below it a cut saves less than the call costs.
#: Measured (bench/trainer_buckets.py, 0.8M-parameter ``small``, 64 rows, half of them at the 64-token cap, one
#: thread): 0.493 s/step padded; 0.540 at 128 (3.6 forwards), 0.462 at 256, 0.477 at 384, 0.460 at 512, and back to
#: one forward at 1024. In the engine (bench/engine_side_by_side.py, same sizes) the trainer's step fell 0.54 -> 0.38 s.
OVERHEAD_TOKENS = 384


def row_lengths(batch: TrainBatch) -> tuple[Tensor, Tensor]:
    """(prompt tokens, response tokens) of every row, from the attention mask."""
    attn = batch.attention_mask
    return attn[:, : batch.prompt_width].sum(1), attn[:, batch.prompt_width :].sum(1)


def plan_buckets(
    widths: Sequence[int], max_rows: int | None, overhead_tokens: int = OVERHEAD_TOKENS
) -> list[list[int]]:
    """Row indices per bucket (longest rows first). ``widths``: each row's padded width if it were alone;
    a bucket costs ``len(bucket) * max(width in bucket) + overhead_tokens``; the plan minimises the total cost."""
    n = len(widths)
    if n == 0:
        return []
    cap = n if max_rows is None else max(1, min(max_rows, n))
    order = sorted(range(n), key=lambda i: -widths[i])
    w = [widths[i] for i in order]
    best = [0.0] + [float("inf")] * n  # best[j]: cheapest cost of the first j sorted rows
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(max(0, j - cap), j):  # the bucket is sorted rows i..j-1, its width w[i]
            cost = best[i] + (j - i) * w[i] + overhead_tokens
            if cost < best[j]:
                best[j], cut[j] = cost, i
    buckets: list[list[int]] = []
    j = n
    while j > 0:
        i = cut[j]
        buckets.append(sorted(order[i:j]))
        j = i
    return buckets[::-1]


def take_rows(batch: TrainBatch, rows: Sequence[int]) -> TrainBatch:
    """The ``rows`` of ``batch`` as a batch of their own, trimmed to their longest prompt and response."""
    index = torch.tensor(list(rows), dtype=torch.long)
    prompts, responses = row_lengths(batch)
    p = int(prompts[index].max())
    r = max(1, int(responses[index].max()))
    cols = slice(batch.prompt_width - p, batch.prompt_width + r)
    return TrainBatch(
        input_ids=batch.input_ids[index, cols],
        attention_mask=batch.attention_mask[index, cols],
        prompt_width=p,
        old_logprobs=batch.old_logprobs[index, :r],
        mask=batch.mask[index, :r],
        versions=batch.versions[index, :r],
        advantages=batch.advantages[index],
        group_ids=batch.group_ids[index],
        weights=batch.weights[index, :r],
        stats={},
    )


def length_buckets(batch: TrainBatch, max_rows: int | None, overhead_tokens: int = OVERHEAD_TOKENS) -> list[TrainBatch]:
    """``batch`` cut into trimmed micro-batches by length (module doc)."""
    prompts, responses = row_lengths(batch)
    widths = [int(p) + int(r) for p, r in zip(prompts.tolist(), responses.tolist(), strict=True)]
    return [take_rows(batch, b) for b in plan_buckets(widths, max_rows, overhead_tokens)]
