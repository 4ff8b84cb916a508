"""``fit_curve``: the one entry point that turns raw (compute, pass rate) points into a forecast.

It never raises on numeric input: too few points, flat, decreasing or noisy curves, NaN/inf, unsorted or
duplicate compute all come back as a :class:`CurveFit` with a ``status`` and a readable ``message``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from rl_core.scaling.fit.calibration import forecast_summary
from rl_core.scaling.fit.data import DEFAULT_BURN_IN_FRACTION, MIN_POINTS, PreparedCurve, prepare_curve
from rl_core.scaling.fit.fit_fast import Penalty, PointFit, fit_fast
from rl_core.scaling.fit.fit_paper import PaperGrid, fit_paper
from rl_core.scaling.fit.model import PowerLawParams, SigmoidParams
from rl_core.scaling.fit.posterior import (
    N_SAMPLES,
    NoisePrior,
    PosteriorSamples,
    effective_size,
    equal_tailed,
    pool_noise,
    sample_posterior,
)
from rl_core.scaling.fit.power_law import fit_power_law
from rl_core.scaling.fit.prior import ShapePrior, load_prior
from rl_core.scaling.fit.search import SearchBox, profile
from rl_core.scaling.fit.summary import FitSummary, summarize

Method = Literal["fast", "paper"]
Status = Literal["ok", "insufficient_data", "flat", "decreasing", "degenerate", "error"]
R0Choice = float | Literal["observed", "fit", "auto"]
PriorChoice = ShapePrior | Literal["public"] | None

#: A fitted R0 whose posterior median is this close to 1 sits on its bound: the fit is "degenerate", not "ok".
R0_BOUND_TOLERANCE = 1e-3
#: A fitted gain |A - R0| below this (in pass rate) makes the curve "flat".
FLAT_TOLERANCE = 0.01
DEFAULT_LEVEL = 0.8
#: The prior's weight is re-estimated from the posterior mode's residuals when they are this many times smaller
#: than the best grid cell's (nearly noise-free data), at most NOISE_ITERATIONS times.
NOISE_RATIO = 4.0
NOISE_ITERATIONS = 4


@dataclass(frozen=True)
class FitOptions:
    """How to fit. Defaults are documented in docs/forecasting.md."""

    method: Method = "fast"
    r0: R0Choice = "observed"
    """``"observed"``: the pass rate at the smallest compute; ``"fit"``: a free parameter; a number: fixed."""
    burn_in: float | None = None
    """Absolute compute below which points are left out; ``None`` uses ``burn_in_fraction``."""
    burn_in_fraction: float = DEFAULT_BURN_IN_FRACTION
    fit_until: float | None = None
    level: float = DEFAULT_LEVEL
    intervals: bool = True
    n_samples: int = N_SAMPLES
    seed: int = 0
    paper_grid: PaperGrid | None = None
    """Grid for ``method="paper"``; ``None`` carries the paper's grid to the data (PaperGrid.scaled_to)."""
    power_law: bool = True
    autocorrelation: bool = True
    """Temper the posterior by the residuals' lag-1 autocorrelation (see :mod:`rl_core.scaling.fit.posterior`)."""
    prior: PriorChoice = None
    """Prior over the curve's shape: ``None`` (the default) flat priors on log C_mid and log B, ``"public"`` the
    shipped empirical prior learned from public RL curves (:mod:`rl_core.scaling.fit.prior`; called ``"default"``
    until flat priors became the default), or a :class:`ShapePrior` (e.g. learned from your own runs). With a
    prior the point fit is the posterior mode. Flat is the default because the shipped prior forecast worse than
    flat priors on five stacks it never saw (docs/forecasting.md)."""

    def __post_init__(self) -> None:
        if isinstance(self.prior, str) and self.prior != "public":
            renamed = " ('default' was renamed 'public')" if self.prior == "default" else ""
            raise ValueError(
                f"prior {self.prior!r} is not allowed{renamed}: use None (flat), 'public' (the shipped prior) "
                "or a ShapePrior"
            )


