"""`scalerl fit` says true things and refuses what it cannot forecast. The R0 note names the
compute of the first evaluation (it named the burn-in cut), `--r0 auto` (which the note suggests) is accepted, a file
with no pass-rate column is an error (it fitted `loss` and exited 0), the plot has no "Share chart" button, and
`scalerl import` counts the rows it skipped."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from scalerl.cli.main import cli


def curve_csv(path: Path, first: float = 1.5) -> Path:
    xs = [first, *[10.0 * i for i in range(1, 10)]]
    rows = [f"{x},{0.2 + 0.5 * x / (x + 30):.4f},{1.0 / (1 + x):.4f}" for x in xs]
    path.write_text("gpu_hours,pass_rate,loss\n" + "\n".join(rows) + "\n")
    return path


def test_r0_note_names_the_first_evaluations_compute(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["fit", str(curve_csv(tmp_path / "c.csv")), "--json"])
    assert result.exit_code in (0, 1), result.output
    notes = json.loads(result.stdout)["notes"]
    r0 = [n for n in notes if n.startswith("R0 pinned")]
    assert r0 and "at compute 1.5 > 0" in r0[0], notes
    auto = CliRunner().invoke(cli, ["fit", str(tmp_path / "c.csv"), "--r0", "auto", "--json"])
    assert auto.exit_code in (0, 1), auto.output
    assert json.loads(auto.stdout)["r0_fitted"] is True


def test_no_pass_rate_column_is_an_error_not_a_fit_of_the_loss(tmp_path: Path) -> None:
    path = tmp_path / "loss.csv"
    path.write_text("step,loss\n" + "".join(f"{s},{1.0 / (s + 2):.4f}\n" for s in range(1, 20)))
    result = CliRunner().invoke(cli, ["fit", str(path)])
    assert result.exit_code == 2, result.output
    assert "no pass-rate column recognised" in result.output and "--y" in result.output
    named = CliRunner().invoke(cli, ["fit", str(path), "--y", "loss"])  # named: the user's call
    assert named.exit_code in (0, 1), named.output


def test_plot_has_no_share_button(tmp_path: Path) -> None:
    out = tmp_path / "fit.html"
    result = CliRunner().invoke(cli, ["fit", str(curve_csv(tmp_path / "c.csv", 0.0)), "--plot", str(out)])
    assert result.exit_code in (0, 1), result.output
    html = out.read_text()
    assert '"showSendToCloud": false' in html and '"displaylogo": false' in html


def test_import_counts_skipped_rows(tmp_path: Path) -> None:
    jl = tmp_path / "m.jsonl"
    rows = [json.dumps({"step": s, "pass_rate": 0.1 + 0.05 * s}) for s in range(8)]
    jl.write_text("\n".join([rows[0], "{not json", *rows[1:], '{"no_step": 1}']) + "\n")
    result = CliRunner().invoke(cli, ["import", str(jl), "--csv-out", str(tmp_path / "o1")])
    assert result.exit_code == 0, result.output
    assert "skipped 2 lines that are not a JSON object with a step" in result.output
    csv_path = tmp_path / "m.csv"
    csv_path.write_text("step,pass_rate\n0,0.1\nx,0.2\n2,0.3\n,0.4\n3,0.5\n")
    result = CliRunner().invoke(cli, ["import", str(csv_path), "--csv-out", str(tmp_path / "o2")])
    assert result.exit_code == 0, result.output
    assert "skipped 2 rows without a number in the step column 'step'" in result.output
