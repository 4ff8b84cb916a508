"""Learning the shape prior of :mod:`rl_core.scaling.fit.prior` from complete curves (oracle fits; see there)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rl_core.scaling.fit.data import DEFAULT_BURN_IN_FRACTION, MIN_POINTS, prepare_curve
from rl_core.scaling.fit.forecast import FitOptions, fit_curve
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.fit.prior import ShapePrior, gaussian_from_cases

#: Cut-offs at which the oracle shapes are read (fractions of each training curve's x range).
LEARN_CUTOFFS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
#: Covariance inflation of the shipped prior (chosen by the leave-one-source-out backtest, docs/forecasting.md).
DEFAULT_SCALE = 0.5
#: Held-out points per case used to learn the extrapolation error (evenly spaced over the tail).
CALIBRATION_POINTS = 40
#: Posterior draws per case when learning the extrapolation error.
CALIBRATION_DRAWS = 500


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


@dataclass(frozen=True)
class _CalibrationCase:
    group: str
    curves: FloatArray
    """(draws, points) noise-free curves at the held-out points, without extrapolation error."""
    noise: FloatArray
    """(draws, points) measurement noise of each draw."""
    efolds: FloatArray
    """ln(C / compute seen) at the held-out points."""
    y: FloatArray


def learn_extrapolation_sd(
    curves: Sequence[tuple[str, FloatArray, FloatArray]],
    prior: ShapePrior,
    groups: Mapping[str, str],
    *,
    level: float = 0.8,
    cutoffs: Sequence[float] = LEARN_CUTOFFS,
) -> float:
    """The smallest extrapolation error per e-fold of compute (:class:`ShapePrior.extrapolation_sd`) at which the
    predictive band at ``level`` covers at least ``level`` of the training curves' held-out points.

    Every (curve, cut-off) is forecast as the forecaster would (the window, this prior); coverage weights each
    near-duplicate group once. Coverage rises with the error, so the answer is found by bisection (to 0.001)."""
    cases: list[_CalibrationCase] = []
    rng = np.random.default_rng(0)
    for name, x, y in curves:
        for f in cutoffs:
            cut = x[0] + f * (x[-1] - x[0])
            fit = fit_curve(
                x[x <= cut],
                y[x <= cut],
                FitOptions(prior=replace(prior, extrapolation_sd=0.0), n_samples=CALIBRATION_DRAWS, power_law=False),
            )
            tail = x > cut
            if fit.samples is None or not fit.usable or not tail.any() or fit.compute_max <= 0:
                continue
            pick = np.unique(np.linspace(0, int(tail.sum()) - 1, CALIBRATION_POINTS).astype(int))
            xt, yt = x[tail][pick], y[tail][pick]
            draws = fit.samples.curves(xt)
            noise = rng.standard_normal(draws.shape) * fit.samples.sigma[:, None]
            efolds = np.log(np.maximum(xt, fit.compute_max) / fit.compute_max)
            cases.append(_CalibrationCase(groups.get(name, name), draws, noise, efolds, yt))
    if not cases:
        return 0.0
    z = rng.standard_normal(CALIBRATION_DRAWS)
    q = ((1.0 - level) / 2.0, (1.0 + level) / 2.0)

    def coverage(sd: float) -> float:
        per_group: dict[str, list[float]] = {}
        for c in cases:
            meas = np.clip(c.curves + sd * z[: c.curves.shape[0], None] * c.efolds[None, :] + c.noise, 0.0, 1.0)
            lo, hi = np.quantile(meas, q, axis=0)
            per_group.setdefault(c.group, []).append(float(np.mean((c.y >= lo) & (c.y <= hi))))
        return float(np.mean([np.mean(v) for v in per_group.values()]))

    if coverage(0.0) >= level:
        return 0.0
    lo_sd, hi_sd = 0.0, 0.2
    if coverage(hi_sd) < level:
        return hi_sd
    while hi_sd - lo_sd > 0.001:
        mid = 0.5 * (lo_sd + hi_sd)
        lo_sd, hi_sd = (lo_sd, mid) if coverage(mid) >= level else (mid, hi_sd)
    return round(hi_sd, 4)
