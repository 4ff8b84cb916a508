"""``ScalerlPruner`` fits incrementally (a trial is refitted only when its values change), decides as a from-scratch
refit does on a small study, stores its reasons in the study's storage (read back from a fresh process on SQLite) and
works under ``study.optimize(n_jobs=2)``."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from rl_core.scaling.fit import grid_fit  # noqa: E402
from rl_core.scaling.fit.grid_fit import IncrementalGridFit, fit_grid  # noqa: E402
from rl_core.scaling.measure.replay import RunCurve  # noqa: E402
from scalerl.integrations.optuna_pruner import (  # noqa: E402
    DECISION_ATTR,
    PRUNED_ATTR,
    ScalerlPruner,
    stored_decision,
)

BUDGET = 200


def _curves(n: int = 5, seed: int = 7) -> list[RunCurve]:
    """``n`` runs of one schedule (x = 10 ... 200): ceilings from 0.35 to 0.72, evaluation noise 0.01."""
    rng = np.random.default_rng(seed)
    x = np.arange(10.0, 210.0, 10.0)
    out = []
    for i, ceiling in enumerate(np.linspace(0.35, 0.72, n)):
        y = 0.05 + (ceiling - 0.05) / (1.0 + (60.0 / x) ** 1.6) + rng.normal(0.0, 0.01, x.size)
        out.append(RunCurve(f"run{i}", x, np.clip(y, 0.0, 1.0)))
    return out


def _quiet() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def _one_by_one(pruner: ScalerlPruner, runs: list[RunCurve], on_trial: Callable[[int], None] | None = None) -> Any:
    """Each run a trial, one after another (step = compute); every decision is read back from the storage."""
    _quiet()
    study = optuna.create_study(direction="maximize", pruner=pruner)
    decisions: list[tuple[int, int, str, str, float | None]] = []
    for k, run in enumerate(runs):
        if on_trial is not None:
            on_trial(k)
        trial = study.ask()
        trial.set_user_attr("scalerl_recipe", run.name)
        pruned = False
        for i, (x, y) in enumerate(zip(run.x, run.y, strict=True)):
            trial.report(float(y), int(x))
            if i + 1 < run.x.size:
                pruned = trial.should_prune()
                got = stored_decision(study._storage.get_trial(trial._trial_id))
                if x < 0.1 * BUDGET and pruner._no_stop_below is not None:
                    assert got is None and not pruned  # before the policy's min_fraction nothing can stop it
                    continue
                assert got is not None and got["step"] == int(x)
                decisions.append((k, int(x), got["action"], got["rule"], got["forecast"]))
                if pruned:
                    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                    break
        if not pruned:
            study.tell(trial, float(run.y[-1]))
    study.decisions = decisions
    return study


@pytest.fixture
def counted_fits(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[np.ndarray]]:
    """Every run fit the grid fitters make (each run's fit is one ``fit_prepared`` call in grid_fit), by its y."""
    calls: list[np.ndarray] = []
    real = grid_fit.fit_prepared

    def counting(x: Any, y: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(np.asarray(y, dtype=np.float64).copy())
        return real(x, y, *args, **kwargs)

    monkeypatch.setattr(grid_fit, "fit_prepared", counting)
    yield calls


def _owner(y: np.ndarray, runs: list[RunCurve]) -> int:
    """Which run a fitted curve is a prefix of."""
    owners = [k for k, r in enumerate(runs) if y.size <= r.y.size and np.array_equal(r.y[: y.size], y)]
    assert len(owners) == 1, "curves of the test are distinct from their first point"
    return owners[0]


def test_a_trial_whose_values_did_not_change_is_not_refit(counted_fits: list[np.ndarray]) -> None:
    runs = _curves(4)
    started: list[int] = []
    pruner = ScalerlPruner(BUDGET, policy=None)
    study = _one_by_one(pruner, runs, on_trial=lambda k: started.append(len(counted_fits)))
    started.append(len(counted_fits))
    assert len(counted_fits) == pruner.fits
    after_end = [0] * len(runs)
    for k in range(len(runs)):
        during = [_owner(y, runs) for y in counted_fits[started[k] : started[k + 1]]]
        # While trial k runs, only trial k's new values are fitted, and the trial before it once: its last values
        # (reported as it finished, with no question after them). And the first trial, fitted alone, is refitted
        # as one run of a grid once there is a second (its two kept states: the newest and the one before it,
        # which the hold rule asks for).
        others = [j for j in during if j != k]
        assert set(others) <= {0, k - 1}, (k, during)
        for j in others:
            after_end[j] += 1
        reports = sum(1 for d in study.decisions if d[0] == k)
        assert during.count(k) <= reports + 1  # each new state once (and the one before it, for the hold)
    assert after_end[0] <= 3 and all(n <= 1 for n in after_end[1:]), after_end
    # A refit of the whole study at every report fits every trial at every report.
    counted_fits.clear()
    scratch = ScalerlPruner(BUDGET, fitter=fit_grid)
    _one_by_one(scratch, runs)
    assert len(counted_fits) > 2 * pruner.fits  # 190 against 79 when written; the gap grows with the trials


def test_a_repeated_question_is_answered_without_a_fit_or_a_decision(counted_fits: list[np.ndarray]) -> None:
    _quiet()
    pruner = ScalerlPruner(BUDGET)
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trials = [study.ask() for _ in range(3)]
    for step in (30, 40, 50, 60, 70):
        for k, t in enumerate(trials):
            t.report(0.1 + 0.1 * k * step / 70, step)
        fits, decisions = len(counted_fits), pruner.decisions
        answers = [t.should_prune() for t in trials]
        assert answers == [t.should_prune() for t in trials]  # the same state again: the same answers
        assert len(counted_fits) - fits <= 2 * len(trials)  # the new state and the hold's, once
        assert pruner.decisions - decisions == 1  # the trials asking at once share one decision


@pytest.mark.parametrize("order", [1, -1])
def test_incremental_decisions_equal_a_from_scratch_refit_on_a_small_study(order: int) -> None:
    runs = _curves(5)[::order]
    incremental = _one_by_one(ScalerlPruner(BUDGET), runs).decisions
    scratch = _one_by_one(ScalerlPruner(BUDGET, fitter=fit_grid), runs).decisions
    assert [d[:4] for d in incremental] == [d[:4] for d in scratch]
    # The asking trial's own fit is made against its siblings as they are: its forecast is the from-scratch one.
    for a, b in zip(incremental, scratch, strict=True):
        assert (a[4] is None and b[4] is None) or math.isclose(a[4], b[4], rel_tol=1e-12, abs_tol=1e-12)
    if order == -1:
        assert any(d[2] == "stop" for d in incremental)  # the best runs first: the others are pruned


def test_an_unchanged_run_keeps_its_fit_and_a_changed_one_is_fitted_as_fit_grid_fits_it() -> None:
    runs = _curves(4)
    inc = IncrementalGridFit()
    first = inc.fit(list(range(4)), [(r.x[:10], r.y[:10]) for r in runs])
    assert inc.fits == 4
    grown = [(r.x[:10], r.y[:10]) for r in runs[:3]] + [(runs[3].x[:11], runs[3].y[:11])]
    again = inc.fit(list(range(4)), grown)
    assert inc.fits == 5
    assert all(a is b for a, b in zip(first[:3], again[:3], strict=True))
    scratch = fit_grid(grown)[3]
    assert again[3].params == scratch.params
    np.testing.assert_array_equal(again[3].samples.A, scratch.samples.A)  # type: ignore[union-attr]


def test_questions_before_any_stop_is_possible_are_answered_as_the_decision_would() -> None:
    runs = _curves(5)[::-1]
    shortcut = ScalerlPruner(BUDGET)
    decided = ScalerlPruner(BUDGET)
    decided._no_stop_below = None  # decide at every report
    a = _one_by_one(shortcut, runs)
    b = _one_by_one(decided, runs)
    assert [t.state for t in a.trials] == [t.state for t in b.trials]
    assert [t.last_step for t in a.trials] == [t.last_step for t in b.trials]
    assert decided.decisions > shortcut.decisions


def test_interval_decides_at_every_kth_report_only() -> None:
    pruner = ScalerlPruner(BUDGET, interval=3, store_decisions=True)
    _quiet()
    study = optuna.create_study(direction="maximize", pruner=pruner)
    trial = study.ask()
    asked: list[int | None] = []
    for i, step in enumerate(range(10, 110, 10)):
        trial.report(0.2 + 0.001 * step, step)
        trial.should_prune()
        got = stored_decision(study._storage.get_trial(trial._trial_id))
        asked.append(None if got is None else got["step"])
        assert pruner.decisions == (i + 1) // 3
    assert asked[-1] == 90 and asked[1] is None
    with pytest.raises(ValueError, match="interval"):
        ScalerlPruner(BUDGET, interval=0)


def _toy(trial: optuna.Trial) -> float:
    """The docs' toy: the best lr is 1e-5; noise of a few hundred prompts."""
    lr = trial.suggest_float("lr", 1e-6, 1e-4, log=True)
    ceiling = 0.75 - 0.3 * abs(math.log10(lr) + 5.0)
    noise = random.Random(trial.number)
    pass_rate = 0.0
    for step in range(20, 401, 20):
        pass_rate = 0.05 + (ceiling - 0.05) / (1.0 + (120.0 / step) ** 1.5) + noise.gauss(0.0, 0.01)
        trial.report(pass_rate, step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return pass_rate


_READ_BACK = """
import json, sys
import optuna
study = optuna.load_study(study_name=sys.argv[2], storage=sys.argv[1])
print(json.dumps({t.number: [t.state.name, t.system_attrs.get("scalerl:pruned"), t.system_attrs.get("scalerl:decision")]
                  for t in study.trials}))
"""


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_reasons_land_in_a_sqlite_study_and_a_fresh_process_reads_them(tmp_path: Path, n_jobs: int) -> None:
    _quiet()
    url = f"sqlite:///{tmp_path / 'study.db'}"
    pruner = ScalerlPruner(400)
    study = optuna.create_study(
        study_name="toy",
        storage=url,
        direction="maximize",
        pruner=pruner,
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    study.optimize(_toy, n_trials=8, n_jobs=n_jobs)
    states = [t.state for t in study.trials]
    assert set(states) <= {optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED}
    assert states.count(optuna.trial.TrialState.PRUNED) >= 1
    out = subprocess.run(
        [sys.executable, "-c", _READ_BACK, url, "toy"], capture_output=True, text=True, check=True, timeout=120
    )
    stored = {int(k): v for k, v in json.loads(out.stdout).items()}
    for t in study.trials:
        state, pruned, decision = stored[t.number]
        assert decision is not None and decision["step"] is not None  # every trial was decided on
        if state == "PRUNED":
            assert pruned is not None and pruned["action"] == "stop"
            assert pruned["reason"] == pruner.reasons[t.number] and pruned["rule"]
            assert pruned == decision  # the pruning decision was the last one
            assert pruned["forecast"] is not None and pruned["leader"] != t.number
            lo, hi = pruned["band"]
            assert lo is not None and hi is not None and lo <= pruned["forecast"] <= hi
        else:
            assert pruned is None and decision["action"] != "stop"
    # A new pruner on the loaded study (another process continuing it) knows why the pruned trials stopped.
    again = ScalerlPruner(400)
    loaded = optuna.load_study(study_name="toy", storage=url, pruner=again)
    last = loaded.trials[-1]
    runs = again._grid(loaded.trials, last)
    rules = {int(r.run_id): r.stop_rule for r in runs if r.status == "stopped"}
    assert rules == {n: pruner._stop_rules[n] for n in rules} and rules


def test_decisions_are_stored_on_an_in_memory_study_and_can_be_left_to_the_pruning_one() -> None:
    _quiet()
    for store in (True, False):
        pruner = ScalerlPruner(400, store_decisions=store)
        study = optuna.create_study(direction="maximize", pruner=pruner, sampler=optuna.samplers.RandomSampler(seed=0))
        study.optimize(_toy, n_trials=6)
        for t in study.trials:
            decision, pruned = t.system_attrs.get(DECISION_ATTR), t.system_attrs.get(PRUNED_ATTR)
            if t.state == optuna.trial.TrialState.PRUNED:
                assert pruned is not None and pruned == decision
            else:
                assert pruned is None and (decision is not None) == store