@dataclass(frozen=True)
class Prediction:
    """Forecast at one compute: the fitted curve (``mean``) and the predictive band of a measurement."""

    compute: float
    mean: float
    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class CurveFit:
    """Result of :func:`fit_curve`. ``params`` is ``None`` only when nothing could be fitted."""

    status: Status
    message: str
    method: Method
    level: float
    n_points: int
    params: SigmoidParams | None = None
    r0_fitted: bool = False
    sse: float | None = None
    intervals: dict[str, tuple[float, float]] | None = None
    power_law: PowerLawParams | None = None
    power_law_sse: float | None = None
    burn_in: float = 0.0
    compute_max: float = 0.0
    """Largest compute the fit saw (the edge between interpolation and extrapolation)."""
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    samples: PosteriorSamples | None = field(default=None, repr=False, compare=False)
    prior: str | None = None
    """Version of the shape prior the fit used (``... x grid``: combined with its grid siblings'); None: flat."""
    band_scale: float = 1.0
    """Multiplier of the calibrated band's half-widths that every forecast of this fit is drawn with
    (:func:`~rl_core.scaling.fit.calibration.forecast_draws`; the raw posterior is never scaled): 1 (the shipped
    calibration) unless the service set an experiment's adaptive band
    (:func:`~rl_core.scaling.fit.adaptive_band.experiment_band_scale`) on a copy of the fit."""

    @property
    def ceiling_extrapolated(self) -> bool:
        """True while the compute seen is below the fitted C_mid: less than half of the gain is observed, so the
        ceiling A is an extrapolation (community fitters flag the same). False without parameters."""
        return self.params is not None and self.compute_max < self.params.C_mid

    @property
    def usable(self) -> bool:
        """True when the fit has parameters to forecast with."""
        return self.params is not None and self.status in ("ok", "flat", "decreasing")

    def predict(self, compute: ArrayLike, level: float | None = None) -> list[Prediction]:
        """Forecasts at each compute; ``lo``/``hi`` are ``None`` without intervals."""
        c = np.atleast_1d(np.asarray(compute, dtype=np.float64))
        if self.params is None:
            return [Prediction(float(v), float("nan"), None, None) for v in c]
        mean = self.params(c)
        if self.samples is None:
            return [Prediction(float(v), float(m), None, None) for v, m in zip(c, mean, strict=True)]
        lo, hi = equal_tailed(self.samples.measurements(c), self.level if level is None else level)
        return [Prediction(float(v), float(m), float(a), float(b)) for v, m, a, b in zip(c, mean, lo, hi, strict=True)]

    def predict_summary(self, compute: ArrayLike) -> list[Prediction]:
        """The forecast of a measured value as a person reads it: ``mean`` is the median of the calibrated
        predictive draws (:func:`~rl_core.scaling.fit.calibration.forecast_draws`) and the band their interval, so it
        lies inside it; without draws, :meth:`predict`'s."""
        c = np.atleast_1d(np.asarray(compute, dtype=np.float64))
        summary = forecast_summary(self, c, kind="measurement")
        if summary is None:
            return self.predict(c)
        med, lo, hi = summary
        return [Prediction(float(v), float(m), float(a), float(b)) for v, m, a, b in zip(c, med, lo, hi, strict=True)]

    def _message(self, est: FitSummary) -> str:
        """The message with the numbers it quotes taken from ``est`` (the summary every field of :meth:`to_dict`
        reads), so a message never quotes another A than the one beside it."""
        values = (est.value("A"), est.value("B"), est.value("C_mid"))
        if any(v is None for v in values) or "A=" not in self.message:
            return self.message
        a, b, c = values
        if self.status != "ok" or not self.message.startswith("A="):  # the least-squares fit's reading: say so
            head, sep, rest = self.message.partition(";")
            return f"{head} (least squares; the posterior median is A={a:.3f}){sep}{rest}"
        _, sep, rest = self.message.partition(";")
        return f"A={a:.3f} B={b:.3g} C_mid={c:.4g}{sep}{rest}"

    def to_dict(self, predict_at: ArrayLike = ()) -> dict[str, Any]:
        """JSON-ready summary (the CLI's ``--json`` contract): the one posterior summary of
        :mod:`rl_core.scaling.fit.summary` (with draws, every estimate is the median inside its own interval; the point
        fit's parameters are ``point``), and predictions whose ``mean`` is the median of the same draws as the band."""
        p = self.params
        pl = self.power_law
        est = summarize(self)
        return {
            "status": self.status,
            "message": self._message(est),
            "method": self.method,
            "R0": est.value("R0"),
            "r0_fitted": self.r0_fitted,
            "A": est.value("A"),
            "B": est.value("B"),
            "C_mid": est.value("C_mid"),
            "ceiling_identified": est.ceiling_identified,
            "point": None if p is None else {"R0": p.R0, "A": p.A, "B": p.B, "C_mid": p.C_mid},
            "ci": None
            if self.intervals is None
            else {k: [float(v[0]), float(v[1])] for k, v in self.intervals.items()},
            "level": self.level,
            "n_points": self.n_points,
            "sse": self.sse,
            "burn_in": self.burn_in,
            "compute_max": self.compute_max,
            "ceiling_extrapolated": self.ceiling_extrapolated,
            "predictions": [
                {"compute": q.compute, "mean": q.mean, "lo": q.lo, "hi": q.hi} for q in self.predict_summary(predict_at)
            ]
            if np.size(predict_at)
            else [],
            "power_law": None
            if pl is None
            else {"A": pl.A, "D": pl.D, "B": pl.B, "C0": pl.C0, "sse": self.power_law_sse},
            "notes": list(self.notes),
            "prior": self.prior,
            "seconds": self.seconds,
        }


