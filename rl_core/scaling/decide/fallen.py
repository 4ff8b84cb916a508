"""Runs that have fallen from their peak: their forecast at the budget is capped at where they are now.

The sigmoid never falls. Fitted to a run that rose fast and then decayed (an unstable recipe, a collapse), it still
forecasts a value near the peak, and in a grid that optimistic forecast does damage twice: it stops the other runs
as dominated, and it keeps them stopped (no resume) while the run it trusts keeps falling. This module detects the
fall on the observed points alone and caps the run's value draws at its recent level: a run that has fallen is
forecast to stay where it is, not to climb back to its peak.

Rule (the policy's ``fall`` block, :class:`~rl_core.scaling.decide.policy.FallRule`): the recent level is the mean
of the run's last ``points`` evaluations; the peak is the highest mean of any ``points`` consecutive evaluations. The
run has fallen when peak − recent exceeds ``margin`` + ``z`` · noise · sqrt(2 / ``points``), the noise being the
grid's pooled evaluation noise (:func:`~rl_core.scaling.decide.matched_compute.pooled_noise`, the same estimate and
form of threshold the *behind* rule uses).

Invariants: observed points only; no verdict without a noise estimate or with fewer than 2 × ``points`` evaluations;
capping only lowers draws, and never below the recent level, so a flooring at the recent level (the stop rule's)
and this cap together leave the run's draws within [recent, its own forecast].
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rl_core.scaling.decide.policy import FallRule
from rl_core.scaling.fit.model import FloatArray


@dataclass(frozen=True)
class Fall:
    """How far a run has fallen: its peak and recent levels (means of ``points`` consecutive evaluations) and the
    threshold the drop had to exceed."""

    peak: float
    recent: float
    threshold: float

    @property
    def drop(self) -> float:
        return self.peak - self.recent


def fallen_from_peak(y: FloatArray, noise: float | None, points: int, rule: FallRule | None) -> Fall | None:
    """The fall of a run whose recent level is below its peak by more than the threshold of ``rule`` (the policy's
    ``fall`` block; ``None``: the rule is off), else ``None``."""
    if rule is None or noise is None or points < 1 or y.size < 2 * points:
        return None
    window = np.convolve(y, np.ones(points) / points, mode="valid")
    peak, recent = float(window.max()), float(window[-1])
    threshold = rule.margin + rule.z * noise * float(np.sqrt(2.0 / points))
    return Fall(peak, recent, threshold) if peak - recent > threshold else None


def capped_at_recent(v: FloatArray, fall: Fall | None) -> FloatArray:
    """Value draws capped at the recent level of a run that has fallen (unchanged when it has not)."""
    return v if fall is None else np.minimum(v, fall.recent)
