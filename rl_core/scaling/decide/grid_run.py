"""A run of a grid as the decisions see it, and the small predicates every grid rule shares: which runs are
replicates of one recipe, which fits are identified enough to compare against, and whom a run is compared with.

Invariants: a run's own replicates are never its rivals (their gap is seed noise) unless the policy ranks
replicates; a ceiling on the A = 1 bound is never identified.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.fit.summary import A_BOUND_TOLERANCE as A_BOUND_TOLERANCE
from rl_core.scaling.fit.summary import on_bound as on_bound
from rl_core.scaling.fit.summary import summarize

RunStatus = Literal["live", "completed", "stopped"]


@dataclass(frozen=True)
class GridRun:
    """One run as the decision sees it: its evaluations so far and whether it is still running."""

    run_id: str
    x: FloatArray
    y: FloatArray
    status: RunStatus = "live"
    budget: float | None = None
    name: str | None = None
    metrics: Mapping[str, FloatArray] = field(default_factory=dict)
    config: str | None = None
    """Runs with the same ``config`` are replicates (seeds of one recipe); ``None``: a run of its own."""
    stop_rule: str | None = None
    """For a stopped run, the rule of the decision that stopped it (``None``: stopped by a user, a failure or
    anything else); only stops by the grid comparison can be undone (:mod:`rl_core.scaling.decide.resume`)."""
    resumes: int = 0
    """How many times the policy has resumed this run already (its resumes, not a user's): ``Policy.resume.max_resumes``
    bounds it."""

    @property
    def label(self) -> str:
        return self.name or self.run_id


def replicates(a: GridRun, b: GridRun, policy: Policy) -> bool:
    """True for two different runs of one recipe (their gap is seed noise, which the comparison does not rank unless
    ``policy.rank_replicates``)."""
    return not policy.rank_replicates and a.config is not None and a.config == b.config and a.run_id != b.run_id


def identified(fit: CurveFit, policy: Policy) -> bool:
    """A fit whose ceiling is known well enough to compare other runs against: *identified* in the one meaning every
    surface uses (:attr:`rl_core.scaling.fit.summary.FitSummary.ceiling_identified`), with a posterior."""
    return fit.samples is not None and summarize(fit, policy.max_ceiling_width).ceiling_identified


def medians_of(draws: Mapping[int, FloatArray]) -> dict[int, float]:
    """Each run's median value draw, computed once per decision: every comparison reads them (computed per
    comparison, the 60-run grid took 7,000 medians of 4,000 draws, 0.3 s of its 3.5 s assessment)."""
    return {i: float(np.median(v)) for i, v in draws.items()}


def best_of(candidates: Sequence[int], medians: Mapping[int, float]) -> int:
    """The candidate with the highest median value draw (``medians``: :func:`medians_of`; ``candidates`` must not be
    empty; the first of equal ones)."""
    return max(candidates, key=lambda j: medians[j])


def expected_gain(v: FloatArray, rival: FloatArray) -> float:
    """E[max(V - V_rival, 0)] over paired draws: what keeping (or resuming) a run buys over its rival, even
    optimistically; the one measure both "cannot matter" and a resume read."""
    return float(np.mean(np.maximum(v - rival, 0.0)))


def floored_at_recent(run: GridRun, v: FloatArray, points: int) -> tuple[FloatArray, float]:
    """A run's value draws floored at its recent level (the mean of its last ``points`` evaluations), and that level:
    the sigmoid never falls, so a posterior lying below the data can neither stop nor keep a run stopped."""
    recent = float(np.mean(run.y[-points:]))
    return np.maximum(v, recent), recent


def rivals(runs: Sequence[GridRun], comparators: Sequence[int], i: int, policy: Policy) -> list[int]:
    """The comparators run ``i`` is measured against: those of other recipes (a run's own replicates' lead over it is
    seed noise, see :func:`replicates`)."""
    return [j for j in comparators if j != i and not replicates(runs[i], runs[j], policy)]
