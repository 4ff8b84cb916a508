"""Grid-aware fits: the runs of one ablation grid fitted jointly (an empirical-Bayes hierarchical fit).

Runs of one grid share the base checkpoint and the evaluation set, so they share R0, and they usually have similar
shapes (B, C_mid); their ceilings A are what the ablation measures and are NOT pooled. The joint fit:

1. **Shared R0.** When the runs' first evaluations are at zero compute (the untrained checkpoint) and agree within
   :data:`R0_AGREEMENT`, R0 is the mean of those first evaluations over the grid (one checkpoint, one eval set:
   averaging only removes evaluation noise). First evaluations further apart mean different base checkpoints (a
   size sweep): that is not one grid, and every run is fitted on its own (R0 and shape), with a note.
2. **Each run alone.** Every run's own posterior over (log C_mid, log B) (with the shared R0 and the default shape
   prior) is evaluated on the fitter's coarse profile grid; it gives the mean and covariance of its shape. Runs
   with no gain (flat) are left out of the grid's shape.
3. **Shrink the shape toward the grid.** Run i gets a second Gaussian prior on (log C_mid, log B): the grid's
   population of shapes estimated from its *siblings* only (leave-one-out, so a run never counts its own data
   twice): mean = the average of the siblings' posterior means, covariance = their spread (between-run variance,
   floored at :data:`MIN_SPREAD`) plus the uncertainty of that average. The product with the default prior is
   again a Gaussian; run i is refitted under it. A short or noisy run is pulled toward its siblings' shape; a
   long, clean run is barely moved (its likelihood dominates).

4. **Borrow the noise level.** A run with fewer than :data:`MIN_POINTS` positive-compute points (too short to be
   fitted alone) gets a scaled inverse chi-square prior on its noise variance from its siblings' residual variances
   (their median, :data:`NOISE_PRIOR_DOF` pseudo-residuals): it does not take a near-exact interpolation for a
   noise-free curve. Longer runs keep their own noise level (borrowing it there made the 0.3 backtest worse).

With a grid prior a run needs only :data:`GRID_MIN_POINTS` positive-compute points (the prior supplies the shape),
or :data:`GRID_MIN_POINTS_SHARED_R0` when R0 is shared and the siblings supply a noise level (only the ceiling is
left to the run's own points).
A grid of one run is exactly :func:`fit_curve`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from rl_core.scaling.fit.data import MIN_POINTS, PreparedCurve, prepare_curve
from rl_core.scaling.fit.forecast import CurveFit, FitOptions, fit_prepared, resolve_options
from rl_core.scaling.fit.posterior import NoisePrior, effective_size, log_weights
from rl_core.scaling.fit.prior import ShapePrior, load_prior
from rl_core.scaling.fit.search import SearchBox, fractions, log_compute, profile

#: Floor on the between-run standard deviation of (log C_mid, log B) inside a grid (chosen by the grid backtest).
MIN_SPREAD = (0.35, 0.25)
#: R0 is shared only when the runs' first evaluations (at zero compute) lie within this range (several times the
#: evaluation noise of ~0.02-0.03, far below the gaps between model sizes): runs whose untrained
#: pass rates differ by more than evaluation noise do not share a base checkpoint (e.g. a model-size sweep).
R0_AGREEMENT = 0.15
#: Positive-compute points a run needs when its siblings supply a shape prior.
GRID_MIN_POINTS = 3
#: ... and when R0 is shared and the siblings supply a noise level too: only the ceiling is left to the run's own
#: points, so a sparsely evaluated run (a larger batch, more generations per prompt) is forecast from its second
#: evaluation on, with the wide band that gives.
GRID_MIN_POINTS_SHARED_R0 = 2
#: Weight of the siblings' noise level in a run's posterior, in pseudo-residuals (fixed a priori: a short run's
#: handful of residuals and the grid's weigh about the same; a long run's dominate).
NOISE_PRIOR_DOF = 4.0


@dataclass(frozen=True)
class RunSummary:
    """What a run tells its siblings: its shape's posterior mean and covariance over (log C_mid, log B) (``None``
    for a flat run) and its residual variance with that estimate's degrees of freedom."""

    shape: tuple[np.ndarray, np.ndarray] | None
    noise_var: float
    noise_dof: float


