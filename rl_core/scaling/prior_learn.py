"""Learning the shape prior of :mod:`rl_core.scaling.prior` from complete curves (oracle fits; see there)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rl_core.scaling.data import DEFAULT_BURN_IN_FRACTION, MIN_POINTS, prepare_curve
from rl_core.scaling.forecast import fit_curve
from rl_core.scaling.model import FloatArray
from rl_core.scaling.prior import ShapePrior, gaussian_from_cases

#: Cut-offs at which the oracle shapes are read (fractions of each training curve's x range).
LEARN_CUTOFFS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
#: Covariance inflation of the shipped prior (chosen by the leave-one-source-out backtest, docs/forecasting.md).
DEFAULT_SCALE = 0.5


@dataclass(frozen=True)
class OracleShape:
    curve: str
    cutoff: float
    u: float
    """log(C_mid / compute seen at the cut-off)."""
    lb: float
    """log B."""


def oracle_shapes(
    name: str,
    x: FloatArray,
    y: FloatArray,
    cutoffs: Sequence[float] = LEARN_CUTOFFS,
    *,
    r0: str = "auto",
    burn_in_fraction: float = DEFAULT_BURN_IN_FRACTION,
) -> list[OracleShape]:
    """For each cut-off: the sigmoid fitted to the points a forecast at that cut-off would use plus the whole tail
    (same burn-in threshold, same R0 rule), its shape read relative to the compute seen at the cut-off."""
    out: list[OracleShape] = []
    for f in cutoffs:
        cut = x[0] + f * (x[-1] - x[0])
        window = prepare_curve(x[x <= cut], y[x <= cut], burn_in_fraction=burn_in_fraction)
        if window.n_positive < MIN_POINTS:
            continue
        r0_value: float | str = r0
        if r0 == "auto":
            r0_value = window.r0_observed if window.starts_at_zero and window.r0_observed is not None else "fit"
        fit = fit_curve(x, y, burn_in=window.burn_in, r0=r0_value, intervals=False, power_law=False, prior=None)
        if fit.params is None or fit.status != "ok":
            continue
        seen = float(window.x.max())
        out.append(OracleShape(name, f, float(np.log(fit.params.C_mid / seen)), float(np.log(fit.params.B))))
    return out


def learn_prior(
    shapes: Sequence[OracleShape],
    groups: Mapping[str, str],
    sources: Sequence[str],
    *,
    scale: float = DEFAULT_SCALE,
    version: str | None = None,
) -> ShapePrior:
    """A Gaussian over the oracle shapes, each near-duplicate group weighted once (its cases share the weight)."""
    if not shapes:
        raise ValueError("no oracle shapes to learn a prior from")
    per_group: dict[str, int] = {}
    for s in shapes:
        per_group[groups.get(s.curve, s.curve)] = per_group.get(groups.get(s.curve, s.curve), 0) + 1
    weights = [1.0 / per_group[groups.get(s.curve, s.curve)] for s in shapes]
    mean, cov = gaussian_from_cases([s.u for s in shapes], [s.lb for s in shapes], weights, scale=scale)
    return ShapePrior(
        mean=mean,
        cov=cov,
        version=version or _dt.date.today().isoformat(),
        scale=scale,
        n_cases=len(shapes),
        sources=tuple(sorted(set(sources))),
        description=(
            "Gaussian over (log(C_mid / compute seen), log B) of oracle fits (window + held-out tail) of real RL "
            f"curves at cut-offs {', '.join(f'{c:g}' for c in LEARN_CUTOFFS)}; near-duplicate groups weighted once; "
            f"covariance x{scale:g}."
        ),
    )
