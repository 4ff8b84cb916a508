"""`scalerl fit` and `scalerl backtest` on W&B exports (tests/fixtures/wandb, shaped as W&B writes them: the chart's
"Export CSV" with quoted `"Step","RUN - metric","RUN - metric__MIN","RUN - metric__MAX"` headers and empty cells
where a run logged nothing; a run-history export with `_step`/`_runtime`/`_timestamp` and a text column).

On such a file the CLI picked Step for both axes and exited 0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from rl_core.scaling.measure.curves_io import CurveFileError, read_curve_table
from scalerl.cli.exit_codes import EXIT_BAD_INPUT, EXIT_NO_FORECAST, EXIT_OK
from scalerl.cli.main import cli

WANDB = Path(__file__).resolve().parents[1] / "fixtures" / "wandb"


def fit(*args: str) -> Result:
    return CliRunner().invoke(cli, ["fit", *args, "--json"])


def test_chart_export_fits_pass_rate_against_step() -> None:
    r = fit(str(WANDB / "chart_one_run.csv"))
    assert r.exit_code == EXIT_OK, r.output
    out = json.loads(r.stdout)
    assert (out["x_column"], out["y_column"]) == ("Step", "grpo-qwen3-1p7b - eval/pass_rate")
    assert out["status"] == "ok" and 0.6 < out["A"] < 0.85  # the fixture's ceiling is 0.71


def test_min_max_companions_are_never_y_and_other_runs_are_named() -> None:
    r = fit(str(WANDB / "chart_two_runs.csv"))
    assert r.exit_code == EXIT_OK, r.output
    out = json.loads(r.stdout)
    assert out["y_column"] == "lr=1e-6 - eval/pass_rate"
    assert any("the others (--y): ['lr=3e-6 - eval/pass_rate']" in n for n in out["notes"])
    second = fit(str(WANDB / "chart_two_runs.csv"), "--y", "LR=3E-6 - EVAL/PASS_RATE")  # any case
    assert second.exit_code == EXIT_OK, second.output
    assert json.loads(second.stdout)["y_column"] == "lr=3e-6 - eval/pass_rate"
    assert 0.5 < json.loads(second.stdout)["A"] < 0.7  # the second run's ceiling (0.58), not the first's


def test_percentages_are_divided_by_100_with_a_note() -> None:
    r = fit(str(WANDB / "chart_percent.csv"))
    assert r.exit_code == EXIT_OK, r.output
    out = json.loads(r.stdout)
    assert out["y_column"] == "grpo-qwen3-1p7b - eval/accuracy" and 0.5 < out["A"] < 0.8
    assert any("read as percentages (divided by 100)" in n for n in out["notes"])
    table = read_curve_table(WANDB / "chart_percent.csv")
    raw = table.column("grpo-qwen3-1p7b - eval/accuracy")
    assert np.allclose(table.curve().y, raw / 100) and raw.max() > 1


def test_a_column_that_is_neither_a_pass_rate_nor_a_percentage_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "loss.csv"
    path.write_text('"Step","run - train/loss"\n' + "".join(f'"{s}","{500 - s}"\n' for s in range(0, 200, 10)))
    r = fit(str(path))
    assert r.exit_code == EXIT_BAD_INPUT
    assert r.stderr == (
        "error: loss.csv: column 'run - train/loss' holds values from 310 to 500: "
        "not a pass rate in [0, 1] nor a percentage in [0, 100]\n"
    )


def test_history_export_prefers_gpu_hours_and_ignores_text_and_internal_columns() -> None:
    r = fit(str(WANDB / "history.csv"))
    assert r.exit_code == EXIT_OK, r.output
    out = json.loads(r.stdout)
    assert (out["x_column"], out["y_column"]) == ("train/gpu_hours", "eval/pass_rate")
    asked = fit(str(WANDB / "history.csv"), "--y", "Phase")
    assert asked.exit_code == EXIT_BAD_INPUT and "Traceback" not in asked.output
    assert asked.stderr == (
        "error: history.csv: column 'phase' holds text, not numbers (row 2: 'warmup' is not a number)\n"
    )
    missing = fit(str(WANDB / "history.csv"), "--y", "eval/reward")
    assert missing.exit_code == EXIT_BAD_INPUT and "(text, ignored: phase)" not in missing.stderr  # needed: strict
    assert "no column 'eval/reward'" in missing.stderr


def test_x_is_never_y() -> None:
    r = fit(str(WANDB / "chart_one_run.csv"), "--x", "step", "--y", "STEP")
    assert r.exit_code == EXIT_BAD_INPUT
    assert r.stderr == "error: chart_one_run.csv: the x and y columns are both 'Step'; name two columns\n"
    table = read_curve_table(WANDB / "chart_one_run.csv")
    assert table.curve(y="grpo-qwen3-1p7b - eval/pass_rate").x_column == "Step"
    with pytest.raises(CurveFileError, match="no metric column"):  # x named: y is neither x, Step nor a companion
        table.curve(x="grpo-qwen3-1p7b - eval/pass_rate")


def test_a_header_with_no_metric_besides_the_step_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "steps.csv"
    path.write_text('"Step","Wall time"\n"0","1763900000.5"\n"10","1763900100.5"\n')
    r = fit(str(path))
    assert r.exit_code == EXIT_BAD_INPUT and r.stderr.startswith("error: steps.csv: no metric column")
    with pytest.raises(CurveFileError, match="no metric column"):
        read_curve_table(path).default_y()  # the old default picked Step for y too


def test_a_pass_rate_column_with_a_text_cell_is_an_error_not_skipped(tmp_path: Path) -> None:
    path = tmp_path / "typo.csv"
    path.write_text("step,pass_rate,entropy\n0,0.1,1.0\n10,n/a,0.9\n20,0.3,0.8\n")
    r = fit(str(path))
    assert r.exit_code == EXIT_BAD_INPUT  # not a silent fit of entropy
    assert r.stderr == "error: typo.csv: column 'pass_rate' holds text, not numbers (row 3: 'n/a' is not a number)\n"


def test_a_forecast_that_could_not_be_made_exits_1_with_the_reason(tmp_path: Path) -> None:
    r = fit(str(WANDB / "chart_too_short.csv"))
    assert r.exit_code == EXIT_NO_FORECAST == 1
    assert json.loads(r.stdout)["status"] == "insufficient_data"
    assert (
        r.stderr.startswith("error: ")
        and "chart_too_short.csv: no forecast: insufficient_data: need at least" in r.stderr
    )
    assert "Traceback" not in r.output
    text = CliRunner().invoke(cli, ["fit", str(WANDB / "chart_too_short.csv"), "--predict-at", "800"])
    assert text.exit_code == EXIT_NO_FORECAST and "nan" not in text.stdout  # no forecast line for a missing fit
    # In a grid a run borrows its siblings' shape and noise and is forecast from its second evaluation (with a
    # shared R0); one evaluation after the start is still no forecast.
    lines = (WANDB / "chart_too_short.csv").read_text().splitlines()
    one_point = tmp_path / "one_point.csv"
    one_point.write_text("\n".join(lines[:3]) + "\n")
    grid = fit(str(WANDB / "chart_one_run.csv"), str(one_point))
    assert grid.exit_code == EXIT_NO_FORECAST and grid.stderr.count("no forecast") == 1, grid.output
    borrowed = fit(str(WANDB / "chart_one_run.csv"), str(WANDB / "chart_too_short.csv"))
    assert borrowed.exit_code == 0, borrowed.output
    assert any("noise level borrowed" in n for n in json.loads(borrowed.stdout)[1]["notes"])


def test_backtest_reads_a_directory_of_wandb_exports(tmp_path: Path) -> None:
    for name in ("chart_one_run.csv", "chart_percent.csv", "history.csv", "chart_too_short.csv"):
        shutil.copy(WANDB / name, tmp_path / name)
    r = CliRunner().invoke(cli, ["backtest", str(tmp_path), "--methods", "fast", "--json"])
    assert r.exit_code == EXIT_OK, r.output
    out = json.loads(r.stdout)
    columns = {c["name"]: (c["x_column"], c["y_column"]) for c in out["curves"]}
    assert columns == {
        "chart_one_run": ("Step", "grpo-qwen3-1p7b - eval/pass_rate"),
        "chart_percent": ("Step", "grpo-qwen3-1p7b - eval/accuracy"),
        "history": ("train/gpu_hours", "eval/pass_rate"),
    }
    assert out["skipped"] == ["chart_too_short.csv: fewer than 6 points"]