def _summarize_run(
    prep: PreparedCurve, r0: float | None, prior: ShapePrior | None, autocorrelation: bool
) -> RunSummary | None:
    """One run's shape moments and noise level from the coarse profile grid (the fitter's first step; no
    sampling): cheap, and the grid's spread floor (MIN_SPREAD) dwarfs its resolution."""
    x, y = prep.x, prep.y
    if prep.n_positive < MIN_POINTS:
        return None
    box = SearchBox.for_data(x)
    prof = profile(x, y, r0, box)
    k = int(np.argmin(prof.lin.sse))
    noise_dof = float(y.size - (2 if r0 is None else 1) - 2)
    noise_var = float(prof.lin.sse[k]) / noise_dof if noise_dof >= 1 else float("nan")
    n_eff = None
    if autocorrelation:
        fitted = (
            prof.lin.R0[k]
            + (prof.lin.A[k] - prof.lin.R0[k]) * fractions(log_compute(x), prof.m[k : k + 1], prof.b[k : k + 1])[0]
        )
        n_eff = effective_size(fitted - y, 2 if r0 is None else 1)
    logw = log_weights(prof.lin, y.size, r0, n_eff)
    if prior is not None:
        logw = logw + prior.log_density(prof.m, prof.b, float(np.log(x.max())))
    w = np.exp(logw - logw.max())
    w /= w.sum()
    gain = float(w @ (prof.lin.A - prof.lin.R0))
    if abs(gain) < 0.01:
        return RunSummary(None, noise_var, noise_dof)  # a flat run says nothing about the grid's shape
    z = np.stack([prof.m, np.log(prof.b)], axis=1)
    mean = w @ z
    d = z - mean
    return RunSummary((mean, (d * w[:, None]).T @ d + 1e-6 * np.eye(2)), noise_var, noise_dof)


def _sibling_noise(summaries: Sequence[RunSummary]) -> NoisePrior | None:
    """The siblings' noise level as a prior (median residual variance, :data:`NOISE_PRIOR_DOF` pseudo-residuals,
    never more than the siblings' own degrees of freedom); ``None`` when no sibling estimated one."""
    known = [r for r in summaries if np.isfinite(r.noise_var) and r.noise_var > 0]
    if not known:
        return None
    dof = min(NOISE_PRIOR_DOF, float(sum(r.noise_dof for r in known)))
    return NoisePrior(scale=float(np.sqrt(np.median([r.noise_var for r in known]))), dof=dof)


def _combine(base: ShapePrior | None, mean: np.ndarray, cov: np.ndarray, log_seen: float) -> ShapePrior:
    """Product of the base prior (relative to ``log_seen``) and the grid's Gaussian over (log C_mid, log B)."""
    mu = np.array([mean[0] - log_seen, mean[1]])
    prec = np.linalg.inv(cov)
    if base is not None:
        p0 = base.precision
        total = p0 + prec
        mu = np.linalg.solve(total, p0 @ np.asarray(base.mean) + prec @ mu)
        prec = total
    c = np.linalg.inv(prec)
    c = 0.5 * (c + c.T)
    return ShapePrior(
        mean=(float(mu[0]), float(mu[1])),
        cov=((float(c[0, 0]), float(c[0, 1])), (float(c[1, 0]), float(c[1, 1]))),
        version="grid" if base is None else f"{base.version} x grid",
        description="default shape prior x the grid's siblings (leave-one-out)",
        extrapolation_sd=0.0 if base is None else base.extrapolation_sd,
    )


def _with_note(fit: CurveFit, note: str) -> CurveFit:
    return dataclasses.replace(fit, notes=(*fit.notes, note))


def _r0_for(opts: FitOptions, prep: PreparedCurve) -> float | None:
    """R0 as fit_curve would resolve it (-1 when it cannot: no points)."""
    if opts.r0 == "fit":
        return None
    if opts.r0 == "auto" and not prep.starts_at_zero:
        return None
    if opts.r0 in ("observed", "auto"):
        return prep.r0_observed if prep.r0_observed is not None else -1.0
    return float(opts.r0)


@dataclass(frozen=True)
class GridShare:
    """What the runs of one grid share (:func:`grid_share`): R0 when their first evaluations agree (``r0``, with the
    note every fit carries), or why they are fitted per run (``apart``); and the base shape prior."""

    r0: float | None
    notes: tuple[str, ...]
    apart: str | None
    base_prior: ShapePrior | None

    @property
    def r0_arg(self) -> Any:
        """R0 as :func:`fit_prepared` takes it (the options' own choice when not shared)."""
        return self.r0 if self.r0 is not None else "options"


def prepare_for_grid(x: ArrayLike, y: ArrayLike, opts: FitOptions) -> PreparedCurve:
    """One run's points as the grid fit reads them."""
    return prepare_curve(x, y, burn_in=opts.burn_in, burn_in_fraction=opts.burn_in_fraction, fit_until=opts.fit_until)


