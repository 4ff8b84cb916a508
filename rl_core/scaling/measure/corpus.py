"""A corpus of recorded RL curves: reading a directory of CSV runs, which public source each curve comes from, and
which curves are near-duplicates of one setting. Shared by the backtest (:mod:`.backtest`) and the
prior builder (:mod:`.prior_build`), so both read a collection the same way.

Invariants: a :class:`Curve` is sorted by x with finite values only and has at least 6 points; a curve's source is a
pure function of its name (:func:`source_of`), so a leave-one-source-out split is the same wherever it is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rl_core.scaling.fit.model import FloatArray
from rl_core.scaling.measure.curves_io import CurveFileError, read_curve_table

#: Curves sampled at the same steps whose pass rates differ by less than this on average are one setting.
DUPLICATE_TOLERANCE = 0.02

#: Which public source a curve of shared/curves comes from (shared/curves/SOURCES.md), by a substring of its name;
#: first match wins. Curves under a sub-directory (``<grid>/<run>.csv``, the engine grids) belong to the source
#: ``engine-<grid>`` unless a rule matches: each recorded grid is its own source (its own recipes, runs and schedule;
#: one engine and task), so a prior learned from some grids is scored on another, as a prior built from a team's
#: finished grids forecasts its next one. A learned component is never scored on curves of a source it learned from.
SOURCE_RULES: tuple[tuple[str, str], ...] = (
    ("josancamon", "josancamon"),
    ("verl_asyncreward_", "verl-async-reward"),
    ("1120steps", "yushengsu"),
    ("gpg", "diqiuzhuanzhuan"),
    ("verl_qwen2p5_0p5b", "verl-data"),
    ("verl_gemma2", "verl-data"),
    ("verl_deepseek7b_chat_gsm8k_ppo_megatron", "verl-data"),
)


def source_of(name: str) -> str:
    """The source of a curve by :data:`SOURCE_RULES`; ``engine-<grid>`` for ``grid/run`` names; else the name."""
    for needle, source in SOURCE_RULES:
        if needle in name:
            return source
    return f"engine-{name.rpartition('/')[0]}" if "/" in name else name


@dataclass(frozen=True)
class Curve:
    name: str
    x_column: str
    y_column: str
    steps: FloatArray
    x: FloatArray
    y: FloatArray

    @property
    def frac90(self) -> float:
        """Fraction of the x range after which the curve first reaches 90% of its total gain."""
        y0, y_end = self.y[0], float(np.mean(self.y[-3:]))
        gain = y_end - y0
        if abs(gain) < 1e-12:
            return 0.0
        reached = np.flatnonzero((self.y - y0) / gain >= 0.9)
        i = int(reached[0]) if reached.size else self.y.size - 1
        span = self.x[-1] - self.x[0]
        return float((self.x[i] - self.x[0]) / span) if span > 0 else 0.0


#: A curve with fewer points is not learned from or scored.
MIN_CURVE_POINTS = 6


def clean_curve(
    name: str, x_column: str, y_column: str, steps: FloatArray, x: FloatArray, y: FloatArray
) -> Curve | None:
    """The curve of the rows where step, x and y are finite, sorted by x (stable); None with fewer than
    MIN_CURVE_POINTS such rows."""
    ok = np.isfinite(x) & np.isfinite(y) & np.isfinite(steps)
    if int(ok.sum()) < MIN_CURVE_POINTS:
        return None
    order = np.argsort(x[ok], kind="stable")
    return Curve(name, x_column, y_column, steps[ok][order], x[ok][order], y[ok][order])


def load_curves(
    directory: str | Path, x_column: str | None = None, y_column: str | None = None
) -> tuple[list[Curve], list[str]]:
    """Every readable CSV in ``directory`` as a curve (sorted by x, non-finite rows dropped); unreadable ones are
    returned as messages."""
    curves: list[Curve] = []
    skipped: list[str] = []
    root = Path(directory)
    for path in sorted(root.rglob("*.csv")):
        name = path.relative_to(root).with_suffix("").as_posix()
        try:
            table = read_curve_table(path)
            curve = table.curve(x_column, y_column)
            x, y = curve.x, curve.y
            steps = table.values[table.columns[0]]
        except CurveFileError as exc:
            skipped.append(str(exc))
            continue
        cleaned = clean_curve(name, curve.x_column, curve.y_column, steps, x, y)
        if cleaned is None:
            skipped.append(f"{path.name}: fewer than {MIN_CURVE_POINTS} points")
            continue
        curves.append(cleaned)
    return curves, skipped


def near_duplicate_groups(curves: Sequence[Curve], tolerance: float = DUPLICATE_TOLERANCE) -> dict[str, str]:
    """Union of curves with the same metric column sampled at the same steps and mean |Δy| < ``tolerance``.
    Each group is named after its first member (alphabetically)."""
    parent = {c.name: c.name for c in curves}

    def root(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for i, a in enumerate(curves):
        for b in curves[i + 1 :]:
            if a.y_column != b.y_column or a.steps.shape != b.steps.shape or not np.array_equal(a.steps, b.steps):
                continue
            if float(np.mean(np.abs(a.y - b.y))) < tolerance:
                ra, rb = root(a.name), root(b.name)
                parent[max(ra, rb)] = min(ra, rb)
    return {c.name: root(c.name) for c in curves}
