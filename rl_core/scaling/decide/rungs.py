"""Successive halving on observed values at equal compute: which runs of a grid fall outside the top 1/η at a rung.

Rungs are fractions of the common budget, η^-k for k = K, ..., 1 (with η = 3 and the smallest rung 1/9: at 1/9
and 1/3 of the budget), as ASHA places them. At the highest rung a run has reached, every run of the grid that
reached it too (live, completed, or stopped after it) is valued by its observed curve at the rung's compute
(linear between its evaluations, never extrapolated). Recipes, not runs, are ranked: the seeds of one recipe do not
compete with each other, a recipe stands at the mean of its seeds' values, and the run is outside when more than
max(1, n // η) of the n recipes at the rung stand above it by more than ``margin`` (plus, where recipes have several
seeds, ``seed_z`` × the spread between seeds at the rung × sqrt(1/n_a + 1/n_b) for recipes of n_a and n_b seeds:
two recipes' means differ by about that from the seeds alone).

Invariants: only observed points are used; a run's own replicates never count against it; a rung with fewer than
two recipes decides nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.decide.matched_compute import pooled_spread
from rl_core.scaling.fit.model import FloatArray


@dataclass(frozen=True)
class RungStanding:
    """Run ``i`` at its highest rung: the rung (a fraction of the budget), its recipe's value there (the mean of
    ``seeds`` runs), how many of the other recipes stand above it by more than the margin, how many recipes go on,
    how many are at the rung, and the value of the last one that goes on among the others."""

    rung: float
    value: float
    seeds: int
    above: int
    keep: int
    recipes: int
    cutoff: float
    seed_spread: float | None = None
    """The spread between seeds of one recipe at the rung, when it widened the margin (else ``None``)."""

    def numbers(self) -> dict[str, float]:
        """What a *rung* stop stores beside its reason (``seed_spread`` only when it widened the margin)."""
        out = {
            "rung": self.rung,
            "value_at_rung": self.value,
            "rung_cutoff": self.cutoff,
            "recipes_above": float(self.above),
            "recipes_at_rung": float(self.recipes),
            "recipes_kept": float(self.keep),
        }
        return out if self.seed_spread is None else {**out, "seed_spread": self.seed_spread}

    @property
    def outside(self) -> bool:
        return self.above >= self.keep


def rung_fractions(eta: float, smallest: float) -> list[float]:
    """η^-k for k = K, ..., 1, the smallest at least ``smallest``: [1/9, 1/3] for η = 3 and 0.1."""
    out: list[float] = []
    f = 1.0 / eta
    while f >= smallest - 1e-12:
        out.append(f)
        f /= eta
    return sorted(out)


def standing(
    curves: Sequence[tuple[FloatArray, FloatArray]],
    recipes: Sequence[str],
    i: int,
    budget: float,
    eta: float,
    smallest: float,
    margin: float,
    seed_z: float = float("inf"),
) -> RungStanding | None:
    """Run ``i`` at the highest rung it has reached, against the other recipes there; ``None`` below the first rung
    or with fewer than two recipes at it. ``recipes[j]`` names run j's recipe (a run of its own: a unique name)."""
    x, _ = curves[i]
    if x.size < 2:
        return None
    reached = [f for f in rung_fractions(eta, smallest) if x[-1] >= f * budget]
    if not reached:
        return None
    at = reached[-1] * budget
    values: dict[str, list[float]] = {}
    for j, (xj, yj) in enumerate(curves):
        if xj.size < 2 or xj[0] > at or xj[-1] < at:
            continue
        values.setdefault(recipes[j], []).append(float(np.interp(at, xj, yj)))
    best = {r: float(np.mean(v)) for r, v in values.items()}
    mine = recipes[i]
    if mine not in best or len(best) < 2:
        return None
    value = best[mine]
    spread = pooled_spread(values.values()) if np.isfinite(seed_z) else None
    n_mine = len(values[mine])

    def needed(r: str) -> float:
        if spread is None:
            return margin
        return margin + seed_z * spread * float(np.sqrt(1.0 / n_mine + 1.0 / len(values[r])))

    others = sorted((v for r, v in best.items() if r != mine), reverse=True)
    keep = max(1, int(len(best) // eta))
    above = sum(1 for r, v in best.items() if r != mine and v > value + needed(r))
    cutoff = others[keep - 1] if len(others) >= keep else float("nan")
    return RungStanding(reached[-1], value, n_mine, above, keep, len(best), cutoff, spread)
