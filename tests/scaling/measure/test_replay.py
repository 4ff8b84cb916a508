"""The replay benchmark and scalerl's grid decisions on it: measures, guards, Optuna's pruners, the CLI contract."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from rl_core.scaling import GridRun, Policy, SigmoidParams, decide_grid, fit_curve
from rl_core.scaling.fit.posterior import PosteriorSamples
from rl_core.scaling.measure.replay import (
    GridView,
    RunCurve,
    load_grid,
    never_stop,
    replay,
    replay_sequential,
    replicate_key,
    scalerl_policy,
)
from scalerl.cli.main import cli

SHARED = Path(__file__).resolve().parents[4] / "shared" / "curves"
ENGINE_GRIDS = Path(__file__).resolve().parents[2] / "fixtures" / "engine_grids"


def saturating(ceiling: float, n: int = 24, rate: float = 0.15, noise: float = 0.004, seed: int = 0) -> RunCurve:
    """A run that rises from 0.1 to ``ceiling`` (exponential saturation in steps) with small evaluation noise."""
    rng = np.random.default_rng(seed)
    x = np.arange(0, n, dtype=np.float64) * 10.0
    y = 0.1 + (ceiling - 0.1) * (1 - np.exp(-rate * np.arange(n))) + rng.normal(0, noise, n)
    y[0] = 0.1
    return RunCurve(f"run_{ceiling:.2f}_{seed}", x, np.clip(y, 0, 1))


def grid(*ceilings: float) -> list[RunCurve]:
    return [saturating(c, seed=i) for i, c in enumerate(ceilings)]


def test_never_stop_uses_all_compute_and_has_no_regret() -> None:
    runs = grid(0.7, 0.5, 0.6)
    r = replay("none", runs, never_stop)
    assert r.compute == 1.0 and r.regret == 0.0 and r.pick == r.best == runs[0].name
    # the final value is the mean of the last three evaluations up to the budget
    assert r.runs[0].final == pytest.approx(float(np.mean(runs[0].y[-3:])))


def test_compute_and_regret_follow_from_where_runs_stop() -> None:
    runs = grid(0.7, 0.5, 0.6)

    def stop_the_best_at_50(runs_: object, budget: float) -> object:
        return lambda view: {runs[0].name: "test"} if view.x_now == 50.0 else {}

    r = replay("test", runs, stop_the_best_at_50)  # type: ignore[arg-type]
    assert r.runs[0].stopped_at == 50.0 and r.runs[0].reason == "test"
    assert r.compute == pytest.approx((50.0 + 230.0 + 230.0) / (3 * 230.0))
    assert r.pick == runs[2].name and r.regret == pytest.approx(r.runs[0].final - r.runs[2].final)


def test_scalerl_stops_clearly_worse_runs_and_keeps_the_best() -> None:
    runs = grid(0.8, 0.5, 0.45, 0.55)
    r = replay("scalerl", runs, scalerl_policy())
    assert r.pick == runs[0].name and r.regret == 0.0
    assert r.compute < 0.6
    stopped = {o.name: o for o in r.runs if o.stopped_at is not None}
    assert set(stopped) == {runs[1].name, runs[2].name, runs[3].name}
    for o in stopped.values():  # each reason names the run it was compared with
        # (the calibrated forecast's band is wider than the sigmoid's posterior on these clean curves, so the
        # equal-compute rule can stop a run before the forecast comparison does)
        assert o.reason is not None and o.reason.startswith(("dominated", "behind at equal compute"))
        assert any(r.name in o.reason for r in runs if r.name != o.name)
    raw = replay("scalerl-raw", runs, scalerl_policy(Policy(forecast_comparison="raw")))
    assert raw.pick == runs[0].name and raw.regret == 0.0
    assert all(o.reason.startswith("dominated") for o in raw.runs if o.stopped_at is not None and o.reason)


def test_a_stop_needs_two_consecutive_evaluations_and_the_last_run_is_never_stopped() -> None:
    runs = grid(0.8, 0.5)
    hold1 = replay("h1", runs, scalerl_policy(Policy(hold=1)))
    hold2 = replay("h2", runs, scalerl_policy())
    first, second = hold1.runs[1].stopped_at, hold2.runs[1].stopped_at
    assert first is not None and second is not None
    times = list(runs[1].x)
    assert times.index(second) > times.index(first)  # a stop is confirmed on a later evaluation
    assert hold2.runs[0].stopped_at is None  # min_live: the leader runs to the budget


def test_a_finished_grid_still_names_its_leader() -> None:
    """Once every run has completed, the decision still ranks them (the CI verdict reads the leader), but stops
    nothing."""
    runs = grid(0.8, 0.5)
    done = [GridRun(r.name, r.x, r.y, "completed", float(r.x[-1]), r.name) for r in runs]
    recs = decide_grid(done, Policy())
    assert recs[0].rule == "leader" and ("best of" in recs[0].reason or "only comparable" in recs[0].reason)
    assert recs[1].rule != "leader"
    live = decide_grid([dataclasses.replace(done[0], status="live"), done[1]], Policy())
    assert live[0].rule == "leader" and live[0].action in ("continue", "scale")


def test_a_ceiling_on_the_bound_is_not_evidence() -> None:
    """The issue's failure: a leader whose fitted ceiling sat on A = 1 stopped every better-identified run. Here
    the leader's posterior is as confident as it can be at the bound, and still cannot stop anyone."""
    x = np.arange(0, 12, dtype=np.float64) * 10.0
    riser_y = np.clip(0.1 + 0.03 * np.arange(12), 0, 1)
    plateau = saturating(0.62, n=12, rate=0.6)
    good_fit = fit_curve(plateau.x, plateau.y)
    on_bound = SigmoidParams(R0=0.1, A=1.0, B=1.0, C_mid=200.0)
    assert good_fit.samples is not None
    k = good_fit.samples.A.size
    draws = PosteriorSamples(
        R0=np.full(k, 0.1), A=np.full(k, 1.0), B=np.full(k, 1.0), C_mid=np.full(k, 200.0), sigma=np.full(k, 0.01)
    )
    riser_fit = dataclasses.replace(
        good_fit,
        params=on_bound,
        intervals={"A": (0.999, 1.0), "B": (0.9, 1.1), "C_mid": (190.0, 210.0)},
        samples=draws,
    )
    runs = [GridRun("riser", x, riser_y, budget=400.0), GridRun("good", plateau.x, plateau.y, budget=400.0)]
    # hand-made posteriors: the rule is read on them as they are (the raw comparison), not through the calibration
    recs = {
        r.run_id: r for r in decide_grid(runs, Policy(hold=1, forecast_comparison="raw"), fits=[riser_fit, good_fit])
    }
    assert recs["good"].action != "stop", recs["good"].reason
    # the same posterior just off the bound is evidence, and stops the run
    off = dataclasses.replace(riser_fit, params=dataclasses.replace(on_bound, A=0.99))
    recs = {r.run_id: r for r in decide_grid(runs, Policy(hold=1, forecast_comparison="raw"), fits=[off, good_fit])}
    assert recs["good"].action == "stop" and recs["good"].rule == "dominated"


