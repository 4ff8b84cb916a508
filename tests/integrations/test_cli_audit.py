"""Bad input to ``scalerl import --csv-out`` (offline) and ``scalerl train``: one ``error:`` line, exit 2, no
traceback, and no CSV written for a run that cannot be forecast."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from scalerl.cli.main import cli


def _csv(path: Path, rates: list[float], steps: list[int] | None = None) -> Path:
    steps = steps or [10 * (i + 1) for i in range(len(rates))]
    path.write_text("step,pass_rate\n" + "".join(f"{s},{r}\n" for s, r in zip(steps, rates, strict=True)))
    return path


def _rates(n: int = 20, scale: float = 1.0) -> list[float]:
    return [scale * (0.1 + 0.5 * (1 - math.exp(-i / 8))) for i in range(n)]


def _bad_input(res: Result, *phrases: str) -> None:
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert isinstance(res.exception, SystemExit), res.exception
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    for phrase in phrases:
        assert phrase in errors[0], (phrase, errors[0])
    assert "Traceback" not in res.output


def _import(*args: str) -> Result:
    return CliRunner().invoke(cli, ["import", *args], input="")


def test_import_writes_no_empty_csv_for_a_run_without_pass_rates(tmp_path: Path) -> None:
    """Values that are neither pass rates nor percentages are left out; a CSV with only a header must not be
    written (it was, with exit 0)."""
    good = _csv(tmp_path / "good.csv", _rates())
    reward = _csv(tmp_path / "reward.csv", _rates(scale=500.0))
    out = tmp_path / "out"
    _bad_input(
        _import(str(good), str(reward), "--csv-out", str(out)), "reward.csv", "no pass-rate value in [0, 1]", "--y"
    )
    assert not out.exists()


def test_import_reads_a_run_logged_in_percent_as_fit_does(tmp_path: Path) -> None:
    pct = _csv(tmp_path / "pct.csv", _rates(scale=100.0))
    out = tmp_path / "out"
    res = _import(str(pct), "--csv-out", str(out))
    assert res.exit_code == 0, res.output
    assert "read as percentages (divided by 100)" in res.stderr
    rows = (out / "pct.csv").read_text().splitlines()[1:]
    rates = [float(r.split(",")[-1]) for r in rows]
    assert len(rates) == 20 and max(rates) <= 1.0 and rates[-1] == pytest.approx(_rates()[-1])


def test_import_refuses_two_runs_that_would_overwrite_one_csv(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = _csv(tmp_path / "a" / "train.csv", _rates())
    second = _csv(tmp_path / "b" / "train.csv", _rates(scale=0.5))
    out = tmp_path / "out"
    _bad_input(_import(str(first), str(second), "--csv-out", str(out)), "both be written", "train.csv")
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "phrases"),
    [
        ("gpu_hours,pass_räte\n1,0.2\n".encode("latin-1"), ("run.csv", "not UTF-8 text")),
        (("[" * 50_000 + "]" * 50_000 + "\n").encode(), ("run.jsonl", "nested too deeply")),
        (b"gpu_hours,pass_rate\n1,0.2\n", ("run.csv", "no step column")),  # the reader's message names no file
    ],
)
def test_import_names_a_source_it_cannot_read(tmp_path: Path, content: bytes, phrases: tuple[str, ...]) -> None:
    path = tmp_path / phrases[0]
    path.write_bytes(content)
    _bad_input(_import(str(path), "--csv-out", str(tmp_path / "out")), *phrases)


def test_import_refuses_a_negative_step(tmp_path: Path) -> None:
    path = _csv(tmp_path / "run.csv", _rates(5), steps=[-40, -30, -20, -10, 0])
    _bad_input(_import(str(path), "--csv-out", str(tmp_path / "out")), "run.csv", "step must be an integer >= 0")


def test_import_to_an_unwritable_folder_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    path = _csv(tmp_path / "run.csv", _rates())
    _bad_input(_import(str(path), "--csv-out", str(blocker / "out")), "--csv-out", "cannot write")


@pytest.mark.parametrize(("option", "value"), [("--gpus", "-8"), ("--gpus", "nan"), ("--budget", "-1")])
def test_import_refuses_a_non_positive_multiplier_or_budget(tmp_path: Path, option: str, value: str) -> None:
    """--gpus -8 made every compute 0 (clipped), silently."""
    path = _csv(tmp_path / "run.csv", _rates())
    _bad_input(_import(str(path), option, value, "--csv-out", str(tmp_path / "out")), option, "> 0")


def test_import_csv_out_still_reads_back_with_fit(tmp_path: Path) -> None:
    out = tmp_path / "out"
    res = _import(str(_csv(tmp_path / "run.csv", _rates())), "--csv-out", str(out))
    assert res.exit_code == 0, res.output
    assert [p.name for p in out.iterdir()] == ["run.csv"]
    fit = CliRunner().invoke(cli, ["fit", str(out / "run.csv"), "--json"])
    assert fit.exit_code in (0, 1) and "Traceback" not in fit.output, fit.output


def test_train_names_a_config_that_is_not_text(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_bytes(bytes(range(256)))
    _bad_input(CliRunner().invoke(cli, ["train", str(config), "--out", str(tmp_path / "run")]), "run.yaml", "UTF-8")
    assert not (tmp_path / "run").exists()
