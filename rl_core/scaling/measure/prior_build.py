"""Building a shape prior from a corpus of finished curves: the shipped prior, a team's own, or one that leaves
some sources out (the backtest's and the replay's leave-one-source-out priors).

The shipped prior (``shape_prior.json``) is learned from public RL curves. Curves from one training stack and
task can have a typical shape of their own (this project's CPU engine runs jump at once and creep, B ~ 0.7, where
the public curves bend later and steeper, B ~ 2), and a prior learned from a team's finished grids forecasts its
next grid better (docs/forecasting.md, "A prior from your own runs"). :class:`PriorCorpus` is the one way every
prior is learned: oracle shapes of every curve (computed once per corpus), the group-weighted Gaussian
(:func:`~rl_core.scaling.fit.prior_learn.learn_prior`) and the extrapolation error that calibrates its band
(:func:`~rl_core.scaling.fit.prior_learn.learn_extrapolation_sd`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from rl_core.scaling.fit.prior import ShapePrior
from rl_core.scaling.fit.prior_learn import (
    DEFAULT_SCALE,
    OracleShape,
    learn_extrapolation_sd,
    learn_prior,
    oracle_shapes,
)
from rl_core.scaling.measure.corpus import Curve, near_duplicate_groups, source_of


class PriorCorpus:
    """Finished curves to learn shape priors from. Near-duplicate groups are found over the whole corpus and each
    curve's oracle shapes are fitted once, so priors that leave different sources out share that work."""

    def __init__(self, curves: Sequence[Curve]) -> None:
        self.curves = list(curves)
        self.groups = near_duplicate_groups(self.curves)
        self.sources = {source_of(c.name) for c in self.curves}
        self._shapes: dict[str, list[OracleShape]] = {}

    def shapes(self, curve: Curve) -> list[OracleShape]:
        if curve.name not in self._shapes:
            self._shapes[curve.name] = oracle_shapes(curve.name, curve.x, curve.y)
        return self._shapes[curve.name]

    def _train(self, exclude: Collection[str]) -> list[Curve]:
        return [c for c in self.curves if source_of(c.name) not in exclude]

    def has_shapes(self, exclude: Collection[str] = ()) -> bool:
        """Whether the curves outside ``exclude`` give at least one oracle fit (a prior can be learned)."""
        return any(self.shapes(c) for c in self._train(exclude))

    def prior(
        self,
        *,
        version: str,
        exclude: Collection[str] = (),
        scale: float = DEFAULT_SCALE,
        extrapolation: bool = True,
        extra: dict[str, Any] | None = None,
    ) -> ShapePrior:
        """The prior learned from every curve whose source is not in ``exclude``, with its extrapolation error
        unless ``extrapolation`` is false (0 then: the decisions compare curve draws, which do not use it). Raises
        ``ValueError`` when no such curve gives an oracle fit (too short, flat or falling everywhere)."""
        if scale <= 0:
            raise ValueError(f"scale must be > 0, got {scale}")
        train = self._train(exclude)
        shapes = [s for c in train for s in self.shapes(c)]
        if not shapes:
            raise ValueError(
                f"none of the {len(train)} curves gave a usable fit at any cut-off: a prior needs finished, rising "
                "runs with at least 4 evaluations after the burn-in"
            )
        prior = learn_prior(shapes, self.groups, [source_of(c.name) for c in train], scale=scale, version=version)
        if extrapolation:
            sd = learn_extrapolation_sd([(c.name, c.x, c.y) for c in train], prior, self.groups)
            prior = replace(prior, extrapolation_sd=sd)
        fitted = {s.curve for s in shapes}
        return replace(prior, extra={"curves": len(train), "curves_fitted": len(fitted), **(extra or {})})


def build_prior(
    curves: Sequence[Curve], *, version: str, scale: float = DEFAULT_SCALE, extra: dict[str, Any] | None = None
) -> ShapePrior:
    """The shape prior and its extrapolation error learned from all of ``curves`` (complete runs); see
    :meth:`PriorCorpus.prior`."""
    return PriorCorpus(curves).prior(version=version, scale=scale, extra=extra)


def write_prior(prior: ShapePrior, path: str | Path) -> Path:
    """Write ``prior`` as a prior file (readable by :func:`~rl_core.scaling.fit.prior.load_prior`)."""
    out = Path(path)
    out.write_text(json.dumps(prior.to_json(), indent=2) + "\n", encoding="utf-8")
    return out