def test_observed_rules_stop_with_their_reason() -> None:
    from rl_core.scaling import Divergence, Guard, Patience, Threshold

    x = np.arange(8, dtype=np.float64)
    low = np.full(8, 0.2)
    falling = np.array([0.1, 0.4, 0.6, 0.62, 0.61, 0.5, 0.45, 0.44])
    trunc = np.array([0.0, 0.05, 0.1, 0.12, 0.2, 0.3, 0.25, 0.4])
    cases = {
        "threshold": (Policy(threshold=Threshold(0.3, min_compute=5)), low, {}),
        "patience": (Policy(patience=Patience(3)), falling, {}),
        "divergence": (Policy(divergence=Divergence(0.1)), falling, {}),
        "guard:trunc": (Policy(guards=(Guard("trunc", 0.15),)), np.linspace(0.1, 0.5, 8), {"trunc": trunc}),
    }
    for rule, (policy, y, metrics) in cases.items():
        run = GridRun("r", x, y, budget=7.0, metrics=metrics)
        rec = decide_grid([run], policy)[0]
        assert rec.action == "stop" and rec.rule == rule, (rule, rec)
    # not held long enough: the threshold needs two evaluations below it
    one_low = np.array([0.5] * 7 + [0.2])
    rec = decide_grid([GridRun("r", x, one_low, budget=7.0)], cases["threshold"][0])[0]
    assert rec.rule != "threshold"