def grid_share(prepared: Sequence[PreparedCurve], opts: FitOptions) -> GridShare:
    """Step 1 of the module docstring on the runs' prepared curves (``opts``: resolved options)."""
    shared_r0: float | None = None
    apart: str | None = None
    if opts.r0 in ("observed", "auto"):
        starts = [p.r0_observed for p in prepared if p.starts_at_zero and p.r0_observed is not None]
        if len(starts) == len(prepared) and max(starts) - min(starts) <= R0_AGREEMENT:
            shared_r0 = float(np.mean(starts))
        elif len(starts) == len(prepared):
            # Different untrained pass rates: different base checkpoints, not one grid. Fit each run on its own.
            apart = f"first evaluations differ by {max(starts) - min(starts):.3f} > {R0_AGREEMENT}: fitted per run"
    notes = (
        (f"R0 = {shared_r0:.4g}, the mean first evaluation of the grid's {len(prepared)} runs (shared checkpoint)",)
        if shared_r0 is not None
        else ()
    )
    base = load_prior() if opts.prior == "public" else opts.prior
    return GridShare(shared_r0, notes, apart, base if isinstance(base, ShapePrior) else None)


def summarize_for_grid(prep: PreparedCurve, share: GridShare, opts: FitOptions) -> RunSummary | None:
    """Step 2: what one run tells its siblings (``None``: nothing, e.g. too few points)."""
    r0_run = share.r0 if share.r0 is not None else _r0_for(opts, prep)
    return _summarize_run(prep, r0_run, share.base_prior, opts.autocorrelation) if r0_run != -1.0 else None


def fit_in_grid(
    x: ArrayLike,
    y: ArrayLike,
    prep: PreparedCurve,
    others: Sequence[RunSummary],
    share: GridShare,
    opts: FitOptions,
) -> CurveFit:
    """Steps 3-4 for one run: its fit under the prior its siblings' summaries (``others``, itself left out) give."""
    siblings = [r.shape for r in others if r.shape is not None]
    # A run too short to be fitted alone borrows its siblings' noise level (two points and a shared R0 leave no
    # residual at all); a run with enough points keeps its own (measured: borrowing it there cost accuracy).
    noise = _sibling_noise(others) if prep.n_positive < MIN_POINTS else None
    min_points = GRID_MIN_POINTS_SHARED_R0 if share.r0 is not None and noise is not None else GRID_MIN_POINTS
    if not siblings or prep.n_positive < min_points or not np.any(prep.x > 0):
        return fit_prepared(x, y, opts, r0=share.r0_arg, notes=share.notes)
    means = np.stack([m for m, _ in siblings])
    within = np.mean([c for _, c in siblings], axis=0)
    centre = means.mean(axis=0)
    between = np.cov(means.T) if len(siblings) > 1 else np.zeros((2, 2))
    spread = np.diag(np.maximum(np.diag(between) - np.diag(within), 0.0)) if len(siblings) > 2 else np.zeros((2, 2))
    floor = np.diag(np.square(MIN_SPREAD))
    cov = spread + floor + (within + spread) / len(siblings)
    prior = _combine(share.base_prior, centre, cov, float(np.log(prep.x[prep.x > 0].max())))
    note: tuple[str, ...] = (
        f"grid fit: shape shrunk toward {len(siblings)} sibling run(s) "
        f"(C_mid ~ {np.exp(centre[0]):.4g}, B ~ {np.exp(centre[1]):.3g})",
    )
    if noise is not None:
        note = (
            *note,
            f"noise level borrowed from the siblings: sigma ~ {noise.scale:.3g} ({noise.dof:g} pseudo-points)",
        )
    return fit_prepared(
        x, y, opts, r0=share.r0_arg, prior=prior, min_points=min_points, notes=share.notes + note, noise=noise
    )


def fit_grid(
    curves: Sequence[tuple[ArrayLike, ArrayLike]], options: FitOptions | None = None, **overrides: Any
) -> list[CurveFit]:
    """Fit the runs of one grid (one ablation: same base checkpoint, same evaluation set) jointly.

    ``curves`` is a sequence of (compute, pass rate) pairs; the result has one :class:`CurveFit` per run, in
    order, each the same kind of object :func:`fit_curve` returns. A grid of one run is exactly ``fit_curve``.
    """
    opts = resolve_options(options, overrides)
    if len(curves) <= 1 or opts.method != "fast":
        return [fit_prepared(x, y, opts) for x, y in curves]
    prepared = [prepare_for_grid(x, y, opts) for x, y in curves]
    share = grid_share(prepared, opts)
    if share.apart is not None:
        return [_with_note(fit_prepared(x, y, opts), share.apart) for x, y in curves]
    summaries = [summarize_for_grid(prep, share, opts) for prep in prepared]
    out: list[CurveFit] = []
    for i, ((x, y), prep) in enumerate(zip(curves, prepared, strict=True)):
        others = [r for j, r in enumerate(summaries) if j != i and r is not None]
        out.append(fit_in_grid(x, y, prep, others, share, opts))
    return out


