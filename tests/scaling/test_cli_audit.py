"""Bad or unusual input to the offline commands (fit, backtest, replay, prior): one ``error:`` line, exit 2, no
traceback and no partial output file; unusual but meaningful input is read as meant."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.fit.prior import PRIOR_FILE
from scalerl.cli.main import cli
from tests.scaling.conftest import make_curve


def _rows(sep: str = ",", scale: float = 1.0, seed: int = 0, A: float = 0.6) -> list[str]:
    x, y = make_curve(n=30, A=A, seed=seed)
    return [f"gpu_hours{sep}pass_rate"] + [f"{a}{sep}{b * scale}" for a, b in zip(x, y, strict=True)]


def _write(path: Path, lines: list[str], newline: str = "\n") -> Path:
    path.write_text(newline.join(lines) + newline)
    return path


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _bad_input(res: Result, *phrases: str) -> None:
    """Exit 2 with one ``error:`` line on stderr naming every phrase, and no traceback."""
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert isinstance(res.exception, SystemExit), res.exception
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    assert "Traceback" not in res.output


# ---- reading CSV files ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("sep", "newline"), [("\t", "\n"), (";", "\n"), (",", "\r\n")])
def test_fit_reads_tab_and_semicolon_separated_files(tmp_path: Path, sep: str, newline: str) -> None:
    path = _write(tmp_path / "run.csv", _rows(sep), newline)
    res = _invoke("fit", str(path), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["status"] == "ok" and (out["x_column"], out["y_column"]) == ("gpu_hours", "pass_rate")


def test_fit_refuses_a_csv_without_a_header_row(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.csv", _rows()[1:])  # the first data row would silently become the header
    _bad_input(_invoke("fit", str(path)), "run.csv", "first row holds numbers", "header row")


@pytest.mark.parametrize(
    ("content", "phrase"),
    [
        (b'{"gpu_hours": [1, 2], "pass_rate": [0.1, 0.2]}', "JSON, not a CSV"),
        (b'{"step": 1, "pass_rate": 0.1}\n{"step": 2, "pass_rate": 0.2}\n', "JSON, not a CSV"),
        (b"PAR1\x15\x04\x15\x10\x15\x14L\x15\x04\x15\x00\x12\x00\x00\x08\x1c\xff\xfePAR1", "Parquet file, not a CSV"),
        ("gpu_hours,pass_räte\n1,0.2\n".encode("latin-1"), "not UTF-8 text"),
        (b",,\n1,2,3\n", "no column names"),
    ],
)
def test_fit_names_a_file_that_is_not_csv_text(tmp_path: Path, content: bytes, phrase: str) -> None:
    path = tmp_path / "run.csv"
    path.write_bytes(content)
    _bad_input(_invoke("fit", str(path)), "run.csv", phrase)


def test_a_column_name_used_twice_is_refused_not_silently_the_last(tmp_path: Path) -> None:
    lines = ["gpu_hours,pass_rate,pass_rate"] + [f"{c},{0.1 + c / 2000},{0.9 - c / 2000}" for c in range(10, 1010, 25)]
    path = _write(tmp_path / "run.csv", lines)
    for extra in ((), ("--y", "pass_rate")):
        _bad_input(_invoke("fit", str(path), *extra), "run.csv", "'pass_rate' more than once", "rename")
    # a repeated column that is not used does no harm
    lines = ["gpu_hours,pass_rate,note,note"] + [f"{c},{0.1 + c / 2000},1,2" for c in range(10, 1010, 25)]
    assert _invoke("fit", str(_write(tmp_path / "ok.csv", lines))).exit_code == 0


def test_python_only_number_spellings_are_text(tmp_path: Path) -> None:
    """float('1_000') is 1000 in Python; no CSV writer means that, so the column is text (and naming it an error)."""
    lines = ["gpu_hours,pass_rate"] + [f"{c}_0,0.{c}" for c in range(1, 30)]
    _bad_input(_invoke("fit", str(_write(tmp_path / "run.csv", lines))), "'gpu_hours' holds text", "'1_0'")


# ---- fit options ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "phrase"),
    [("0", "--fit-until must be a compute > 0"), ("-5", "--fit-until must be a compute > 0"), ("1", "below the first")],
)
def test_fit_until_outside_the_data_is_bad_input(tmp_path: Path, value: str, phrase: str) -> None:
    path = _write(tmp_path / "run.csv", _rows())
    _bad_input(_invoke("fit", str(path), "--fit-until", value), phrase)


def test_fit_plot_to_an_unwritable_path_is_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.csv", _rows())
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    _bad_input(_invoke("fit", str(path), "--plot", str(blocker / "fit.html")), "--plot", "cannot write")
    assert blocker.read_text() == "a file, not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "run.csv"]  # no temporary file left


def test_fit_plot_replaces_the_file_whole_with_normal_permissions(tmp_path: Path) -> None:
    path = _write(tmp_path / "run.csv", _rows())
    plot = tmp_path / "plots" / "fit.html"
    assert _invoke("fit", str(path), "--plot", str(plot)).exit_code == 0
    umask = os.umask(0)
    os.umask(umask)
    assert plot.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes it, not mkstemp's private 0600
    assert [p.name for p in plot.parent.iterdir()] == ["fit.html"]


# ---- replay -----------------------------------------------------------------------------------------------------


def _run_file(tmp_path: Path, name: str, A: float, scale: float = 1.0, x_shift: float = 0.0) -> Path:
    x = np.linspace(25, 1000, 40)
    y = sigmoid(x, 0.1, A, 1.8, 300.0) + np.random.default_rng(len(name)).normal(0, 0.005, x.size)
    lines = ["gpu_hours,pass_rate"] + [f"{a + x_shift},{b * scale}" for a, b in zip(x, y, strict=True)]
    return _write(tmp_path / f"{name}.csv", lines)


def test_replay_reads_a_percentage_file_as_fit_does(tmp_path: Path) -> None:
    """A run logged in percent (0-100) must not look 100 times better than the others."""
    files = [_run_file(tmp_path, "a", 0.7), _run_file(tmp_path, "b", 0.5, scale=100.0)]
    res = _invoke("replay", *map(str, files), "--policy", "none", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["best"] == "a" and out["pick"] == "a"
    assert 0.0 <= out["runs"]["b"]["final"] <= 1.0


@pytest.mark.parametrize(
    ("scale", "x_shift", "phrases"),
    [
        (1000.0, 0.0, ("b.csv", "not a pass rate in [0, 1] nor a percentage")),
        (-1.0, 0.0, ("b.csv", "not a pass rate in [0, 1] nor a percentage")),
        (1.0, -500.0, ("b.csv", "negative compute")),
    ],
)
def test_replay_refuses_what_is_not_a_pass_rate_or_compute(
    tmp_path: Path, scale: float, x_shift: float, phrases: tuple[str, ...]
) -> None:
    files = [_run_file(tmp_path, "a", 0.6), _run_file(tmp_path, "b", 0.5, scale=scale, x_shift=x_shift)]
    _bad_input(_invoke("replay", *map(str, files), "--policy", "none"), *phrases)


# ---- prior files ------------------------------------------------------------------------------------------------


def _prior_doc() -> dict[str, object]:
    doc = json.loads(PRIOR_FILE.read_text())
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ("[]", "a JSON array, not an object"),
        ("null", "a JSON null, not an object"),
        ('"prior"', "a JSON string, not an object"),
        ("[" * 50_000 + "]" * 50_000, "nested too deeply"),
        ({"mean": [1.0]}, "mean must hold 2 numbers"),
        ({"mean": [1.0, 2.0, 3.0]}, "mean must hold 2 numbers"),
        ({"extrapolation_sd": float("nan")}, "extrapolation_sd must be a finite number >= 0"),
        ({"extrapolation_sd": -1.0}, "extrapolation_sd must be a finite number >= 0"),
        ({"scale": 0.0}, "scale must be a finite number > 0"),
        ({"sources": "abc"}, "sources must be a list"),
        ({"version": None, "_drop": "version"}, "no 'version' field"),
    ],
)
def test_prior_show_and_fit_refuse_a_malformed_prior_file(
    tmp_path: Path, change: str | dict[str, object], phrase: str
) -> None:
    path = tmp_path / "prior.json"
    if isinstance(change, str):
        path.write_text(change)
    else:
        doc = {**_prior_doc(), **change}
        if "_drop" in change:
            doc.pop(str(change["_drop"]))
            doc.pop("_drop")
        path.write_text(json.dumps(doc))
    _bad_input(_invoke("prior", "show", str(path)), "prior.json", "not a shape prior file", phrase)
    csv = _write(tmp_path / "run.csv", _rows())
    _bad_input(_invoke("fit", str(csv), "--prior", str(path)), "--prior", phrase)


def test_the_old_name_of_the_shipped_prior_says_what_it_is_called_now(tmp_path: Path) -> None:
    csv = _write(tmp_path / "run.csv", _rows())
    _bad_input(_invoke("fit", str(csv), "--prior", "default"), "--prior", "'default' was renamed 'public'")
    _bad_input(_invoke("fit", str(csv), "--prior", "shipped"), "--prior", "neither 'public', 'none' nor a prior file")
    assert _invoke("fit", str(csv), "--prior", "public").exit_code == 0


def test_prior_show_reads_a_prior_file_with_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "prior.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_prior_doc()).encode())
    res = _invoke("prior", "show", str(path))
    assert res.exit_code == 0 and "version" in res.stdout, res.output


def _runs_dir(tmp_path: Path) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    for i in range(3):
        x, y = make_curve(n=30, C_mid=250.0 + 100 * i, seed=i)
        _write(d / f"r{i}.csv", ["gpu_hours,pass_rate"] + [f"{a},{b}" for a, b in zip(x, y, strict=True)])
    return d


@pytest.mark.parametrize("scale", ["nan", "inf", "0", "-1"])
def test_prior_build_bad_scale_names_the_option(tmp_path: Path, scale: str) -> None:
    out = tmp_path / "p.json"
    _bad_input(_invoke("prior", "build", str(_runs_dir(tmp_path)), "--out", str(out), "--scale", scale), "--scale")
    assert not out.exists()


def test_prior_build_to_an_unwritable_path_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    res = _invoke("prior", "build", str(_runs_dir(tmp_path)), "--out", str(blocker / "p.json"))
    _bad_input(res, "--out", "cannot write")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_prior_build_writes_a_prior_that_reads_back(tmp_path: Path) -> None:
    out = tmp_path / "new" / "p.json"
    res = _invoke("prior", "build", str(_runs_dir(tmp_path)), "--out", str(out), "--version", "t1")
    assert res.exit_code == 0, res.output
    assert [p.name for p in out.parent.iterdir()] == ["p.json"]
    shown = _invoke("prior", "show", str(out))
    assert shown.exit_code == 0 and "t1" in shown.stdout


def test_prior_build_and_backtest_name_a_missing_directory(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope")
    _bad_input(_invoke("prior", "build", missing, "--out", str(tmp_path / "p.json")), "nope", "no such directory")
    _bad_input(_invoke("backtest", missing), "nope", "no such directory")


def test_replay_of_runs_with_no_common_x_range_says_so(tmp_path: Path) -> None:
    early = _write(tmp_path / "early.csv", ["x,pass_rate"] + [f"{i},{0.1 + 0.05 * i}" for i in range(5)])
    late = _write(tmp_path / "late.csv", ["x,pass_rate"] + [f"{10 + i},{0.1 + 0.05 * i}" for i in range(5)])
    _bad_input(_invoke("replay", str(early), str(late)), "no common x range", "late starts at 10", "budget 4")