def test_optuna_asha_side_by_side_and_median_one_after_another() -> None:
    pytest.importorskip("optuna")
    from rl_core.scaling.measure.replay_optuna import replay_pruner

    runs = grid(0.8, 0.5, 0.45, 0.55, 0.6, 0.4)
    asha = replay_pruner("asha", runs, None, mode="parallel", orders=3)
    assert asha.compute < 1.0 and asha.orders == 3
    assert all(o.reason is None or o.reason.startswith("optuna asha") for o in asha.runs)
    median = replay_pruner("median", runs, None, mode="parallel", orders=1)
    assert median.compute == 1.0  # the median pruner compares with completed trials: side by side there are none
    seq = replay_pruner("median", runs, None, mode="sequential", orders=5)
    assert seq.compute < 1.0 and seq.orders == 5


def test_hyperband_replay_is_reproducible() -> None:
    """Hyperband puts trials in brackets by a hash of the study name; a random name made the benchmark drift."""
    pytest.importorskip("optuna")
    from rl_core.scaling.measure.replay_optuna import replay_pruner

    runs = [saturating(c, n=60, seed=i) for i, c in enumerate((0.8, 0.5, 0.45, 0.55, 0.6, 0.4, 0.7, 0.65, 0.52))]
    for mode in ("parallel", "sequential"):
        first = [replay_pruner("hyperband", runs, None, mode=mode, orders=4) for _ in range(3)]
        assert len({(r.compute, r.regret) for r in first}) == 1, mode
        assert [o.stopped_at for o in first[0].runs] == [o.stopped_at for o in first[2].runs]


def test_sequential_replay_averages_over_orders() -> None:
    runs = grid(0.8, 0.5)

    def prune_second(runs_: object, budget: float) -> object:
        seen: list[str] = []

        def trial(run: RunCurve) -> tuple[float | None, str | None]:
            seen.append(run.name)
            return (20.0, "second") if len(seen) == 2 else (None, None)

        return trial

    r = replay_sequential("seq", runs, prune_second, orders=10, seed=1)  # type: ignore[arg-type]
    assert 0 < r.regret < r.regret_worst  # type: ignore[operator]
    assert r.compute == pytest.approx((230.0 + 20.0) / 460.0)


