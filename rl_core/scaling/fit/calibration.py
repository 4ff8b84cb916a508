"""The forecast a person reads: the sigmoid blended with a power law early on, and a band calibrated on real curves.

A fit's raw posterior is exact for the sigmoid, but real RL curves drift from any sigmoid: early in a run the
sigmoid loses to a plain power law, and its 80% band covers about 60-75% of what happens. This module turns a fit's
draws into the *forecast draws* that every surface summarises (:func:`forecast_draws`):

- **centre**: ``w * median + (1 - w) * power_law``, where the median is the sigmoid's posterior median and ``w`` the
  sigmoid's weight, learned leave-one-collection-out from real curves as a function of whether the ceiling is
  identified (a sigmoid that has not bent yet says little about where the curve goes; the power law says more);
- **spread**: each side of the band is ``scale(reach) * (half_width + disagreement * |median - power_law|)``, where
  ``half_width`` is the raw posterior's half-width on that side at the calibration's level, ``reach`` the e-folds of
  compute past the data, and ``scale`` the split-conformal quantile of the held-out scores in that reach bin.

The draws are an order-preserving map of the posterior's own draws (per side of the median), so every summary of
them (median, equal-tailed interval at any level) comes from one set of numbers, and ``lo <= value <= hi``.
A, B and C_mid stay the sigmoid's: only value forecasts are blended. The data file ``forecast_calibration.json``
next to this module is rebuilt by ``bench/build_forecast_calibration.py``; :data:`RAW` turns everything off.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from rl_core.contracts.records import as_json
from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.fit.shipped import CALIBRATION_FILE, read_shipped
from rl_core.scaling.fit.summary import summarize

if TYPE_CHECKING:  # the fit's type only: forecast.py reads this module
    from rl_core.scaling.fit.forecast import CurveFit

FORMAT_VERSION = 1
Kind = Literal["measurement", "curve"]
#: Which draws a grid comparison reads (``Policy.forecast_comparison``); see :func:`comparison_calibration`.
Comparison = Literal["calibrated", "blended", "raw"]
#: A half-width below this is treated as zero (a degenerate posterior: nothing to scale).
_TINY = 1e-9


@dataclass(frozen=True)
class ForecastCalibration:
    """How a fit's draws become forecast draws (see the module docstring). Invariant: ``len(scale) ==
    len(reach_edges) - 1``, edges increasing from 0, every scale > 0, weights in [0, 1]."""

    version: str
    weight_identified: float
    """The sigmoid's weight in the centre when its ceiling is identified."""
    weight_unidentified: float
    """... and when it is not (no bend seen yet: mostly the power law)."""
    disagreement: float
    """Share of |sigmoid - power law| added to each side's half-width before scaling."""
    reach_edges: tuple[float, ...]
    """Bins of e-folds of compute past the last compute the fit saw."""
    scale: tuple[float, ...]
    """Split-conformal multiplier per reach bin."""
    level: float = 0.8
    """The level the half-widths are taken at (the scales were learned for it)."""
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.scale) != len(self.reach_edges) - 1:
            raise ValueError("a calibration needs one scale per reach bin")
        if any(s <= 0 for s in self.scale) or not all(0.0 <= w <= 1.0 for w in self.weights):
            raise ValueError("calibration scales must be positive and weights in [0, 1]")

    @property
    def weights(self) -> tuple[float, float]:
        return self.weight_identified, self.weight_unidentified

    def scale_at(self, reach: FloatArray) -> FloatArray:
        """The multiplier at each reach (e-folds past the data; the last bin extends to infinity)."""
        idx = np.clip(np.searchsorted(np.asarray(self.reach_edges), reach, side="right") - 1, 0, len(self.scale) - 1)
        return np.asarray(np.asarray(self.scale)[idx], dtype=np.float64)

    def to_json(self) -> dict[str, object]:
        return {"format": FORMAT_VERSION, **as_json(self)}

    @staticmethod
    def from_json(d: dict[str, object]) -> ForecastCalibration:
        if d.get("format") != FORMAT_VERSION:
            raise ValueError(f"forecast calibration format {d.get('format')!r} is not {FORMAT_VERSION}")
        edges = d["reach_edges"]
        scale = d["scale"]
        sources = d.get("sources", [])
        assert isinstance(edges, list) and isinstance(scale, list) and isinstance(sources, list)
        return ForecastCalibration(
            version=str(d["version"]),
            weight_identified=float(d["weight_identified"]),  # type: ignore[arg-type]
            weight_unidentified=float(d["weight_unidentified"]),  # type: ignore[arg-type]
            disagreement=float(d["disagreement"]),  # type: ignore[arg-type]
            reach_edges=tuple(float(v) for v in edges),
            scale=tuple(float(v) for v in scale),
            level=float(d.get("level", 0.8)),  # type: ignore[arg-type]
            sources=tuple(str(s) for s in sources),
        )


#: The raw posterior: the sigmoid alone, its band unscaled (what the forecaster showed before the calibration).
RAW = ForecastCalibration("raw", 1.0, 1.0, 0.0, (0.0, 1e6), (1.0,))


@lru_cache(maxsize=4)
def load_calibration(path: str | None = None) -> ForecastCalibration:
    """The shipped calibration (``forecast_calibration.json``; :class:`~rl_core.scaling.fit.shipped.ShippedDataError`
    if it is missing) or the one at ``path``."""
    if path is None:
        return ForecastCalibration.from_json(read_shipped(CALIBRATION_FILE))
    return ForecastCalibration.from_json(json.loads(Path(path).read_text()))


def _identified(fit: CurveFit) -> bool:
    return summarize(fit, None).ceiling_identified  # the blend was learned on the bound rule alone


