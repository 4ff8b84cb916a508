"""The learned shape prior, grid-aware fits, ceiling_extrapolated, the grid CLI and backtest grid mode."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner

from rl_core.scaling import fit_curve, fit_grid
from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.fit.prior import FORMAT_VERSION, PRIOR_FILE, ShapePrior, load_prior
from rl_core.scaling.fit.summary import summarize as fit_summary
from rl_core.scaling.measure.backtest import grid_families, run_backtest, summarize
from rl_core.scaling.measure.corpus import load_curves, source_of
from scalerl.cli.main import cli as cli_main
from tests.scaling.conftest import make_curve


def _grid(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Six runs of one grid: same R0 and shape, different ceilings, evaluated every 25 units up to 1000."""
    rng = np.random.default_rng(seed)
    x = np.arange(0.0, 1001.0, 25.0)
    runs = []
    for a in (0.55, 0.6, 0.62, 0.65, 0.58, 0.63):
        y = sigmoid(x, 0.1, a, 1.8, 300.0) + rng.normal(0, 0.01, x.size)
        runs.append((x, np.clip(y, 0, 1)))
    return runs


def test_prior_file_loads_and_is_versioned() -> None:
    data = json.loads(PRIOR_FILE.read_text())
    assert data["format_version"] == FORMAT_VERSION
    prior = load_prior()
    assert prior.version == data["version"] and prior.version
    assert prior.n_cases > 0 and "josancamon" in prior.sources
    assert np.all(np.linalg.eigvalsh(np.asarray(prior.cov)) > 0)
    # the prior prefers a shape near its mean to one far from it
    m0 = np.log(1000.0) + prior.mean[0]
    near = prior.log_density(np.array([m0]), np.array([np.exp(prior.mean[1])]), np.log(1000.0))
    far = prior.log_density(np.array([m0 + 5.0]), np.array([np.exp(prior.mean[1])]), np.log(1000.0))
    assert near[0] > far[0]
    assert ShapePrior.from_json(prior.to_json()) == prior


def test_grid_of_one_is_fit_curve() -> None:
    x, y = make_curve(n=30, noise=0.01)
    (alone,) = fit_grid([(x, y)])
    single = fit_curve(x, y)
    assert alone.params == single.params and alone.intervals == single.intervals


def test_grid_fit_helps_a_short_noisy_run_with_good_siblings() -> None:
    """A run cut at 150 of 1000 with 3x the noise: alone it cannot see its shape; its siblings can."""
    errors_alone, errors_grid, shape_alone, shape_grid = [], [], [], []
    for seed in range(6):
        runs = _grid(seed)
        rng = np.random.default_rng(100 + seed)
        x, _ = runs[0]
        truth = sigmoid(x, 0.1, 0.55, 1.8, 300.0)
        short = x <= 250
        y_short = np.clip(truth[short] + rng.normal(0, 0.03, short.sum()), 0, 1)
        grid = fit_grid([(x[short], y_short), *runs[1:]])
        alone = fit_curve(x[short], y_short)
        tail = x > 250
        for fit, errs in ((alone, errors_alone), (grid[0], errors_grid)):
            pred = fit.params(x[tail]) if fit.params is not None else np.full(tail.sum(), y_short[-1])
            errs.append(float(np.mean(np.abs(pred - truth[tail]))))
        assert grid[0].status == "ok" and any("grid fit" in n for n in grid[0].notes)
        for fit, shape in ((alone, shape_alone), (grid[0], shape_grid)):
            shape.append(abs(np.log(fit.params.C_mid / 300.0)) + abs(np.log(fit.params.B / 1.8)))
    # the shape is borrowed from the siblings; the ceiling stays the run's own (so the tail error falls less)
    assert np.median(shape_grid) < 0.5 * np.median(shape_alone), (shape_grid, shape_alone)
    assert np.median(errors_grid) < np.median(errors_alone), (errors_grid, errors_alone)


def test_grid_shares_r0_and_keeps_ceilings_apart() -> None:
    runs = _grid(1)
    fits = fit_grid(runs)
    assert len({f.params.R0 for f in fits}) == 1
    assert abs(fits[0].params.R0 - np.mean([y[0] for _, y in runs])) < 1e-12
    ceilings = [f.params.A for f in fits]
    truth = [0.55, 0.6, 0.62, 0.65, 0.58, 0.63]
    assert np.corrcoef(ceilings, truth)[0, 1] > 0.9  # ceilings are what the ablation measures: not pooled


def test_ceiling_extrapolated_semantics() -> None:
    x, y = make_curve(n=40, C_mid=300, x_max=1000, noise=0.005)
    late = fit_curve(x, y)
    assert late.compute_max >= late.params.C_mid and late.ceiling_extrapolated is False
    early = fit_curve(x[x <= 150], y[x <= 150], prior=None)
    assert early.params is not None and early.ceiling_extrapolated == (early.compute_max < early.params.C_mid)
    assert early.to_dict()["ceiling_extrapolated"] == early.ceiling_extrapolated
    nothing = fit_curve([1, 2], [0.1, 0.2])
    assert nothing.params is None and nothing.ceiling_extrapolated is False


