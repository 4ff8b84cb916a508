"""One posterior summary: every estimate a surface shows lies inside its own interval, and the forecast at the
budget never exceeds an identified ceiling. Checked over random curves, real public curves and early
cut-offs, with flat priors, the shipped prior and grid fits."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from rl_core.scaling import RunState, fit_curve, fit_grid, recommend_run
from rl_core.scaling.fit.calibration import curve_summary
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.summary import summarize
from tests.scaling.conftest import make_curve, random_curve

PUBLIC = Path(__file__).resolve().parents[2] / "fixtures" / "public_grids"


def _real_curves() -> list[tuple[str, np.ndarray, np.ndarray]]:
    out = []
    for path in sorted(PUBLIC.glob("*/*/*.csv"))[::7]:  # every 7th file: all studies, a bounded test time
        with path.open() as f:
            rows = [(float(r["step"]), float(r["pass_rate"])) for r in csv.DictReader(f)]
        x = np.array([s for s, _ in rows]) + 1.0
        y = np.array([p for _, p in rows])
        out.append((path.stem, x, y))
    return out


def _check(fit: CurveFit, budget: float) -> None:
    summary = summarize(fit)
    for name, est in summary.estimates.items():
        if est.lo is not None and est.hi is not None and est.value is not None:
            assert est.lo <= est.value <= est.hi, (name, est)
    curve = curve_summary(fit, np.array([budget]))
    if curve is None:
        return
    med, lo, hi = (float(v[0]) for v in curve)
    assert lo <= med <= hi
    s = fit.samples
    assert s is not None
    a = summary.estimates["A"]
    assert a.value is not None
    if np.all(s.A >= s.R0):  # a rising fit: every draw's curve stays below its own ceiling
        assert np.all(s.curves(np.array([budget]))[:, 0] <= s.A + 1e-12)
        if summary.ceiling_identified:  # the forecast (blended with a power law) never passes an identified ceiling
            assert med <= a.value + 1e-6
    rec = recommend_run(RunState("r", fit, compute_used=float(fit.compute_max), budget=budget))
    n = rec.numbers
    for name in ("A", "B", "C_mid"):
        if n.get(f"{name}_lo") is not None:
            assert n[f"{name}_lo"] <= n[name] <= n[f"{name}_hi"], (name, n)  # type: ignore[operator]
    if n.get("remaining_gain_hi") is not None and fit.samples is not None:
        assert n["remaining_gain"] <= n["remaining_gain_hi"]  # type: ignore[operator]


@pytest.mark.parametrize("seed", range(12))
def test_random_curves_early_and_late(seed: int) -> None:
    x, y = random_curve(seed, B=(0.6, 3.0), C_mid=(100, 3000), noise=(0.003, 0.05))
    for cut in (0.15, 0.3, 0.5, 1.0):
        n = max(4, int(cut * x.size))
        budget = float(x.max()) * 2
        _check(fit_curve(x[:n], y[:n]), budget)
        _check(fit_curve(x[:n], y[:n], prior="public"), budget)


@pytest.mark.parametrize("name,x,y", _real_curves(), ids=lambda v: v if isinstance(v, str) else "")
def test_real_curves_at_early_cutoffs(name: str, x: np.ndarray, y: np.ndarray) -> None:
    for cut in (0.3, 0.5, 1.0):
        n = max(4, int(cut * x.size))
        _check(fit_curve(x[:n], y[:n]), float(x.max()))


def test_grid_fits_keep_estimates_inside_their_intervals() -> None:
    curves = [make_curve(A=a, noise=0.02, seed=i) for i, a in enumerate((0.5, 0.6, 0.7))]
    cut = [(x[:8], y[:8]) for x, y in curves]
    for fit in fit_grid(cut, intervals=True):
        _check(fit, float(curves[0][0].max()))


def test_a_ceiling_on_the_bound_is_not_identified() -> None:
    x = np.geomspace(10, 1000, 12)
    y = 0.05 + 0.0004 * x  # a straight climb: the least-squares ceiling runs to the A = 1 bound
    fit = fit_curve(x, y + np.random.default_rng(0).normal(0, 0.01, x.size))
    summary = summarize(fit)
    assert not summary.ceiling_identified
    a = summary.estimates["A"]
    assert a.lo is not None and a.hi is not None and a.value is not None and a.lo <= a.value <= a.hi
