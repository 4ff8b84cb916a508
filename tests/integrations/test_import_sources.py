"""A W&B JSON-array history export and a wandb offline run directory are importable (with clear
errors for what is not one); ``bad.jsonl`` and ``bad.csv`` in one import no longer share ``curves/bad.csv``;
``import`` and ``watch`` print the ceiling A with its interval."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.cli.watch_cmd import _ceiling
from scalerl.integrations.readers import LogFormatError, read_any
from tests.client.conftest import Service

FIXTURE = Path(__file__).parents[1] / "fixtures" / "wandb_offline"
RUN_DIR = next(FIXTURE.glob("offline-run-*"))
TRUTH = {s: round(0.05 + 0.65 / (1 + (120 / s) ** 1.5), 4) for s in range(20, 310, 20)}


def _import(*args: str) -> Any:
    return CliRunner().invoke(cli, ["import", *args])


@pytest.mark.parametrize("source", [RUN_DIR, RUN_DIR / "run-vsn2fixn.wandb", FIXTURE])
def test_a_wandb_offline_run_reads_as_its_history(source: Path) -> None:
    ((name, history),) = read_any(source).items()
    assert name == "grpo-lr1e-6"
    assert sorted(history) == list(range(10, 310, 10))  # the trainer's step, every one (a record crosses a block)
    assert {s: row["eval/accuracy"] for s, row in history.items() if "eval/accuracy" in row} == TRUTH
    assert history[150]["train/loss"] == pytest.approx(1 / 150) and len(history[150]) >= 22


def test_a_wandb_directory_with_latest_run_link_is_one_run(tmp_path: Path) -> None:
    wandb = tmp_path / "wandb"
    shutil.copytree(RUN_DIR, wandb / RUN_DIR.name)
    (wandb / "latest-run").symlink_to(RUN_DIR.name)
    out = tmp_path / "curves"
    res = _import(str(wandb), "--csv-out", str(out))
    assert res.exit_code == 0, res.output
    assert [p.name for p in out.iterdir()] == ["grpo-lr1e-6.csv"]
    rows = (out / "grpo-lr1e-6.csv").read_text().splitlines()
    assert len(rows) == 1 + len(TRUTH)


def test_a_damaged_or_foreign_wandb_file_is_one_clear_error(tmp_path: Path) -> None:
    foreign = tmp_path / "run-x.wandb"
    foreign.write_bytes(b"\x00" * 64)
    res = _import(str(foreign), "--csv-out", str(tmp_path / "o"))
    assert res.exit_code == 2 and "not a wandb run log" in res.output and "Traceback" not in res.output
    cut = tmp_path / "run-cut.wandb"
    cut.write_bytes((RUN_DIR / "run-vsn2fixn.wandb").read_bytes()[:40_000])  # a run killed mid-write
    history = read_any(cut)["grpo-lr1e-6"]
    assert 0 < len(history) < 30
    empty = tmp_path / "wandb-empty"
    empty.mkdir()
    (empty / "offline-run-x").mkdir()
    (empty / "offline-run-x" / "run-x.wandb").write_bytes(b":W&B\xe1\xbe\x00")
    with pytest.raises(LogFormatError, match="no history records"):
        read_any(empty)


def test_a_wandb_json_history_export_is_importable(tmp_path: Path) -> None:
    rows = [{"_step": 2 * i, "train/global_step": 10 * (i + 1), "eval/accuracy": 0.1 + 0.02 * i} for i in range(12)]
    export = tmp_path / "history.json"
    export.write_text(json.dumps(rows))
    out = tmp_path / "curves"
    res = _import(str(export), "--csv-out", str(out))
    assert res.exit_code == 0, res.output
    lines = (out / "history.csv").read_text().splitlines()[1:]
    assert [int(r.split(",")[0]) for r in lines] == [10 * (i + 1) for i in range(12)]  # the trainer's step
    not_rows = tmp_path / "summary.json"
    not_rows.write_text(json.dumps({"eval/accuracy": 0.5}))
    res = _import(str(not_rows), "--csv-out", str(out))
    assert res.exit_code == 2 and "JSON array of row objects" in res.output and "verl" not in res.output


def _rates(n: int = 12) -> list[float]:
    return [round(0.1 + 0.5 * (1 - math.exp(-i / 4)), 4) for i in range(n)]


def test_two_sources_with_one_name_write_two_csvs(tmp_path: Path) -> None:
    (tmp_path / "bad.jsonl").write_text(
        "".join(json.dumps({"step": i, "pass_rate": r}) + "\n" for i, r in enumerate(_rates()))
    )
    (tmp_path / "bad.csv").write_text("step,pass_rate\n" + "".join(f"{i},{r / 2}\n" for i, r in enumerate(_rates())))
    out = tmp_path / "curves"
    res = _import(str(tmp_path / "bad.jsonl"), str(tmp_path / "bad.csv"), "--csv-out", str(out))
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["bad-csv.csv", "bad-jsonl.csv"]
    assert "imported as 'bad-jsonl'" in res.output
    halves = [float(r.split(",")[-1]) for r in (out / "bad-csv.csv").read_text().splitlines()[1:]]
    assert halves[-1] == pytest.approx(_rates()[-1] / 2)
    again = _import(str(tmp_path / "bad.csv"), "--csv-out", str(out), "--run", "bad-csv")
    assert again.exit_code == 0 and "replaced the file there" in again.output


def test_import_prints_the_ceiling_with_its_interval(service: Service, tmp_path: Path) -> None:
    run = tmp_path / "grpo.csv"
    run.write_text(
        "step,gpu_hours,pass_rate\n"
        + "".join(f"{s},{0.05 * s},{0.1 + 0.6 / (1 + (200 / s) ** 1.5):.4f}\n" for s in range(20, 820, 20))
    )
    res = _import(str(run), "--url", service.url, "--token", service.token)
    assert res.exit_code == 0, res.output
    assert re.search(r"A=0\.\d{3} \[0\.\d{3}, (0|1)\.\d{3}\] \(80%, \d+ points\)", res.output), res.output


class _FakeClient:
    def __init__(self, run: dict[str, Any]) -> None:
        self.run = run

    def get_run(self, run_id: int) -> dict[str, Any]:
        return self.run


class _FakeReporter:
    def __init__(self, run: dict[str, Any]) -> None:
        self.client, self.run_id = _FakeClient(run), 7


def _fit(n: int, a: float, ci: list[float] | None) -> dict[str, Any]:
    return {
        "kind": "full" if ci else "point",
        "fit": {"A": a, "n_points": n, "status": "ok", "level": 0.8, "ci": ci and {"A": ci}},
    }


def test_watch_prints_the_ceiling_with_the_interval_of_the_newest_full_fit() -> None:
    current = _FakeReporter({"fit": _fit(30, 0.70, None), "forecast": _fit(30, 0.69, [0.64, 0.75])})
    assert _ceiling(current, 0.70) == "A=0.690 [0.640, 0.750] (80%, 30 points)"
    older = _FakeReporter({"fit": _fit(34, 0.71, None), "forecast": _fit(30, 0.69, [0.64, 0.75])})
    text = _ceiling(older, 0.71)
    assert text.startswith("A=0.710 (34 points") and "[0.640, 0.750]" in text
    none_yet = _FakeReporter({"fit": _fit(4, 0.3, None), "forecast": None})
    assert "no interval yet" in _ceiling(none_yet, 0.3)
