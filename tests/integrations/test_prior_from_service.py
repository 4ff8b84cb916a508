"""`scalerl prior build --experiment`: a team's prior learned from the finished runs of an experiment on the live
service is the prior the same runs give as CSV files; unfinished runs are left out, bad input is a clear error."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.client import Client
from tests.client.conftest import Service

LR_GRID = Path(__file__).resolve().parents[1] / "fixtures" / "public_grids" / "grpo_math1p5b" / "lr"


def _prior(path: Path) -> dict[str, object]:
    out: dict[str, object] = json.loads(path.read_text())
    return out


def test_prior_from_an_experiment_equals_the_prior_from_its_csvs(service: Service, tmp_path: Path) -> None:
    runs = tmp_path / "lr"  # the public study's learning-rate sweep, with the step as its compute column
    runs.mkdir()
    for f in sorted(LR_GRID.glob("*.csv")):
        rows = [line.split(",") for line in f.read_text().split()]
        (runs / f.name).write_text(
            "\n".join(f"{r[0]},{'compute' if i == 0 else r[0]},{r[1]}" for i, r in enumerate(rows))
        )
    auth = ["--url", service.url, "--token", service.token]
    imported = CliRunner().invoke(
        cli, ["import", *map(str, sorted(runs.glob("*.csv"))), "--format", "csv", "--x", "compute", "--y", "pass_rate",
              "--experiment", "lr-study", *auth],
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    with Client(service.url, service.token) as api:  # a run that has not finished must not be learned from
        exp = api.find_experiment("lr-study")
        assert exp is not None
        live = api.register_run("still-running", experiment_id=int(exp["id"]))
        api.report_status(live.id, "running", "test")

    from_service = tmp_path / "service.json"
    built = CliRunner().invoke(
        cli, ["prior", "build", "--experiment", "lr-study", "--out", str(from_service), "--version", "t", *auth]
    )
    assert built.exit_code == 0, built.output
    assert "wrote" in built.output and "from 3 curves" in built.output, built.output
    assert "run still-running: running, not finished" in built.output

    from_csv = tmp_path / "csv.json"
    local = CliRunner().invoke(
        cli, ["prior", "build", str(tmp_path), "--x", "compute", "--y", "pass_rate", "--out", str(from_csv),
              "--version", "t"],
    )  # fmt: skip
    assert local.exit_code == 0, local.output
    a, b = _prior(from_service), _prior(from_csv)
    assert a["mean"] == b["mean"] and a["cov"] == b["cov"], (a, b)

    by_id = CliRunner().invoke(
        cli, ["prior", "build", "--experiment", str(exp["id"]), "--out", str(tmp_path / "id.json"), *auth]
    )
    assert by_id.exit_code == 0 and _prior(tmp_path / "id.json")["mean"] == a["mean"], by_id.output


def test_prior_build_from_the_service_fails_clearly(service: Service, tmp_path: Path) -> None:
    out = tmp_path / "p.json"
    auth = ["--url", service.url, "--token", service.token]
    cases = [
        (["--experiment", "nope", *auth], 2, "no experiment named 'nope'"),
        (["--experiment", "999", *auth], 2, "--experiment 999: server answered 404"),
        (["--experiment", "default", "--url", service.url, "--token", "wrong"], 6, "refused the token"),
        (["--experiment", "x", "--url", "http://127.0.0.1:9", "--token", "t"], 5, "cannot reach the server"),
        ([], 2, "give a directory of CSV runs, or --experiment"),
    ]
    for args, code, message in cases:
        res = CliRunner().invoke(cli, ["prior", "build", "--out", str(out), *args])
        assert res.exit_code == code and message in res.output and "Traceback" not in res.output, (args, res.output)
    assert not out.exists()


def test_imported_runs_of_one_stack_give_the_next_experiment_its_team_prior(service: Service, tmp_path: Path) -> None:
    """The whole loop a team runs: import finished runs with their task and model, then submit a grid on that
    stack; the service learns its prior from them at submission and says so."""
    from server.lifecycle.team_prior import MIN_TEAM_RUNS

    study = LR_GRID.parent
    runs = tmp_path / "past"
    runs.mkdir()
    for f in sorted(study.glob("*/*.csv"))[:MIN_TEAM_RUNS]:  # the public study's runs, step as compute
        rows = [line.split(",") for line in f.read_text().split()]
        (runs / f.name).write_text(
            "\n".join(f"{r[0]},{'compute' if i == 0 else r[0]},{r[1]}" for i, r in enumerate(rows))
        )
    auth = ["--url", service.url, "--token", service.token]
    stack = ["--task", "math", "--model", "qwen-math"]
    imported = CliRunner().invoke(
        cli, ["import", *map(str, sorted(runs.glob("*.csv"))), "--format", "csv", "--x", "compute", "--y", "pass_rate",
              "--experiment", "past", *stack, *auth],
    )  # fmt: skip
    assert imported.exit_code == 0, imported.output
    assert imported.output.count("succeeded") == MIN_TEAM_RUNS, imported.output
    doc = tmp_path / "next.json"
    doc.write_text(json.dumps({"name": "next", "preset": "scalerl", "task": "math", "model": "qwen-math",
                               "budget": 200.0}))  # fmt: skip
    submitted = CliRunner().invoke(cli, ["submit", str(doc), *auth])
    assert submitted.exit_code == 0, submitted.output
    assert f"forecasts: team prior: learned at submission from {MIN_TEAM_RUNS} succeeded runs of task 'math'" in (
        submitted.output
    ), submitted.output
    with Client(service.url, service.token) as api:
        exp = api.find_experiment("next")
        assert exp is not None and exp["document"]["fit"]["team_prior"]["sources"] == ["past"], exp["document"]
    # without --task/--model, imported runs belong to no stack and teach nothing
    bare = CliRunner().invoke(
        cli, ["import", *map(str, sorted(runs.glob("*.csv"))), "--format", "csv", "--x", "compute", "--y", "pass_rate",
              "--experiment", "past-bare", *auth],
    )  # fmt: skip
    assert bare.exit_code == 0, bare.output
    doc.write_text(json.dumps({"name": "next-2", "preset": "scalerl", "task": "imported", "model": "imported",
                               "budget": 200.0}))  # fmt: skip
    again = CliRunner().invoke(cli, ["submit", str(doc), *auth])
    assert again.exit_code == 0 and "team prior: 0 succeeded run(s)" in again.output, again.output
    empty = CliRunner().invoke(cli, ["import", str(next(runs.glob("*.csv"))), "--task", " ", *auth])
    assert empty.exit_code == 2 and "--task must not be empty" in empty.output, empty.output
