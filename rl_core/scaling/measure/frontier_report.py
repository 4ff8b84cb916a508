"""What a frontier says about the knob (``Policy.compute_target``): whether it is monotone, which pruner settings
it matches, and how far each of its points sits above the oracle's floor.

The knob's points are scalerl's settings ordered by target; the default (no target: the rules alone) sits at 0.5,
where the knob is the same policy. A knob is *monotone* when, as the target rises, mean compute never falls and
mean regret never rises; neighbouring targets are compared, and a difference counts only above :data:`NOISE`
(floating-point noise of averaging, not a margin). A pruner setting is *matched* when some knob point spends no
more mean compute for no more mean regret. A point's distance to the floor is its mean compute minus the mean of
its grids' :func:`~.frontier.oracle_floor` (judging from the first evaluation: the least compute any rule that
finishes one run can spend, at regret 0).

Invariants: every number is a plain mean over the grids a setting was replayed on (as :func:`.frontier.points`);
nothing here replays or fits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from rl_core.scaling.measure.frontier import NOISE, GridScore, Point, Setting, at_compute, summarise

#: Where the default (no target) sits on the knob: 0.5 resolves to the same policy.
DEFAULT_TARGET = 0.5
#: The floor the distance is measured to: the oracle judging at the grid's first evaluation after any training.
FLOOR_START = 0.0

Table = Mapping[Setting, Sequence[GridScore]]


def knob_target(setting: Setting) -> float | None:
    """Where a setting sits on the knob: its ``compute_target``, :data:`DEFAULT_TARGET` for ``default``; ``None``
    for a pruner's setting (labels as :func:`.frontier.target_label` writes them)."""
    if setting.policy != "scalerl":
        return None
    if setting.label == "default":
        return DEFAULT_TARGET
    if setting.label.startswith("target "):
        return float(setting.label.removeprefix("target "))
    return None


@dataclass(frozen=True)
class KnobValue:
    """One knob setting's numbers (means over a set of grids, or one grid's)."""

    target: float
    label: str
    compute: float
    regret: float


@dataclass(frozen=True)
class Violation:
    """Two neighbouring knob settings (``lower`` at the lower target) where ``metric`` moved the wrong way:
    compute fell, or regret rose, as the target rose."""

    metric: str
    lower: KnobValue
    higher: KnobValue

    def __str__(self) -> str:
        a, b = self.lower, self.higher
        lo, hi = (a.compute, b.compute) if self.metric == "compute" else (a.regret, b.regret)
        verb = "falls" if self.metric == "compute" else "rises"
        return (
            f"{self.metric} {verb} from {self.lower.label} ({lo:.5f}) to {self.higher.label} ({hi:.5f}), {hi - lo:+.2g}"
        )


def violations(values: Sequence[KnobValue], noise: float = NOISE) -> list[Violation]:
    """Every pair of neighbouring targets where compute falls or regret rises by more than ``noise`` as the target
    rises (settings at one target are not compared with each other; each is compared with every setting at the next
    target up). No pair: the knob is monotone on these values."""
    levels = sorted({v.target for v in values})
    out: list[Violation] = []
    for lo_t, hi_t in pairwise(levels):
        for lo in (v for v in values if v.target == lo_t):
            for hi in (v for v in values if v.target == hi_t):
                if hi.compute < lo.compute - noise:
                    out.append(Violation("compute", lo, hi))
                if hi.regret > lo.regret + noise:
                    out.append(Violation("regret", lo, hi))
    return out


def knob_points(table: Table, keep: Callable[[str], bool]) -> list[tuple[float, Point]]:
    """scalerl's points over the grids ``keep`` accepts, by target (settings without such a grid are left out)."""
    out = []
    for setting, scores in table.items():
        target = knob_target(setting)
        sub = [s for s in scores if keep(s.grid)]
        if target is not None and sub:
            out.append((target, summarise(setting, sub)))
    return sorted(out, key=lambda tp: tp[0])


