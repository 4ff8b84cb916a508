import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from scalerl.cli.main import cli
from tests.scaling.conftest import JSON_CONTRACT_KEYS, make_curve

EXAMPLE = Path(__file__).parents[2] / "scalerl" / "examples" / "qwen2p5_0p5b_gsm8k_ppo.csv"


def _csv(tmp_path: Path) -> Path:
    x, y = make_curve(n=30)
    p = tmp_path / "run.csv"
    p.write_text("gpu_hours,pass_rate\n" + "\n".join(f"{a},{b}" for a, b in zip(x, y, strict=True)) + "\n")
    return p


def test_fit_json_contract(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        cli,
        [
            "fit",
            str(_csv(tmp_path)),
            "--x",
            "gpu_hours",
            "--y",
            "pass_rate",
            "--json",
            "--predict-at",
            "2000",
            "--predict-at",
            "4000",
            "--level",
            "0.9",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    for key in JSON_CONTRACT_KEYS:
        assert key in out
    assert out["status"] == "ok" and out["level"] == 0.9 and out["method"] == "fast"
    assert set(out["ci"]) == {"A", "B", "C_mid"}
    assert [p["compute"] for p in out["predictions"]] == [2000.0, 4000.0]
    assert all(p["lo"] <= p["mean"] <= p["hi"] for p in out["predictions"])


def test_fit_human_output_and_plot(tmp_path: Path) -> None:
    plot = tmp_path / "fit.html"
    res = CliRunner().invoke(
        cli, ["fit", str(EXAMPLE), "--y", "val_score", "--fit-until", "9e6", "--predict-at", "3e7", "--plot", str(plot)]
    )
    assert res.exit_code == 0, res.output
    assert "A     =" in res.output and "power law" in res.output
    html = plot.read_text()
    assert "plotly" in html.lower() and len(html) > 1_000_000  # Plotly.js embedded
    assert '<script src="http' not in html  # works offline: no CDN


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    text = tmp_path / "text.csv"
    text.write_text("compute,pass\n1,abc\n")
    cases = [
        ([str(empty)], "empty file"),
        ([str(text), "--x", "compute", "--y", "pass"], "not a number"),
        ([str(_csv(tmp_path)), "--y", "missing"], "no column 'missing'"),
        ([str(tmp_path / "nope.csv")], "no such file"),
        ([str(_csv(tmp_path)), "--level", "1.5"], "--level"),
        ([str(_csv(tmp_path)), "--r0", "abc"], "--r0"),
    ]
    for args, phrase in cases:
        proc = subprocess.run([sys.executable, "-m", "scalerl.cli", "fit", *args], capture_output=True, text=True)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.count("\n") == 1 and phrase in proc.stderr and "Traceback" not in proc.stderr


def test_backtest_command(tmp_path: Path) -> None:
    for i in range(2):
        x, y = make_curve(n=25, C_mid=300 + 100 * i, seed=i)
        (tmp_path / f"c{i}.csv").write_text(
            "compute,pass_rate\n" + "\n".join(f"{a},{b}" for a, b in zip(x, y, strict=True))
        )
    res = CliRunner().invoke(
        cli, ["backtest", str(tmp_path), "--cutoffs", "0.5", "--methods", "fast,last_value", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert {c["name"] for c in out["curves"]} == {"c0", "c1"}
    assert {r["method"] for r in out["summary"]} == {"fast", "last_value"}
    bad = CliRunner().invoke(cli, ["backtest", str(tmp_path), "--cutoffs", "2"])
    assert bad.exit_code == 2


def test_every_command_has_help() -> None:
    for cmd in cli.commands:
        assert CliRunner().invoke(cli, [cmd, "--help"]).exit_code == 0


def test_forecaster_never_imports_torch() -> None:
    code = "import sys, rl_core.scaling, scalerl.cli.forecast_cmds; assert 'torch' not in sys.modules"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