def _resolve_r0(choice: R0Choice, curve: PreparedCurve) -> float | None:
    if choice == "fit":
        return None
    if choice == "observed":
        return curve.r0_observed
    if choice == "auto":
        return curve.r0_observed if curve.starts_at_zero else None
    return float(choice)


def _status_of(params: SigmoidParams) -> tuple[Status, str]:
    gain = params.A - params.R0
    if gain < -FLAT_TOLERANCE:
        return (
            "decreasing",
            f"pass rate is falling: fitted ceiling A={params.A:.3f} is below R0={params.R0:.3f}",
        )
    if abs(gain) < FLAT_TOLERANCE:
        return (
            "flat",
            f"no gain detected: fitted A={params.A:.3f} is within {FLAT_TOLERANCE} of R0={params.R0:.3f}",
        )
    return "ok", f"A={params.A:.3f} B={params.B:.3g} C_mid={params.C_mid:.4g}"


def label_r0_bound(
    status: Status, message: str, params: SigmoidParams, samples: PosteriorSamples | None, *, fitted: bool
) -> tuple[Status, str]:
    """``degenerate`` instead of ``ok`` when R0 is fitted and its posterior median sits on the bound 1.0."""
    if status != "ok" or not fitted or samples is None:
        return status, message
    median = float(np.median(samples.R0))
    if median < 1.0 - R0_BOUND_TOLERANCE:
        return status, message
    return "degenerate", (
        f"the fitted R0 sits on its bound 1.0 (posterior median {median:.3f}, least squares {params.R0:.3f}): "
        "the data do not identify R(0); pin it (--r0 observed or a value)"
    )