def test_late_start_r0_is_said_in_the_notes() -> None:
    x, y = make_curve(n=30, noise=0.005)
    fit = fit_curve(x[3:], y[3:])
    assert any("R0 pinned to the first evaluation" in n for n in fit.notes)
    assert not any("R0 pinned" in n for n in fit_curve(x, y).notes)
    assert fit_curve(x[3:], y[3:], r0="auto").r0_fitted


def _write(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "step,compute,pass_rate\n" + "".join(f"{i},{a},{b}\n" for i, (a, b) in enumerate(zip(x, y, strict=True)))
    )


def test_fit_cli_several_files_is_a_list_in_order(tmp_path: Path) -> None:
    runs = _grid(2)[:3]
    paths = []
    for i, (x, y) in enumerate(runs):
        paths.append(tmp_path / f"run{i}.csv")
        _write(paths[-1], x, y)
    runner = CliRunner()
    res = runner.invoke(cli_main, ["fit", *map(str, paths), "--predict-at", "2000", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert isinstance(out, list) and len(out) == 3
    expected = fit_grid([(x, y) for x, y in runs])
    for obj, fit, path in zip(out, expected, paths, strict=True):
        assert obj["file"] == str(path)
        assert obj["A"] == fit_summary(fit).value("A") and obj["point"]["A"] == fit.params.A  # one posterior summary
        (pred,) = obj["predictions"]
        assert set(pred) == {"compute", "mean", "lo", "hi"} and pred["compute"] == 2000
    one = json.loads(runner.invoke(cli_main, ["fit", str(paths[0]), "--json"]).output)
    assert isinstance(one, dict) and one["A"] == fit_summary(fit_curve(*runs[0])).value("A")


def test_backtest_grid_mode_on_a_tiny_fixture(tmp_path: Path) -> None:
    for i, (x, y) in enumerate(_grid(3)[:3]):
        _write(tmp_path / "gridA" / f"run{i}.csv", x, y)
    x, y = make_curve(n=40, C_mid=200, noise=0.01, seed=9)
    _write(tmp_path / "lonely.csv", x, y)
    curves, _ = load_curves(tmp_path)
    assert {c.name for c in curves} == {"gridA/run0", "gridA/run1", "gridA/run2", "lonely"}
    assert source_of("gridA/run0") == "engine-gridA" and source_of("lonely") == "lonely"
    families = grid_families(curves, tmp_path)
    assert families["gridA/run0"] == families["gridA/run1"] == families["gridA/run2"] != families["lonely"]
    (tmp_path / "grids.json").write_text(json.dumps({"g": ["gridA/run0", "lonely"]}))
    manifest = grid_families(curves, tmp_path)
    assert manifest["gridA/run0"] == manifest["lonely"] == "g" and manifest["gridA/run1"] == "gridA/run1"
    (tmp_path / "grids.json").unlink()
    report = run_backtest(
        curves, (0.5,), ("fast", "last_value", "grid"), FitOptions(n_samples=300, prior="public"), tmp_path
    )
    rows = {(r.subset, r.method): r for r in summarize(report)}
    assert rows[("all", "grid")].median_tail_mae is not None and rows[("all", "grid")].coverage is not None
    # two sources: each is scored with the prior (and extrapolation error) learned from the other
    assert [n.split(":")[0] for n in report.prior_notes] == ["engine-gridA", "lonely"]
    assert report.prior_notes[0].endswith("from lonely") and report.prior_notes[1].endswith("from engine-gridA")
    res = CliRunner().invoke(cli_main, ["backtest", str(tmp_path), "--methods", "fast,last_value", "--grids"])
    assert res.exit_code == 0, res.output
    assert "grid mode: 1 grid families" in res.output and " grid " in res.output


def test_runs_from_different_base_checkpoints_are_not_one_grid() -> None:
    """A model-size sweep: untrained pass rates far apart. Sharing R0 or shapes would bend every run toward the
    others, so each run is fitted on its own, and the fit says why."""

    x = np.linspace(0.0, 1000.0, 30)
    small = sigmoid(x, 0.05, 0.6, 2.0, 400.0)
    large = sigmoid(x, 0.6, 0.9, 1.5, 150.0)
    fits = fit_grid([(x, small), (x, large)])
    alone = [fit_curve(x, small), fit_curve(x, large)]
    for grid_fit, own in zip(fits, alone, strict=True):
        assert grid_fit.params == own.params
        assert any("fitted per run" in n for n in grid_fit.notes)
