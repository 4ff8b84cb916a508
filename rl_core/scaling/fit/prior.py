"""An empirical prior over the sigmoid's shape, learned from real RL curves (in the spirit of LC-PFN's learned prior).

The posterior of :mod:`rl_core.scaling.fit.posterior` used to be flat on log C_mid and log B inside a wide box. Early
in a run that box lets a fit bend to a plateau at once (large B, C_mid just past the data) or run its ceiling to
A = 1 (C_mid far beyond the data). Real RL curves have typical shapes, so the prior here is a Gaussian over two
unit-free shape coordinates:

    u  = log(C_mid / C_seen)      C_seen = the largest compute the fit has seen
    lb = log B

learned from *oracle fits* on a corpus of complete curves: for each training curve and each cut-off f of a set of
cut-offs, the sigmoid is fitted to the points the forecaster would use at that cut-off (same burn-in threshold, same
R0 rule) *plus the curve's held-out tail*, and (u, lb) are read off relative to the compute seen at the cut-off.
That is the distribution of the shapes that would have forecast those runs well, expressed in what is known at
forecast time. Each near-duplicate group of curves counts once. The covariance is inflated by ``scale`` (chosen by
the leave-one-source-out backtest) so that a prior never overrides clear data.

The prior is a versioned data file next to this module (``shape_prior.json``), rebuilt by
``bench/build_shape_prior.py`` from ``shared/curves`` (a team builds its own with ``scalerl prior build``). The
backtest never scores the prior on curves of a source it learned from: it rebuilds it leave-one-source-out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.fit.shipped import PRIOR_FILE, read_shipped

#: Version of the file format (bumped when the meaning of a field changes).
FORMAT_VERSION = 1


@dataclass(frozen=True)
class ShapePrior:
    """Gaussian prior over (u, lb) = (log(C_mid / C_seen), log B); ``cov`` is already multiplied by ``scale``."""

    mean: tuple[float, float]
    cov: tuple[tuple[float, float], tuple[float, float]]
    version: str = "custom"
    scale: float = 1.0
    n_cases: int = 0
    sources: tuple[str, ...] = ()
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    extrapolation_sd: float = 0.0
    """Forecast error per e-fold of compute past the data, added to the predictive band
    (:meth:`~rl_core.scaling.fit.posterior.PosteriorSamples.measurements`); learned so that the band covers its level of
    the training curves' held-out points (:func:`~rl_core.scaling.fit.prior_learn.learn_extrapolation_sd`). 0 in files
    written before it existed."""

    def __post_init__(self) -> None:
        """Invariants: the mean is 2 finite numbers, ``cov`` a symmetric positive-definite 2x2 matrix (the precision
        exists), ``scale`` finite and > 0, ``extrapolation_sd`` finite and >= 0."""
        if len(self.mean) != 2 or len(self.cov) != 2 or any(len(row) != 2 for row in self.cov):
            raise ValueError("a shape prior's mean must hold 2 numbers and its cov 2 rows of 2")
        if not (np.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"a shape prior's scale must be a finite number > 0, got {self.scale}")
        if not (np.isfinite(self.extrapolation_sd) and self.extrapolation_sd >= 0):
            raise ValueError(
                f"a shape prior's extrapolation_sd must be a finite number >= 0, got {self.extrapolation_sd}"
            )
        (a, b), (c, d) = self.cov
        finite = all(np.isfinite(v) for v in (a, b, c, d, *self.mean))
        if not finite or abs(b - c) > 1e-9 * max(1.0, abs(b)) or a <= 0 or d <= 0 or a * d - b * c <= 0:
            raise ValueError(f"a shape prior's cov must be a finite symmetric positive-definite 2x2 matrix: {self.cov}")

    @property
    def precision(self) -> FloatArray:
        return np.asarray(np.linalg.inv(np.asarray(self.cov, dtype=np.float64)))

    @property
    def sqrt_precision(self) -> FloatArray:
        """Upper-triangular R with R^T R = precision: the prior as least-squares residuals R (theta - mean)."""
        return np.asarray(np.linalg.cholesky(self.precision).T)

    def log_density(self, m: FloatArray, b: FloatArray, log_seen: float) -> FloatArray:
        """Log density (up to a constant) at log C_mid = ``m``, B = ``b``, for a fit that saw compute e^log_seen."""
        d0 = np.asarray(m, dtype=np.float64) - log_seen - self.mean[0]
        d1 = np.log(np.asarray(b, dtype=np.float64)) - self.mean[1]
        p = self.precision
        return np.asarray(-0.5 * (p[0, 0] * d0 * d0 + 2.0 * p[0, 1] * d0 * d1 + p[1, 1] * d1 * d1))

    def bound(self, log_seen: float) -> Any:
        """The log density as a function of (m, B) for one fit (the posterior's ``log_prior``)."""
        return lambda m, b: self.log_density(m, b, log_seen)

    def scaled(self, scale: float) -> ShapePrior:
        """The same prior with its covariance multiplied by ``scale / self.scale``."""
        k = scale / self.scale
        cov = tuple(tuple(float(v) * k for v in row) for row in self.cov)
        return replace(self, cov=cov, scale=scale)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["format_version"] = FORMAT_VERSION
        d["coordinates"] = ["log(C_mid / compute_seen)", "log(B)"]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ShapePrior:
        if int(d.get("format_version", 0)) != FORMAT_VERSION:
            raise ValueError(f"shape prior format {d.get('format_version')!r}, this code reads {FORMAT_VERSION}")
        if not isinstance(d.get("sources", []), (list, tuple)):
            raise ValueError("a shape prior's sources must be a list of names")
        mean = tuple(float(v) for v in d["mean"])
        cov = tuple(tuple(float(v) for v in row) for row in d["cov"])
        return cls(
            mean=mean,  # type: ignore[arg-type]
            cov=cov,  # type: ignore[arg-type]
            version=str(d["version"]),
            scale=float(d.get("scale", 1.0)),
            n_cases=int(d.get("n_cases", 0)),
            sources=tuple(d.get("sources", ())),
            description=str(d.get("description", "")),
            extra=dict(d.get("extra", {})),
            extrapolation_sd=float(d.get("extrapolation_sd", 0.0)),
        )


@lru_cache(maxsize=4)
def load_prior(path: str | None = None) -> ShapePrior:
    """The shipped prior (``shape_prior.json``; :class:`~rl_core.scaling.fit.shipped.ShippedDataError` if it is
    missing) or the one at ``path``."""
    if path is None:
        return ShapePrior.from_json(read_shipped(PRIOR_FILE))
    with open(path, encoding="utf-8") as fh:
        return ShapePrior.from_json(json.load(fh))


def gaussian_from_cases(
    u: Sequence[float], lb: Sequence[float], weights: Sequence[float], *, scale: float = 1.0
) -> tuple[tuple[float, float], tuple[tuple[float, float], tuple[float, float]]]:
    """Weighted mean and covariance (times ``scale``) of the oracle shapes; a small floor keeps it proper."""
    z = np.stack([np.asarray(u, dtype=np.float64), np.asarray(lb, dtype=np.float64)], axis=1)
    w = np.asarray(weights, dtype=np.float64)
    w = w / w.sum()
    mean = w @ z
    d = z - mean
    cov = (d * w[:, None]).T @ d + np.diag([0.05, 0.02])
    cov *= scale
    return (float(mean[0]), float(mean[1])), (
        (float(cov[0, 0]), float(cov[0, 1])),
        (float(cov[1, 0]), float(cov[1, 1])),
    )