__all__ = [
    "GRID_MIN_POINTS",
    "GRID_MIN_POINTS_SHARED_R0",
    "MIN_POINTS",
    "MIN_SPREAD",
    "NOISE_PRIOR_DOF",
    "R0_AGREEMENT",
    "GridShare",
    "IncrementalGridFit",
    "RunSummary",
    "fit_grid",
    "fit_in_grid",
    "grid_share",
    "prepare_for_grid",
    "summarize_for_grid",
]


@dataclass
class _RunState:
    """One state of one run's points in an :class:`IncrementalGridFit`: the prepared curve, the fits made of it by
    mode of the grid (``alone``, ``grid`` or ``apart``) and its summaries by the shared R0 they were made under."""

    prep: PreparedCurve
    fits: dict[str, CurveFit] = field(default_factory=dict)
    summaries: dict[float | None, RunSummary | None] = field(default_factory=dict)


class IncrementalGridFit:
    """:func:`fit_grid` for a grid whose runs grow a point at a time, refitting only the runs whose points changed.

    ``fit(keys, curves)`` takes the runs' names (stable from call to call: an Optuna trial's number) beside their
    curves. A run's fit is made once per state of its points, by :func:`fit_in_grid` against its siblings as they are
    at that moment (what :func:`fit_grid` fits for that run then, exactly), and reused while its points do not change:
    a sibling that reports later does not refit it. So a fit that is reused saw its siblings, and the shared R0 (the
    mean first evaluation), as they were when it was made. A state is fitted once per mode of the grid (one run
    alone; one grid; runs whose first evaluations disagree, each fitted on its own): a grid that changes mode refits
    every run once, and one that goes back (the hold rule's look at the points one evaluation earlier, where a run
    that just started has none) finds the fits of that mode again. Each run keeps its ``keep`` newest states (2: the
    newest and the one before it, which the hold rule asks for). ``fits`` counts the fits made.
    """

    def __init__(self, options: FitOptions | None = None, *, keep: int = 2, **overrides: Any) -> None:
        self.options = resolve_options(options, overrides)
        self.keep = max(1, int(keep))
        self.fits = 0
        self._runs: dict[Any, dict[bytes, _RunState]] = {}

    def forget(self, keep_keys: Sequence[Any]) -> None:
        """Drop every run whose key is not in ``keep_keys`` (runs gone from the grid)."""
        kept = set(keep_keys)
        for key in [k for k in self._runs if k not in kept]:
            del self._runs[key]

    def _state(self, key: Any, x: ArrayLike, y: ArrayLike) -> _RunState:
        xa, ya = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
        points = xa.tobytes() + b"|" + ya.tobytes()
        states = self._runs.setdefault(key, {})
        found = states.get(points)
        if found is None:
            # The newest states by creation (not by use: the hold's look at the state before must not evict the
            # newest one).
            found = states[points] = _RunState(prepare_for_grid(xa, ya, self.options))
            while len(states) > self.keep:
                del states[next(iter(states))]
        return found

    def _summary(self, state: _RunState, share: GridShare) -> RunSummary | None:
        if share.r0 not in state.summaries:
            if len(state.summaries) >= 2:  # the R0 moves as runs arrive: keep the newest two
                del state.summaries[next(iter(state.summaries))]
            state.summaries[share.r0] = summarize_for_grid(state.prep, share, self.options)
        return state.summaries[share.r0]

    def fit(self, keys: Sequence[Any], curves: Sequence[tuple[ArrayLike, ArrayLike]]) -> list[CurveFit]:
        """The runs' fits, in order (``keys`` and ``curves`` of the same length, keys distinct)."""
        opts = self.options
        if len(keys) != len(curves) or len(set(keys)) != len(keys):
            raise ValueError("IncrementalGridFit.fit needs one distinct key per curve")
        states = [self._state(k, x, y) for k, (x, y) in zip(keys, curves, strict=True)]
        share: GridShare | None = None
        if len(curves) <= 1 or opts.method != "fast":
            mode = "alone"
        else:
            share = grid_share([s.prep for s in states], opts)
            mode = "apart" if share.apart is not None else "grid"
        todo = [i for i, s in enumerate(states) if mode not in s.fits]
        if todo and share is not None and share.apart is None:
            summaries = [self._summary(s, share) for s in states]
        for i in todo:
            (x, y), state = curves[i], states[i]
            if share is None:
                state.fits[mode] = fit_prepared(x, y, opts)
            elif share.apart is not None:
                state.fits[mode] = _with_note(fit_prepared(x, y, opts), share.apart)
            else:
                others = [r for j, r in enumerate(summaries) if j != i and r is not None]
                state.fits[mode] = fit_in_grid(x, y, state.prep, others, share, opts)
            self.fits += 1
        return [s.fits[mode] for s in states]
