"""Building a shape prior from a corpus of finished curves: the shipped prior, or a team's own.

The shipped prior (``shape_prior.json``) is learned from public RL curves. Curves from one training stack and
task can have a typical shape of their own (this project's CPU engine runs jump at once and creep, B ~ 0.7, where
the public curves bend later and steeper, B ~ 2), and a prior learned from a team's finished grids forecasts its
next grid better (docs/forecasting.md, "A prior from your own runs"). :func:`build_prior` is the one way both are
built: oracle shapes of every curve, the group-weighted Gaussian (:func:`~rl_core.scaling.prior_learn.learn_prior`)
and the extrapolation error that calibrates its band (:func:`~rl_core.scaling.prior_learn.learn_extrapolation_sd`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rl_core.scaling.backtest import Curve, near_duplicate_groups, source_of
from rl_core.scaling.prior import ShapePrior
from rl_core.scaling.prior_learn import DEFAULT_SCALE, learn_extrapolation_sd, learn_prior, oracle_shapes


def build_prior(
    curves: Sequence[Curve], *, version: str, scale: float = DEFAULT_SCALE, extra: dict[str, Any] | None = None
) -> ShapePrior:
    """The shape prior and its extrapolation error learned from ``curves`` (complete runs). Raises ``ValueError``
    when no curve gives an oracle fit (too short, flat or falling everywhere)."""
    if scale <= 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    groups = near_duplicate_groups(curves)
    shapes = [s for c in curves for s in oracle_shapes(c.name, c.x, c.y)]
    if not shapes:
        raise ValueError(
            f"none of the {len(curves)} curves gave a usable fit at any cut-off: a prior needs finished, rising runs "
            "with at least 4 evaluations after the burn-in"
        )
    prior = learn_prior(shapes, groups, [source_of(c.name) for c in curves], scale=scale, version=version)
    sd = learn_extrapolation_sd([(c.name, c.x, c.y) for c in curves], prior, groups)
    fitted = sorted({s.curve for s in shapes})
    return replace(
        prior, extrapolation_sd=sd, extra={"curves": len(curves), "curves_fitted": len(fitted), **(extra or {})}
    )


def write_prior(prior: ShapePrior, path: str | Path) -> Path:
    """Write ``prior`` as a prior file (readable by :func:`~rl_core.scaling.prior.load_prior`)."""
    out = Path(path)
    out.write_text(json.dumps(prior.to_json(), indent=2) + "\n", encoding="utf-8")
    return out
