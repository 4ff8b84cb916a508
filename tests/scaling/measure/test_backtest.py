from pathlib import Path

import numpy as np

from rl_core.scaling.measure.backtest import run_backtest, summarize
from rl_core.scaling.measure.corpus import load_curves, near_duplicate_groups
from tests.scaling.conftest import make_curve


def _write(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    lines = ["step,pass_rate,compute"] + [f"{i},{b},{a}" for i, (a, b) in enumerate(zip(x, y, strict=True))]
    path.write_text("\n".join(lines) + "\n")


def test_backtest_groups_duplicates_and_pairs_methods(tmp_path: Path) -> None:
    x, y = make_curve(n=30, C_mid=400, noise=0.005)
    _write(tmp_path / "a.csv", x, y)
    _write(tmp_path / "a_replicate.csv", x, y + 0.004)  # a near-duplicate of a
    x2, y2 = make_curve(n=30, C_mid=30, B=3, noise=0.005, seed=5)  # saturates almost at once
    _write(tmp_path / "fast_saturating.csv", x2, y2)
    (tmp_path / "broken.csv").write_text("step,pass_rate\n1,oops\n")
    curves, skipped = load_curves(tmp_path)
    assert {c.name for c in curves} == {"a", "a_replicate", "fast_saturating"}
    assert len(skipped) == 1 and "not a number" in skipped[0]
    assert all(c.x_column == "compute" and c.y_column == "pass_rate" for c in curves)
    groups = near_duplicate_groups(curves)
    assert groups["a"] == groups["a_replicate"] != groups["fast_saturating"]

    report = run_backtest(curves, cutoffs=(0.5,), methods=("fast", "power_law", "last_value"))
    assert report.saturated == {"a": False, "a_replicate": False, "fast_saturating": True}
    rows = {(r.subset, r.method): r for r in summarize(report)}
    assert rows[("informative", "fast")].n_groups == 1 and rows[("all", "fast")].n_groups == 2
    # on model data the sigmoid must beat carrying the last value forward
    assert rows[("informative", "fast")].median_tail_mae < rows[("informative", "last_value")].median_tail_mae
    assert rows[("informative", "fast")].coverage is not None
    assert rows[("informative", "last_value")].coverage is None
