"""The one knob that trades compute for risk: ``Policy.compute_target``, about what fraction of the grid's compute
(every run to its budget = 1) the grid may spend. :func:`effective_policy` turns it into the rules' settings, once
per decision; every surface decides with that one policy.

**Above** :data:`RULES_SPEND` (what the rules alone spend on the replays, about half), the knob spends more for less
risk at the rules' own timing. The target f is read as a *level* u (:func:`level`: the inverse of
:data:`LEVEL_SPEND`, what each level spent on the tuned collections' replays, so that the knob's mapping absorbs
what the rules' timing adds), and at level u, with h = (u − 0.5) / 0.5:

- every stop waits until a run has used (u − :data:`SPEND_AT_ZERO`) / :data:`SPEND_SLOPE` of its budget
  (:func:`hold_back`; 0.27 at u = 0.6, 0.93 at 1), never below ``min_fraction``; the rungs stay where
  ``min_fraction`` puts them, so a stop at an earlier rung waits rather than being judged again at a later one
  (judged at 1/3 alone, the rung stopped more near-best runs than at 1/9 and 1/3);
- every stop needs more evidence: ``value_margin`` and ``rung.margin`` grow by :data:`EVIDENCE_MARGIN` · h,
  ``behind.margin`` by twice that, and ``min_expected_gain`` shrinks by (1 − h)² (at 1, no run "cannot matter").

So 0.5 is the rules exactly, each rule's stops at a level are a subset of its stops at any lower level on the same
evaluations, and 1 stops only clearly worse runs from 93% of the budget on.

**Below** it, the knob spends less for more risk, with a schedule shaped like continuous successive halving: a run
that has used a fraction s of its budget (s >= s0, the schedule's start) is kept only while its rank in the grid is
within the top ``ceil(n · q(s))`` of the grid's n runs, where

    q(s) = 1 for s <= s0,   q(s) = (s0 / s) ** a for s > s0,

and a is chosen so that a grid of n runs stopped in that order spends f of its compute (:func:`schedule_compute`:
the run ranked r stops when ceil(n · q(s)) falls below r; a target below what stopping every run but the top one at
s0 spends is met as closely as that).
Runs are ranked by the value at the budget the verdict ranks them by (the median of the same draws the grid
comparison reads: a forecast while a run trains, the observation once it has finished), floored at the run's recent
level; a run without draws stands at its recent level. Stopped runs rank below every other run. A run the schedule
would stop is kept while P(its value at the budget > the top-ranked run's) >= ``target_keep_p`` (default
:data:`LOW_KEEP_P`; from their draws, as the grid comparison reads them): a near-tie with the leader is not a budget
cut. The schedule starts at ``target_start`` (default :data:`LOW_START`, ASHA's smallest minimum resource), and its
stops alone may come before ``min_fraction`` (no other rule's do).

Invariants: ``compute_target`` None is the rules alone, and :data:`RULES_SPEND` is the same policy to the digit;
the ``protected`` runs given (the grid comparison passes the leader alone) are never stopped; the schedule only
shrinks as s grows, and a smaller f never keeps more runs at any s (a stop at f is a stop at every smaller f on the
same ranking; ``target_keep_p`` only keeps runs the schedule would stop, never stops one). The grid's realised
compute differs from f: other rules stop runs too, stops fall on evaluations, a grid of few runs cannot spend little
(two runs: about half), and ``min_live`` and ``hold`` apply as to every grid rule. It is a target, not a guarantee:
docs/decisions.md has what each setting spent on the replays.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from rl_core.scaling.decide.equal_compute_stops import Candidate
from rl_core.scaling.decide.grid_run import GridRun
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Recommendation
from rl_core.scaling.fit.model import FloatArray

#: The schedule's exponent is searched in [0, MAX_EXPONENT]; a target below the schedule's least compute keeps only
#: the top run from ``min_fraction`` on.
MAX_EXPONENT = 60.0
#: The schedule starts at ``min_fraction``, or at this fraction of the budget where ``min_fraction`` is smaller.
MIN_START = 0.01
#: The knob at this value is the rules alone; above it holds stops back, below it the schedule cuts runs.
RULES_SPEND = 0.5
#: Above :data:`RULES_SPEND`: stops wait until (u − SPEND_AT_ZERO) / SPEND_SLOPE of the budget at level u, at most
#: :data:`MAX_HOLD_BACK` (the line the replays' mean compute followed in ``min_fraction`` before the evidence grew too).
SPEND_AT_ZERO = 0.44
SPEND_SLOPE = 0.6
MAX_HOLD_BACK = 0.95
#: Above it: every margin a stop must clear grows by up to this (at level 1).
EVIDENCE_MARGIN = 0.04
#: (level, mean compute) on the tuned collections' 22 grids (``bench/replay_frontier.py --no-pruners --targets 0.6
#: 0.7 0.8 0.9 1`` over shared, engine, grpo_math1p5b and soft_grpo, 2026-11-29, levels read as targets): a target
#: f is the level that spent f there. Strictly increasing, so every target has one level.
LEVEL_SPEND: tuple[tuple[float, float], ...] = (
    (0.5, 0.494),
    (0.6, 0.620),
    (0.7, 0.724),
    (0.8, 0.859),
    (0.9, 0.936),
    (1.0, 0.994),
)
#: Below it: the defaults of ``target_keep_p`` and ``target_start`` (ASHA's smallest minimum resource, 1/27).
LOW_KEEP_P = 0.2
LOW_START = 1.0 / 27.0


def level(target: float) -> float:
    """The level a target above :data:`RULES_SPEND` stands for (:data:`LEVEL_SPEND` inverted, linearly between its
    points; 1 from the last measured spend on)."""
    levels, spends = zip(*LEVEL_SPEND, strict=True)
    return float(np.interp(min(target, spends[-1]), (RULES_SPEND, *spends[1:]), levels))


def hold_back(policy: Policy) -> float:
    """The fraction of its budget before which no run is stopped (the schedule's stops aside): ``min_fraction``, or
    above :data:`RULES_SPEND` the later fraction the knob's level holds stops back to."""
    f = policy.compute_target
    if f is None or f <= RULES_SPEND:
        return policy.min_fraction
    return max(policy.min_fraction, min(MAX_HOLD_BACK, (level(f) - SPEND_AT_ZERO) / SPEND_SLOPE))


def effective_policy(policy: Policy) -> Policy:
    """The rules' settings the knob stands for (module docstring); the policy itself without a ``compute_target``,
    and the same policy at :data:`RULES_SPEND`. Above it the result keeps ``compute_target`` (for
    :func:`hold_back`; the schedule is off there)."""
    f = policy.compute_target
    if f is None:
        return policy
    if f == RULES_SPEND:
        return replace(policy, compute_target=None)
    if f > RULES_SPEND:
        h = (level(f) - RULES_SPEND) / (1.0 - RULES_SPEND)
        grow = EVIDENCE_MARGIN * h
        behind, rung = policy.behind, policy.rung
        return replace(
            policy,
            value_margin=min(1.0, policy.value_margin + grow),
            behind=None if behind is None else replace(behind, margin=min(1.0, behind.margin + 2 * grow)),
            rung=None if rung is None else replace(rung, margin=min(1.0, rung.margin + grow)),
            min_expected_gain=policy.min_expected_gain * (1.0 - h) ** 2,
        )
    return replace(
        policy,
        target_keep_p=LOW_KEEP_P if policy.target_keep_p is None else policy.target_keep_p,
        target_start=LOW_START if policy.target_start is None else policy.target_start,
    )


def stop_times(n: int, a: float, s0: float) -> list[float]:
    """The fraction of the budget at which the run ranked r (1-based) stops under the schedule with exponent ``a``:
    rank r goes on while r <= ceil(n · q(s)), i.e. until s = s0 · (n / (r - 1)) ** (1 / a) (at least s0, at most 1;
    the top run runs to the end)."""
    out = [1.0]
    for r in range(2, n + 1):
        out.append(1.0 if a <= 0.0 else min(1.0, max(s0, s0 * (n / (r - 1)) ** (1.0 / a))))
    return out


def schedule_compute(n: int, a: float, s0: float) -> float:
    """The compute a grid of ``n`` runs spends when its runs stop in rank order under the schedule (mean stop time)."""
    return sum(stop_times(n, a, s0)) / n


@functools.lru_cache(maxsize=1024)
def schedule_exponent(target: float, s0: float, n: int) -> float:
    """The exponent a at which a grid of ``n`` runs spends ``target`` of its compute (0 for a target of 1 or more;
    :data:`MAX_EXPONENT` for a target at or below the least it can spend, every run but the top one stopped at s0)."""
    if target >= 1.0:
        return 0.0
    lo, hi = 0.0, MAX_EXPONENT
    if schedule_compute(n, hi, s0) >= target:
        return hi
    for _ in range(60):  # schedule_compute decreases in a
        mid = 0.5 * (lo + hi)
        if schedule_compute(n, mid, s0) > target:
            lo = mid
        else:
            hi = mid
    return hi


def survivors(n: int, s: float, target: float, s0: float) -> int:
    """How many of a grid's ``n`` runs a run at fraction ``s`` of its budget must rank within to go on (at least 1)."""
    if target >= 1.0 or s <= s0:
        return n
    q = float((s0 / s) ** schedule_exponent(target, s0, n))
    return max(1, min(n, math.ceil(n * q - 1e-9)))


def schedule_start(policy: Policy) -> float:
    """Where the schedule starts: ``target_start`` if set, else ``min_fraction`` (at least :data:`MIN_START`)."""
    start = policy.min_fraction if policy.target_start is None else policy.target_start
    return max(start, MIN_START)


def _score(run: GridRun, v: FloatArray | None, recent_points: int) -> float:
    recent = float(np.mean(run.y[-recent_points:]))
    return recent if v is None else max(float(np.median(v)), recent)


def _p_above_leader(i: int, lead: int, draws: Mapping[int, FloatArray]) -> float | None:
    """P(run i's value at the budget > the top-ranked run's), from their draws (``None`` without both)."""
    vi, vl = draws.get(i), draws.get(lead)
    if vi is None or vl is None or i == lead:
        return None
    return float(np.mean(vi > vl))


def compute_target_candidates(
    runs: Sequence[GridRun],
    draws: Mapping[int, FloatArray],
    protected: frozenset[int],
    own: Sequence[Recommendation],
    taken: set[int],
    policy: Policy,
    recent_points: int,
) -> list[Candidate]:
    """Stops by the compute target (module docstring) for live runs no other rule stopped."""
    target = policy.compute_target
    if target is None or target >= RULES_SPEND:  # at or above it the knob holds stops back (effective_policy)
        return []
    valued = [i for i, r in enumerate(runs) if r.status != "stopped" and r.x.size]
    scores = {i: _score(runs[i], draws.get(i), recent_points) for i in valued}
    ranking = sorted(valued, key=lambda i: -scores[i])
    n = len(runs)
    out: list[Candidate] = []
    for rank, i in enumerate(ranking):
        run = runs[i]
        if run.status != "live" or i in protected or i in taken or own[i].action == "stop" or run.budget is None:
            continue
        s = float(run.x[-1]) / float(run.budget) if run.budget > 0 else 1.0
        start = schedule_start(policy)
        if s < start or s >= 1.0:
            continue
        keep = survivors(n, s, target, start)
        if rank < keep:
            continue
        p_above = _p_above_leader(i, ranking[0], draws)
        if policy.target_keep_p is not None and p_above is not None and p_above >= policy.target_keep_p:
            continue
        numbers = {
            **own[i].numbers,
            "compute_target": float(target),
            "target_rank": float(rank + 1),
            "target_keep": float(keep),
            "target_score": scores[i],
        }
        reason = (
            f"compute target {target:g}: at {s:.0%} of its budget a run goes on only within the top {keep} of the "
            f"grid's {n} runs; it ranks {rank + 1} by value at the budget ({scores[i]:.3f})"
        )
        out.append((scores[i], i, Recommendation(run.run_id, "stop", reason, numbers, "compute_target")))
    return out
