"""A shape prior learned from your own finished runs (`scalerl prior build`, `--prior FILE`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rl_core.scaling import fit_curve
from rl_core.scaling.fit.forecast import FitOptions
from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.fit.prior import ShapePrior, load_prior
from rl_core.scaling.measure.corpus import Curve, load_curves
from rl_core.scaling.measure.prior_build import build_prior, write_prior
from scalerl.cli.main import cli as cli_main

X = np.linspace(0.0, 1000.0, 41)


def _creeping(seed: int) -> np.ndarray:
    """A run of a stack whose curves jump at once and creep (B ~ 0.6, C_mid ~ 5% of the run): not the shipped
    prior's typical shape (B ~ 2, C_mid ~ 17% of the compute seen)."""
    rng = np.random.default_rng(seed)
    a = 0.75 + 0.05 * rng.standard_normal()
    return np.clip(
        sigmoid(X, 0.15, a, 0.6, 50.0 * np.exp(0.2 * rng.standard_normal())) + rng.normal(0, 0.01, X.size), 0, 1
    )


def _write(path: Path, y: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "step,compute,pass_rate\n" + "".join(f"{i},{a},{b}\n" for i, (a, b) in enumerate(zip(X, y, strict=True)))
    )


def test_a_prior_from_your_own_runs_forecasts_your_next_run_better() -> None:
    """Learned from 8 finished runs of one stack, the prior forecasts held-out runs of that stack from 30% of
    their compute better than the shipped prior learned from other people's curves."""
    train = [Curve(f"team/run{i}", "compute", "pass_rate", X, X, _creeping(i)) for i in range(8)]
    own = build_prior(train, version="team-1")
    assert own.extrapolation_sd >= 0.0 and own.extra["curves"] == 8 and own.sources == ("engine-team",)
    assert np.exp(own.mean[1]) < np.exp(load_prior().mean[1])  # it learned the shallower shape
    errors: dict[str, list[float]] = {"own": [], "shipped": []}
    cut = X <= 300
    for seed in range(100, 108):
        y = _creeping(seed)
        for label, prior in (("own", own), ("shipped", load_prior())):
            fit = fit_curve(X[cut], y[cut], FitOptions(prior=prior, intervals=False))
            assert fit.params is not None
            errors[label].append(float(np.mean(np.abs(fit.params(X[~cut]) - y[~cut]))))
    assert np.median(errors["own"]) < 0.8 * np.median(errors["shipped"]), errors


def test_build_prior_refuses_curves_that_teach_nothing() -> None:
    flat = [Curve(f"flat{i}", "compute", "pass_rate", X, X, np.full(X.size, 0.3)) for i in range(3)]
    with pytest.raises(ValueError, match="none of the 3 curves"):
        build_prior(flat, version="x")
    with pytest.raises(ValueError, match="scale"):
        build_prior(flat, version="x", scale=0.0)


def test_prior_cli_build_show_fit_and_backtest(tmp_path: Path) -> None:
    for i in range(6):
        _write(tmp_path / "runs" / "grid" / f"run{i}.csv", _creeping(i))
    runner = CliRunner()
    out = tmp_path / "team.json"
    res = runner.invoke(cli_main, ["prior", "build", str(tmp_path / "runs"), "--out", str(out), "--version", "t-1"])
    assert res.exit_code == 0, res.output
    assert "wrote" in res.output and "version            t-1" in res.output
    prior = ShapePrior.from_json(json.loads(out.read_text()))
    assert prior.version == "t-1" and prior.n_cases > 0
    shown = runner.invoke(cli_main, ["prior", "show", str(out)])
    assert shown.exit_code == 0 and "t-1" in shown.output
    csv = tmp_path / "runs" / "grid" / "run0.csv"
    fits = {
        p: json.loads(runner.invoke(cli_main, ["fit", str(csv), "--fit-until", "300", "--prior", p, "--json"]).output)
        for p in ("public", "none", str(out))
    }
    assert fits[str(out)]["B"] != pytest.approx(fits["public"]["B"])
    # every fit says which prior it used
    assert fits["public"]["prior"] == load_prior().version
    assert fits["none"]["prior"] is None and fits[str(out)]["prior"] == "t-1"
    two = [str(csv), str(tmp_path / "runs" / "grid" / "run1.csv")]
    grid = json.loads(runner.invoke(cli_main, ["fit", *two, "--prior", str(out), "--json"]).output)
    assert [f["prior"] for f in grid] == ["t-1 x grid", "t-1 x grid"]
    # a given prior that learned from the scored curves is flagged, not silently trusted
    bt = runner.invoke(cli_main, ["backtest", str(tmp_path / "runs"), "--methods", "fast", "--prior", str(out)])
    assert bt.exit_code == 0, bt.output
    assert "learned from engine-grid, scored here: optimistic" in bt.output
    # bad input: a clear message, exit 2, nothing written
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for args in (
        ["fit", str(csv), "--prior", str(bad)],
        ["fit", str(csv), "--prior", "flat"],
        ["prior", "build", str(tmp_path / "missing"), "--out", str(tmp_path / "x.json")],
        ["prior", "build", str(tmp_path / "runs"), "--out", str(tmp_path / "x.json"), "--scale", "-1"],
    ):
        r = runner.invoke(cli_main, args)
        assert r.exit_code == 2 and "error:" in r.output and "Traceback" not in r.output, (args, r.output)
    assert not (tmp_path / "x.json").exists()


def test_write_prior_round_trips(tmp_path: Path) -> None:
    prior = load_prior()
    path = write_prior(prior, tmp_path / "p.json")
    assert load_prior(str(path)) == prior
    curves, _ = load_curves(tmp_path)  # a directory without CSVs holds no curves
    assert curves == []


def test_a_prior_without_a_positive_definite_covariance_is_refused(tmp_path: Path) -> None:
    """Checked where a prior is made, so a bad file is a clear CLI error, not a fit that fails in a Cholesky."""
    with pytest.raises(ValueError, match="positive-definite"):
        ShapePrior(mean=(-1.7, 0.7), cov=((1.0, 2.0), (2.0, 1.0)))
    data = load_prior().to_json()
    data["cov"] = [[1.0, 2.0], [2.0, 1.0]]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    csv = tmp_path / "run.csv"
    _write(csv, _creeping(0))
    r = CliRunner().invoke(cli_main, ["fit", str(csv), "--prior", str(bad)])
    assert r.exit_code == 2 and "positive-definite" in r.output and "Traceback" not in r.output, r.output


def test_fit_options_refuse_a_prior_name_they_do_not_know() -> None:
    from rl_core.scaling.fit.forecast import FitOptions

    with pytest.raises(ValueError, match="'default' was renamed 'public'"):
        FitOptions(prior="default")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not allowed"):
        FitOptions(prior="flat")  # type: ignore[arg-type]
    assert FitOptions(prior="public").prior == "public"