def sigmoid_weight(fit: CurveFit, calibration: ForecastCalibration) -> float:
    """The sigmoid's weight in the value forecast: 1 without a power law, else by whether the ceiling is identified."""
    if fit.power_law is None or fit.params is None or calibration.version == "raw":
        return 1.0
    return calibration.weight_identified if _identified(fit) else calibration.weight_unidentified


def forecast_draws(
    fit: CurveFit, compute: FloatArray, kind: Kind = "measurement", calibration: ForecastCalibration | None = None
) -> FloatArray | None:
    """(N, M) forecast draws at each compute (module docstring), or ``None`` without posterior draws.

    ``kind="measurement"``: a future measured value (curve, extrapolation error and noise: the band held-out points
    are scored against); ``"curve"``: the noise-free curve (what runs of a grid are compared on). A fit whose
    ``band_scale`` is not 1 (an experiment's adaptive band) has the calibrated half-widths multiplied by it."""
    if fit.samples is None or fit.params is None:
        return None
    cal = load_calibration() if calibration is None else calibration
    c = np.atleast_1d(np.asarray(compute, dtype=np.float64))
    raw = fit.samples.measurements(c) if kind == "measurement" else fit.samples.curves(c)
    if cal is RAW or cal.version == "raw":
        return np.asarray(raw)
    tail = (1.0 - cal.level) / 2.0
    lo, med, hi = np.quantile(raw, [tail, 0.5, 1.0 - tail], axis=0)
    w = sigmoid_weight(fit, cal)
    pl = med if fit.power_law is None else np.clip(fit.power_law(c), 0.0, 1.0)
    if fit.power_law is not None and _identified(fit):
        # An identified ceiling bounds the forecast: the power law's part never lifts it above A's median.
        pl = np.minimum(pl, float(np.median(fit.samples.A)))
    centre = w * med + (1.0 - w) * pl
    spread = cal.disagreement * np.abs(med - pl)
    reach = np.log(np.maximum(c, fit.compute_max) / fit.compute_max) if fit.compute_max > 0 else np.zeros_like(c)
    k = cal.scale_at(reach)
    if fit.band_scale != 1.0:  # an experiment's adaptive band (CurveFit.band_scale): both half-widths, centre kept
        k = k * fit.band_scale
    up, down = hi - med, med - lo
    dev = raw - med
    # Per side: the posterior's deviation in units of its own half-width, times the calibrated half-width.
    up_scale = np.where(up > _TINY, k * (up + spread) / np.maximum(up, _TINY), 1.0)
    down_scale = np.where(down > _TINY, k * (down + spread) / np.maximum(down, _TINY), 1.0)
    out = centre + np.where(dev >= 0.0, dev * up_scale, dev * down_scale)
    return np.asarray(np.clip(out, 0.0, 1.0))


def forecast_summary(
    fit: CurveFit,
    compute: FloatArray,
    kind: Kind = "measurement",
    level: float | None = None,
    calibration: ForecastCalibration | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """(value, lo, hi) at each compute: the median and equal-tailed interval of :func:`forecast_draws`."""
    draws = forecast_draws(fit, compute, kind, calibration)
    if draws is None:
        return None
    q = fit.level if level is None else level
    lo, med, hi = np.quantile(draws, [(1.0 - q) / 2.0, 0.5, (1.0 + q) / 2.0], axis=0)
    return np.asarray(med), np.asarray(lo), np.asarray(hi)


def curve_summary(
    fit: CurveFit, compute: FloatArray, calibration: ForecastCalibration | None = None
) -> tuple[FloatArray, FloatArray, FloatArray] | None:
    """(value, lo, hi) of the forecast curve at each compute (the fit's level), or ``None`` without draws: the median
    and equal-tailed interval of the calibrated forecast draws of the curve (the draws the grid decisions compare).
    Where the ceiling is identified the value never exceeds the ceiling's median."""
    return forecast_summary(fit, np.asarray(compute, dtype=np.float64), kind="curve", calibration=calibration)


def describe(fit: CurveFit, calibration: ForecastCalibration | None = None) -> str:
    """Which forecast a surface shows for ``fit``, in words (the pages print it next to the value at the budget)."""
    cal = load_calibration() if calibration is None else calibration
    if fit.samples is None or fit.params is None:
        return "the sigmoid's point fit (no posterior draws)"
    if cal.version == "raw":
        return "the sigmoid's raw posterior (uncalibrated)"
    w = sigmoid_weight(fit, cal)
    why = "ceiling identified" if _identified(fit) else "ceiling not identified yet: mostly the power law"
    blend = "the sigmoid alone" if w >= 1.0 else f"sigmoid {w:.0%} + power law {1.0 - w:.0%} ({why})"
    scaled = "" if fit.band_scale == 1.0 else f", ×{fit.band_scale:.2f} by this experiment's earlier forecasts"
    return f"{blend}; band calibrated on real curves ({cal.version}){scaled}"


def comparison_calibration(comparison: Comparison) -> ForecastCalibration:
    """The calibration a grid comparison reads its draws through: the shipped one (``"calibrated"``), its centre
    with the posterior's own spread (``"blended"``: scales 1, no disagreement term) or :data:`RAW`."""
    if comparison == "raw":
        return RAW
    cal = load_calibration()
    if comparison == "calibrated":
        return cal
    return ForecastCalibration(
        f"{cal.version} (centre only)",
        cal.weight_identified,
        cal.weight_unidentified,
        0.0,
        (0.0, cal.reach_edges[-1]),
        (1.0,),
        cal.level,
        cal.sources,
    )


def display_calibration(comparison: Comparison) -> ForecastCalibration:
    """The calibration the pages show a run's forecast with under a policy: the shipped one unless ``"raw"``."""
    return RAW if comparison == "raw" else load_calibration()
