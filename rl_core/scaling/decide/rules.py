"""Stop rules on a run's observed evaluations, the ones users ask trackers for; no fit involved.

Each rule is off unless configured, looks only at the run's own points, and returns ``None`` or a :class:`Hit`
whose ``reason`` is written from the same numbers it stores. Noise protection is part of each rule's definition:
a threshold or a guard must hold on ``evaluations`` consecutive evaluations, patience counts evaluations without
a new best, and divergence compares the mean of the last ``evaluations`` values with the best so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as config_dataclass

from rl_core.scaling.fit.model import FloatArray

_CONFIG = ConfigDict(extra="forbid")
_Fraction = Annotated[float, Field(ge=0.0, le=1.0, strict=True)]
_Evaluations = Annotated[int, Field(ge=1, le=1000, strict=True)]


@config_dataclass(frozen=True, config=_CONFIG)
class Threshold:
    """Stop a run whose pass rate is below ``value`` on ``evaluations`` consecutive evaluations, once it has used at
    least ``min_compute``."""

    value: _Fraction
    min_compute: Annotated[float, Field(ge=0.0, allow_inf_nan=False, strict=True)] = 0.0
    evaluations: _Evaluations = 2


@config_dataclass(frozen=True, config=_CONFIG)
class Patience:
    """Stop a run with no new best (by more than ``min_delta``) in its last ``evaluations`` evaluations."""

    evaluations: _Evaluations
    min_delta: _Fraction = 0.0


@config_dataclass(frozen=True, config=_CONFIG)
class Divergence:
    """Stop a run whose mean over its last ``evaluations`` evaluations fell more than ``drop`` below its best."""

    drop: _Fraction
    evaluations: _Evaluations = 2


@config_dataclass(frozen=True, config=_CONFIG)
class Guard:
    """Stop a run whose ``metric`` is above ``max_value`` on ``evaluations`` consecutive evaluations (e.g. the
    truncation rate above 0.15: the paper's sign of instability)."""

    metric: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_./:-]+$", strict=True)]
    max_value: Annotated[float, Field(allow_inf_nan=False, strict=True)]
    evaluations: _Evaluations = 3


@dataclass(frozen=True)
class Rules:
    """The configured observed-value rules (all off by default)."""

    threshold: Threshold | None = None
    patience: Patience | None = None
    divergence: Divergence | None = None
    guards: tuple[Guard, ...] = ()


@dataclass(frozen=True)
class Hit:
    rule: str
    reason: str
    numbers: dict[str, float | None] = field(default_factory=dict)


def _threshold(rule: Threshold, x: FloatArray, y: FloatArray) -> Hit | None:
    k = rule.evaluations
    if y.size < k or x[-1] < rule.min_compute:
        return None
    recent = y[-k:]
    if np.all(recent < rule.value):
        return Hit(
            "threshold",
            f"below the threshold: pass rate {recent[-1]:.3f} < {rule.value:g} on the last {k} evaluations "
            f"(after compute {rule.min_compute:g})",
            {"threshold": rule.value, "value": float(recent[-1])},
        )
    return None


def _patience(rule: Patience, y: FloatArray) -> Hit | None:
    n = rule.evaluations
    if y.size <= n:
        return None
    best_before = float(np.max(y[:-n]))
    recent_best = float(np.max(y[-n:]))
    if recent_best <= best_before + rule.min_delta:
        return Hit(
            "patience",
            f"plateau: no new best in {n} evaluations (best {best_before:.3f}, since then at most {recent_best:.3f})",
            {"best": best_before, "recent_best": recent_best, "patience": float(n)},
        )
    return None


def _divergence(rule: Divergence, y: FloatArray) -> Hit | None:
    k = rule.evaluations
    if y.size <= k:
        return None
    best = float(np.max(y))
    recent = float(np.mean(y[-k:]))
    if best - recent > rule.drop:
        return Hit(
            "divergence",
            f"diverging: the last {k} evaluations average {recent:.3f}, {best - recent:.3f} below the best "
            f"{best:.3f} (more than {rule.drop:g})",
            {"best": best, "recent": recent, "drop": best - recent},
        )
    return None


def _guard(rule: Guard, values: FloatArray | None) -> Hit | None:
    if values is None:
        return None
    v = values[np.isfinite(values)]
    k = rule.evaluations
    if v.size < k or not np.all(v[-k:] > rule.max_value):
        return None
    return Hit(
        f"guard:{rule.metric}",
        f"guard on {rule.metric}: {v[-1]:.3f} > {rule.max_value:g} on the last {k} evaluations",
        {rule.metric: float(v[-1]), "guard_max": rule.max_value},
    )


def check_rules(rules: Rules, x: FloatArray, y: FloatArray, metrics: Mapping[str, FloatArray]) -> Hit | None:
    """The first rule that fires (threshold, divergence, guards, patience), or ``None``."""
    if y.size == 0:
        return None
    checks = [
        _threshold(rules.threshold, x, y) if rules.threshold else None,
        _divergence(rules.divergence, y) if rules.divergence else None,
        *(_guard(g, metrics.get(g.metric)) for g in rules.guards),
        _patience(rules.patience, y) if rules.patience else None,
    ]
    return next((h for h in checks if h is not None), None)
