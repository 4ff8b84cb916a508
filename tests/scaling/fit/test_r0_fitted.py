"""``scalerl fit --r0 fit`` (and ``auto``) on a normal rising curve whose first evaluation is after
some training. Its posterior used to put every draw on cells where the sigmoid is 1 on every point (a numerically
singular design, whose rounding-error determinant gave the cell up to e^345 of weight): R0 at its bound 1.0 half the
time, a median ceiling far below the fit, and the status still ``ok``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rl_core.scaling.fit.forecast import fit_curve, label_r0_bound
from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.fit.summary import summarize
from scalerl.cli.main import cli


def _curve(seed: int, truth_a: float = 0.70) -> tuple[np.ndarray, np.ndarray]:
    """A rising sigmoid (R0 0.15, A ``truth_a``) observed from compute 50 on, with evaluation noise."""
    rng = np.random.default_rng(seed)
    x = np.sort(rng.uniform(50.0, 2000.0, 30))
    y = sigmoid(x, 0.15, truth_a, 2.0, 400.0) + rng.normal(0.0, 0.02, x.size)
    return x, np.clip(y, 0.0, 1.0)


@pytest.mark.parametrize("seed", range(6))
def test_a_fitted_r0_is_not_on_its_bound_and_agrees_with_the_default(seed: int) -> None:
    x, y = _curve(seed)
    free, pinned = summarize(fit_curve(x, y, r0="fit")), summarize(fit_curve(x, y))
    r0, a, a_default = free.value("R0"), free.value("A"), pinned.value("A")
    assert r0 is not None and a is not None and a_default is not None
    assert r0 < 0.6, f"R0's posterior median {r0:.3f} sits on (or near) its bound"
    assert abs(a - a_default) < 0.06, f"free-R0 median A {a:.3f} against the default's {a_default:.3f}"
    assert abs(a - 0.70) < 0.08


def test_the_cli_fit_with_r0_fit_reports_the_ceiling_not_the_bound(tmp_path: Path) -> None:
    x, y = _curve(16)
    csv = tmp_path / "run.csv"
    csv.write_text("gpu_hours,pass_rate\n" + "".join(f"{a},{b}\n" for a, b in zip(x, y, strict=True)))
    answers = {}
    for choice in ("observed", "fit", "auto"):
        res = CliRunner().invoke(cli, ["fit", str(csv), "--r0", choice, "--json"])
        assert res.exit_code == 0, res.output
        answers[choice] = json.loads(res.stdout)
    assert answers["fit"]["status"] == "ok" and answers["fit"]["R0"] < 0.6
    assert abs(answers["fit"]["A"] - answers["observed"]["A"]) < 0.06
    # the default's note recommends the flag; the flag must then give a sound fit (it does now)
    assert any("--r0 fit" in n for n in answers["observed"]["notes"])
    assert answers["auto"]["A"] == pytest.approx(answers["fit"]["A"])


def test_a_fit_whose_r0_draws_sit_on_the_bound_is_labelled_degenerate_not_ok() -> None:
    """The label, on the draws the bug produced (every R0 draw at 1) beside the fit's own."""
    x, y = _curve(3)
    fit = fit_curve(x, y, r0="fit")
    assert fit.status == "ok" and fit.samples is not None and fit.params is not None
    kept = label_r0_bound(fit.status, fit.message, fit.params, fit.samples, fitted=True)
    assert kept == (fit.status, fit.message)
    on_bound = replace(fit.samples, R0=np.full(fit.samples.R0.size, 1.0))
    status, message = label_r0_bound(fit.status, fit.message, fit.params, on_bound, fitted=True)
    assert status == "degenerate" and "bound 1.0" in message
    assert not replace(fit, status=status).usable
    assert label_r0_bound("ok", "m", fit.params, on_bound, fitted=False) == ("ok", "m")  # a pinned R0 is no fit