def _fit(curve: PreparedCurve, r0: float | None, options: FitOptions, noise: NoisePrior | None = None) -> CurveFit:
    x, y = curve.x, curve.y
    grid = None
    c_mid_range = None
    if options.method == "paper":
        grid = options.paper_grid or PaperGrid.scaled_to(x, y)
        c_mid_range = grid.c_mid_range
    box = SearchBox.for_data(x, c_mid_range)
    prof = profile(x, y, r0, box)
    point: PointFit | None
    if grid is not None:
        point = fit_paper(x, y, r0, grid)
        if point is None:
            return CurveFit(
                status="error",
                message="the paper's grid produced no valid fit (no cell converged inside B > 0)",
                method=options.method,
                level=options.level,
                n_points=int(y.size),
            )
    n_lin = 2 if r0 is None else 1
    prior = load_prior() if options.prior == "public" else options.prior
    log_prior = None
    if grid is None and isinstance(prior, ShapePrior):
        # The prior's weight in the penalised least squares is the noise level, estimated at the best grid cell
        # (the least-squares optimum is not needed: one refinement, of the posterior mode, is done).
        k = int(np.argmin(prof.lin.sse))
        cell = SigmoidParams(float(prof.lin.R0[k]), float(prof.lin.A[k]), float(prof.b[k]), float(np.exp(prof.m[k])))
        n_eff_cell = effective_size(cell(x) - y, n_lin) if options.autocorrelation else None
        tau = 1.0 if n_eff_cell is None else min(1.0, n_eff_cell / y.size)
        pooled_sse, pooled_dof = pool_noise(noise, float(prof.lin.sse[k]), max(y.size - n_lin - 2, 0))
        noise2 = float(pooled_sse) / max(float(pooled_dof), 1.0)
        log_seen = float(np.log(x.max()))
        log_prior = prior.bound(log_seen)
        for _ in range(NOISE_ITERATIONS):
            penalty = Penalty(prior.sqrt_precision, np.asarray(prior.mean), log_seen, float(np.sqrt(noise2 / tau)))
            point = fit_fast(x, y, r0, box, prof=prof, penalty=penalty)
            refined_sse, refined_dof = pool_noise(noise, point.sse, max(y.size - n_lin - 2, 0))
            refined = float(refined_sse) / max(float(refined_dof), 1.0)
            if refined * NOISE_RATIO >= noise2:
                break  # the grid cell's noise level was about right (typical for noisy data: one pass)
            noise2 = refined  # nearly noise-free data: the prior must weigh far less than the grid cell suggested
    elif grid is None:
        point = fit_fast(x, y, r0, box, prof=prof)
    assert point is not None
    n_eff = effective_size(point.params(x) - y, n_lin) if options.autocorrelation else None
    samples = None
    intervals = None
    if options.intervals:
        samples = sample_posterior(
            x,
            y,
            r0,
            box,
            prof.m,
            prof.b,
            prof.lin,
            prof.shape,
            n_samples=options.n_samples,
            seed=options.seed,
            n_eff=n_eff,
            point=point.params,
            log_prior=log_prior,
            noise=noise,
        )
        if isinstance(prior, ShapePrior) and prior.extrapolation_sd > 0.0:
            samples = replace(samples, extrapolation_sd=prior.extrapolation_sd, compute_seen=float(x.max()))
        intervals = {
            k: tuple(float(v) for v in equal_tailed(getattr(samples, k), options.level))
            for k in (("R0", "A", "B", "C_mid") if r0 is None else ("A", "B", "C_mid"))
        }
    pl = fit_power_law(x, y, curve.burn_in) if options.power_law else None
    status, message = label_r0_bound(*_status_of(point.params), point.params, samples, fitted=r0 is None)
    if status == "ok" and samples is not None:  # the numbers a person reads: the one posterior summary
        med = {k: float(np.median(getattr(samples, k))) for k in ("A", "B", "C_mid")}
        message = f"A={med['A']:.3f} B={med['B']:.3g} C_mid={med['C_mid']:.4g}"
    if intervals is not None and not intervals["A"][0] <= point.params.A <= intervals["A"][1]:
        lo, hi = intervals["A"]
        message += (
            f"; ceiling not identified yet: the least-squares A={point.params.A:.3f} lies outside its "
            f"{options.level:.0%} posterior interval [{lo:.3f}, {hi:.3f}] (a ridge of near-equal fits)"
        )
    return CurveFit(
        status=status,
        message=message,
        method=options.method,
        level=options.level,
        n_points=int(y.size),
        params=point.params,
        r0_fitted=r0 is None,
        sse=point.sse,
        intervals=intervals,  # type: ignore[arg-type]
        power_law=None if pl is None else pl[0],
        power_law_sse=None if pl is None else pl[1],
        samples=samples,
        prior=prior.version if log_prior is not None and isinstance(prior, ShapePrior) else None,
    )