@dataclass(frozen=True)
class Monotonicity:
    """The knob's verdict on a set of grids: ``violations`` of the means over ``grids`` grids, and the grids whose
    own numbers (a grid's score: a mean over random orders where a replay has them) have a violation."""

    violations: list[Violation]
    grids: int
    failing: Mapping[str, list[Violation]] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return not self.violations


def monotonicity(table: Table, keep: Callable[[str], bool], noise: float = NOISE) -> Monotonicity:
    """:func:`violations` of the knob's means over the grids ``keep`` accepts, and of each such grid's own."""
    means = [KnobValue(t, p.setting.label, p.compute, p.regret) for t, p in knob_points(table, keep)]
    per_grid: dict[str, list[KnobValue]] = {}
    for setting, scores in table.items():
        target = knob_target(setting)
        if target is None:
            continue
        for s in scores:
            if keep(s.grid):
                per_grid.setdefault(s.grid, []).append(KnobValue(target, setting.label, s.compute, s.regret))
    failing = {g: v for g in sorted(per_grid) if (v := violations(per_grid[g], noise))}
    return Monotonicity(violations(means, noise), len(per_grid), failing)


def cheapest_at_regret(scalerl: Sequence[Point], level: float) -> Point | None:
    """scalerl's setting with the least mean compute at mean regret <= ``level`` (``None`` if none)."""
    within = [s for s in scalerl if s.regret <= level + NOISE]
    return min(within, key=lambda s: (s.compute, s.regret)) if within else None


@dataclass(frozen=True)
class PrunerMatch:
    """A pruner's point beside scalerl's nearest points: the least regret at no more compute (``by_compute``) and
    the least compute at no more regret (``by_regret``); either is ``None`` when no knob point qualifies."""

    pruner: Point
    by_compute: Point | None
    by_regret: Point | None

    @property
    def met(self) -> bool:
        """Some knob point spends no more mean compute for no more mean regret."""
        return self.by_compute is not None and self.by_compute.regret <= self.pruner.regret + NOISE


def match_pruners(scalerl: Sequence[Point], pruners: Sequence[Point]) -> list[PrunerMatch]:
    """Every pruner point with scalerl's nearest points (:class:`PrunerMatch`), in the order given."""
    return [PrunerMatch(p, at_compute(scalerl, p.compute), cheapest_at_regret(scalerl, p.regret)) for p in pruners]


@dataclass(frozen=True)
class FloorGap:
    """A knob point beside the mean oracle floor of the same grids."""

    target: float
    point: Point
    floor: float

    @property
    def gap(self) -> float:
        """Mean compute above the mean floor."""
        return self.point.compute - self.floor


def floor_gaps(table: Table, keep: Callable[[str], bool], floors: Mapping[str, float]) -> list[FloorGap]:
    """Every knob point over the grids ``keep`` accepts with the mean of ``floors`` (by grid) over the grids of
    that point, by target. A grid without a floor raises ``KeyError``."""
    out = []
    for target, p in knob_points(table, keep):
        grids = [s.grid for s in table[p.setting] if keep(s.grid)]
        out.append(FloorGap(target, p, float(np.mean([floors[g] for g in grids]))))
    return out


def nearest_floor(gaps: Sequence[FloorGap], max_regret: float) -> FloorGap | None:
    """The point closest to the floor among those with mean regret <= ``max_regret`` (``None`` if none)."""
    within = [g for g in gaps if g.point.regret <= max_regret + NOISE]
    return min(within, key=lambda g: (g.gap, g.point.regret)) if within else None


def near_floor(gap: FloorGap, distance: float, max_regret: float) -> bool:
    """``gap``'s point is within ``distance`` of the floor at mean regret <= ``max_regret``."""
    return gap.gap <= distance + NOISE and gap.point.regret <= max_regret + NOISE