def _write(tmp: Path, run: RunCurve) -> Path:
    path = tmp / f"{run.name}.csv"
    rows = ["step,pass_rate,truncation_rate"] + [f"{x:g},{y:.5f},0.01" for x, y in zip(run.x, run.y, strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_cli_json_contract(tmp_path: Path) -> None:
    files = [str(_write(tmp_path, r)) for r in grid(0.8, 0.5, 0.45)]
    res = CliRunner().invoke(cli, ["replay", *files, "--policy", "scalerl", "--policy", "none", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert set(out["runs"]) == {Path(f).stem for f in files}
    assert out["policy"] == "scalerl" and out["runs"]["run_0.80_0"]["stopped_at"] is None
    assert out["runs"]["run_0.45_2"]["stopped_at"] is not None
    assert out["none"]["compute"] == 1.0 and out["none"]["regret"] == 0.0
    assert out["near_best_stopped"] == [] and out["none"]["near_best_stopped"] == []  # 0.5 and 0.45: far below
    text = CliRunner().invoke(cli, ["replay", *files, "--policy", "scalerl", "--until", "100"])
    assert text.exit_code == 0 and "budget 100" in text.output
    assert "near-best runs stopped (scalerl, runs whose recipe ends within the tolerance of the best): 0" in text.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["one"], "at least 2 runs"),
        (["a", "b", "--x", "step", "--y", "step"], "both 'step'"),
        (["a", "b", "--until", "1e9"], "past the last evaluation"),
        (["a", "b", "--until", "-1"], "positive finite"),
        (["a", "missing.csv"], "no such file"),
    ],
)
def test_cli_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    paths = {"one": grid(0.5)[0], "a": saturating(0.5, seed=0), "b": saturating(0.6, seed=1)}
    argv = [str(_write(tmp_path, paths[a])) if a in paths else a for a in args]
    argv = [str(tmp_path / a) if a == "missing.csv" else a for a in argv]
    res = CliRunner().invoke(cli, ["replay", *argv, "--policy", "none"])
    assert res.exit_code == 2 and message in res.output and "Traceback" not in res.output, res.output


@pytest.mark.skipif(not (SHARED / "qwen3_14b_gsm8k_grpo_josancamon.csv").is_file(), reason="shared/curves absent")
def test_real_size_sweep_keeps_the_best_run() -> None:
    """The Qwen3 size sweep: the 14B run ends best although the 8B leads until step ~17; it must not be stopped."""
    runs = load_grid(sorted(SHARED.glob("qwen3_*_josancamon.csv")), "step")
    r = replay("scalerl", runs, scalerl_policy())
    assert r.regret <= 0.005 and r.compute < 1.0


def _engine_grid_dirs() -> list[str]:
    return sorted(p.name for p in ENGINE_GRIDS.iterdir() if p.is_dir()) if ENGINE_GRIDS.is_dir() else []


@pytest.mark.parametrize("grid_dir", _engine_grid_dirs())
def test_engine_grids_are_decided_without_losing_the_best(grid_dir: str) -> None:
    """The engine's own recorded grids (tests/fixtures/engine_grids): scalerl must save compute without stopping
    runs that end within evaluation noise of the best."""
    files = sorted((ENGINE_GRIDS / grid_dir).glob("*.csv"))
    assert len(files) >= 8, f"{grid_dir}: a recorded grid has at least 8 runs"
    runs = load_grid(files, "train_flops", "pass_rate")  # FLOPs: device-hours moved with the machine's load
    r = replay("scalerl", runs, scalerl_policy())
    assert r.regret <= 0.005, r.to_dict()  # two seeds per cell: about the evaluation noise
    assert r.compute < 0.7


def test_replicates_are_never_stopped_for_their_own_seed() -> None:
    """engine-loo: the two seeds of the best cell (loss_dapo, finals 0.837 and 0.853) trade places after 30% of the
    budget. Ranked against each other, seed 1 was stopped for seed 0 (regret 0.0167); as replicates, neither is."""
    runs = load_grid(sorted((ENGINE_GRIDS / "loo").glob("*.csv")), "train_flops", "pass_rate")
    naive = replay("naive", runs, scalerl_policy(replicates=False))
    reasons = {o.name: o.reason or "" for o in naive.runs}
    assert naive.regret > 0.01 and reasons["loss_dapo_s1"]  # the best seed stopped (beside its twin, or at a rung)
    r = replay("scalerl", runs, scalerl_policy())
    # compute 0.64 with the calibrated comparison (its wider bands stop later), 0.59 on the raw posterior
    assert r.regret == 0.0 and r.pick == "loss_dapo_s1" and r.compute < 0.7
    for o in r.runs:
        twin = replicate_key(o.name)
        assert twin is not None and f"{twin}_s" not in (o.reason or ""), (o.name, o.reason)


def test_replicate_key_reads_seed_suffixes() -> None:
    assert replicate_key("lr1e-4_s0") == replicate_key("lr1e-4_s1") == "lr1e-4"
    assert replicate_key("batch.prompts=32,seed=2") == "batch.prompts=32"
    assert replicate_key("base-seed1") == "base"
    for name in ("qwen3_14b_gsm8k_grpo_josancamon", "ppo_resp256", "bs16", "s1"):
        assert replicate_key(name) is None


def test_grid_view_sees_only_the_past() -> None:
    runs = grid(0.8, 0.5)
    seen: list[float] = []

    def spy(runs_: object, budget: float) -> object:
        def policy(view: GridView) -> dict[str, str]:
            seen.append(max(float(r.x[-1]) for r in view.runs.values()))
            assert all(float(r.x[-1]) <= view.x_now for r in view.runs.values())
            return {}

        return policy

    replay("spy", runs, spy)  # type: ignore[arg-type]
    assert seen == sorted(seen) and seen[-1] == 230.0


def test_engine_csv_columns_are_detected(tmp_path: Path) -> None:
    """The engine writes step, train_device_hours, ..., pass_rate: compute is the device-hours, y the pass rate."""
    from rl_core.scaling.measure.curves_io import read_curve_table

    path = tmp_path / "run.csv"
    path.write_text("step,train_device_hours,train_flops,pass_rate,entropy\n0,0,0,0.2,1.0\n25,0.01,1e10,0.5,0.9\n")
    table = read_curve_table(path)
    assert (table.default_x(), table.default_y()) == ("train_device_hours", "pass_rate")


PUBLIC_GRIDS = Path(__file__).resolve().parents[2] / "fixtures" / "public_grids"

#: Held-out grids where scalerl's pick ends more than 0.005 below the grid's best (docs/decisions.md says why), kept
#: as strict expected failures so that a fix shows up. The calibrated comparison fixed three: grpo_math1p5b
#: prompt (compute 0.75), speed_rl_math500 1p5b_dapo17k (regret 0.012) and speed_rl_dapo1k 7b_dapo17k (regret 0.011).
KNOWN_LOSSES = {
    ("grpo_math1p5b", "off_policy_50"): "regret 0.019: the early leader is kept at the rung and plateaus lower",
    ("speed_rl_math500", "1p5b_numina_rloo"): "compute 0.64: the stopped run is resumed after the leader collapses "
    "(regret 0.132 -> 0)",
    ("speed_rl_math500", "1p5b_numina_dapo"): "compute 0.97: the stopped run is resumed once the leader has fallen "
    "(regret 0.101 -> 0) and both go on nearly to the end",
    ("speed_rl_math500", "7b_deepscaler"): "regret 0.013: a run stopped early overtakes the pick late",
    ("speed_rl_dapo1k", "1p5b_dapo17k"): "compute 0.63 after resumes (0.40 without them)",
    ("speed_rl_dapo1k", "1p5b_numina_dapo"): "compute 0.62: both runs go to the end",
    ("cs336_grpo_math1p5b", "lr"): "regret 0.036: the best learning rate is stopped at 10% of the budget, behind a "
    "faster-rising one at equal compute, and overtakes it later",
    ("cs336_grpo_math1p5b", "std_norm"): "compute 0.63: two runs within 0.02 of each other go on past half the budget",
    ("cs336_grpo_math1p5b", "prompt"): "compute 0.66: a run starting at 0.57 against one starting at 0.04",
    ("cs336_olmo_gsm8k", "loss"): "compute 0.74: five recipes of four seeds end within 0.03 of each other, and "
    "gaps within the seeds' spread stop nothing (regret 0.031 without seed_z)",
    ("cs336_olmo_gsm8k", "std_norm"): "compute 0.76: two recipes of four seeds whose seeds overlap",
    ("cs336_olmo_gsm8k", "lr"): "compute 0.60 (just under on the raw posterior): the calibrated comparison's wider "
    "bands keep the seeds of the slower learning rates until 60% of the budget",
    ("soft_grpo", "7b"): "compute 0.77 at regret 0 (0.58 at regret 0.0013 while the rung stopped it): the leader "
    "by forecast, whose ceiling sits on the bound, is no longer stopped by successive halving at 11% of the budget; "
    "it ends best",
    ("cs336_grpo_math1p5b", "length_norm"): "compute 0.73 at regret 0 (0.44 while the rung stopped it): "
    "batch_token_mean, the leader by forecast at 11% of the budget, is no longer stopped by the rung there; stopped "
    "later as behind, it is resumed when its forecast passes the leader's and ends 0.015 below it",
}


def _public_ablations() -> list[object]:
    """Every public study's ablations (tests/fixtures/public_grids): held out, replayed after the rules were set."""
    out: list[object] = []
    for manifest in sorted(PUBLIC_GRIDS.glob("*/ablations.json")):
        study = manifest.parent.name
        for name in sorted(json.loads(manifest.read_text())):
            reason = KNOWN_LOSSES.get((study, name))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(study, name, marks=marks, id=f"{study}-{name}"))
    return out


def test_every_public_study_is_replayed() -> None:
    studies = {m.parent.name for m in PUBLIC_GRIDS.glob("*/ablations.json")}
    assert {"grpo_math1p5b", "deep_grpo_gsm8k", "speed_rl_math500", "speed_rl_dapo1k", "cs336_grpo_math1p5b"} <= studies
    assert {"soft_grpo", "cs336_olmo_gsm8k"} <= studies
    assert {s for s, _ in KNOWN_LOSSES} <= studies


@pytest.mark.parametrize(("study", "ablation"), _public_ablations())
def test_public_ablations_are_decided_without_losing_the_best(study: str, ablation: str) -> None:
    root = PUBLIC_GRIDS / study
    axes = json.loads((root / "study.json").read_text()) if (root / "study.json").is_file() else {}
    members = json.loads((root / "ablations.json").read_text())[ablation]
    runs = load_grid([root / m for m in members], axes.get("x", "step"), axes.get("y", "pass_rate"))
    r = replay("scalerl", runs, scalerl_policy())
    assert r.regret <= 0.005, r.to_dict()
    assert r.compute < 0.6, r.to_dict()