def fit_curve(x: ArrayLike, y: ArrayLike, options: FitOptions | None = None, **overrides: Any) -> CurveFit:
    """Fit the sigmoid (and the power law) to a curve of pass rate ``y`` against compute ``x``.

    ``options`` or keyword ``overrides`` of :class:`FitOptions` choose the method, R0, burn-in, window and level.
    """
    return fit_prepared(x, y, resolve_options(options, overrides))


def resolve_options(options: FitOptions | None, overrides: dict[str, Any]) -> FitOptions:
    opts = options or FitOptions()
    return FitOptions(**{**opts.__dict__, **overrides}) if overrides else opts


def fit_prepared(
    x: ArrayLike,
    y: ArrayLike,
    opts: FitOptions,
    *,
    r0: float | Literal["options"] | None = "options",
    prior: PriorChoice | Literal["options"] = "options",
    min_points: int = MIN_POINTS,
    notes: tuple[str, ...] = (),
    noise: NoisePrior | None = None,
) -> CurveFit:
    """:func:`fit_curve` with R0, the shape prior and a noise prior optionally set by the caller (the grid fit)."""
    started = time.perf_counter()
    level = opts.level
    if not 0.0 < level < 1.0:
        return CurveFit("error", f"level must be in (0, 1), got {level}", opts.method, 0.8, 0)
    curve = prepare_curve(x, y, burn_in=opts.burn_in, burn_in_fraction=opts.burn_in_fraction, fit_until=opts.fit_until)
    all_notes = list(curve.messages) + list(notes)
    common: dict[str, Any] = {"burn_in": curve.burn_in, "compute_max": curve.x_observed_max}
    if curve.n_positive < min_points:
        result = CurveFit(
            status="insufficient_data",
            message=f"need at least {min_points} points with positive compute after burn-in, have {curve.n_positive}",
            method=opts.method,
            level=level,
            n_points=int(curve.y.size),
        )
    else:
        r0_value = _resolve_r0(opts.r0, curve) if r0 == "options" else r0
        if opts.r0 == "observed" and r0 == "options" and not curve.starts_at_zero and curve.y.size:
            all_notes.append(
                f"R0 pinned to the first evaluation ({curve.r0_observed:.4g}), which is at compute "
                f"{curve.r0_compute if curve.r0_compute is not None else curve.x[0]:g} > 0: "
                "that is a pass rate after some training; pass --r0 fit (or 'auto') to fit R(0) instead"
            )
        if r0_value is not None and not 0.0 <= r0_value <= 1.0:
            result = CurveFit("error", f"R0 must be in [0, 1], got {r0_value}", opts.method, level, int(curve.y.size))
        else:
            try:
                result = _fit(
                    curve,
                    r0_value,
                    opts if prior == "options" else FitOptions(**{**opts.__dict__, "prior": prior}),
                    noise,
                )
            except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:  # numerical failure, reported
                result = CurveFit("error", f"fit failed: {type(exc).__name__}: {exc}", opts.method, level, 0)
    return _with(result, seconds=time.perf_counter() - started, notes=tuple(all_notes), **common)


def _with(fit: CurveFit, **changes: Any) -> CurveFit:
    """``fit`` with ``changes`` (its fields only: not what it keeps beside them, e.g. its summaries)."""
    return replace(fit, **changes)
