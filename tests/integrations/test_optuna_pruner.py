"""Optuna, natively: ``ScalerlPruner`` prunes an Optuna study with scalerl's grid decision, replayed through
Optuna itself it stops the runs ``scalerl replay`` stops, and the docs' example runs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

optuna = pytest.importorskip("optuna")

from rl_core.scaling.measure.replay import RunCurve, replay, scalerl_policy  # noqa: E402
from scalerl.integrations.optuna_pruner import ScalerlPruner  # noqa: E402
from scalerl.integrations.optuna_replay import replay_scalerl_pruner  # noqa: E402

DOCS = Path(__file__).parents[2] / "docs" / "integrations.md"


def _doc_example() -> str:
    text = DOCS.read_text()
    section = text[text.index("## Optuna: the scalerl pruner") :]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, "the Optuna section has no python example"
    return match.group(1)


def test_the_docs_example_runs_and_keeps_the_best_trial(capsys: pytest.CaptureFixture[str]) -> None:
    scope: dict[str, object] = {"__name__": "__doc_example__"}
    exec(compile(_doc_example(), str(DOCS), "exec"), scope)  # the documented example, as a user runs it
    study = scope["study"]
    assert isinstance(study, optuna.Study)
    states = [t.state for t in study.trials]
    pruned = states.count(optuna.trial.TrialState.PRUNED)
    assert 0 < pruned < len(states)
    best = max(_true_final(t.params["lr"]) for t in study.trials)
    assert _true_final(study.best_trial.params["lr"]) >= best - 0.02  # within the toy's evaluation noise
    assert "trials pruned" in capsys.readouterr().out


def _true_final(lr: float) -> float:
    """The docs' toy: a trial's noise-free pass rate at the budget (400)."""
    ceiling = 0.75 - 0.3 * abs(float(np.log10(lr)) + 5.0)
    return float(0.05 + (ceiling - 0.05) / (1.0 + (120.0 / 400.0) ** 1.5))


def _grid() -> list[RunCurve]:
    """Five runs of one schedule: three saturating low, two high (one a shade above the other), with noise."""
    rng = np.random.default_rng(7)
    x = np.arange(10.0, 210.0, 10.0)
    runs = []
    for i, ceiling in enumerate((0.35, 0.40, 0.45, 0.70, 0.72)):
        y = 0.05 + (ceiling - 0.05) / (1.0 + (60.0 / x) ** 1.6) + rng.normal(0.0, 0.01, x.size)
        runs.append(RunCurve(f"run{i}", x, np.clip(y, 0.0, 1.0)))
    return runs


def test_side_by_side_through_optuna_stops_what_scalerl_replay_stops() -> None:
    runs = _grid()
    ours = replay("scalerl", runs, scalerl_policy())
    assert not any(r.resumed_from for r in ours.runs), "a grid with resumes cannot match (Optuna cannot resume)"
    through_optuna = replay_scalerl_pruner(runs, mode="parallel")
    assert [(r.name, r.stopped_at) for r in through_optuna.runs] == [(r.name, r.stopped_at) for r in ours.runs]
    assert (through_optuna.compute, through_optuna.regret) == (ours.compute, ours.regret)
    assert ours.compute < 0.8  # it did stop runs


def test_one_trial_after_another_is_pruned_against_the_finished_ones() -> None:
    result = replay_scalerl_pruner(_grid()[::-1], mode="sequential", orders=1)  # the best runs first
    stopped = {r.name for r in result.runs if r.stopped_at is not None}
    assert {"run0", "run1", "run2"} <= stopped and "run4" not in stopped
    assert result.regret == 0.0


def _study(pruner: ScalerlPruner, direction: str = "maximize") -> Any:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(direction=direction, pruner=pruner)


def test_bad_use_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="budget"):
        ScalerlPruner(budget=0)
    trial = _study(ScalerlPruner(100), "minimize").ask()
    trial.report(0.5, 10)
    with pytest.raises(ValueError, match="maximise"):
        trial.should_prune()
    trial = _study(ScalerlPruner(100)).ask()
    trial.report(12.5, 10)
    with pytest.raises(ValueError, match=r"pass rates in \[0, 1\]"):
        trial.should_prune()


def test_trials_with_the_same_params_are_seeds_of_one_recipe() -> None:
    """Two seeds of one configuration (same ``params``) never stop each other, however far apart they end."""
    pruner = ScalerlPruner(200)
    study = _study(pruner)
    x = np.arange(10, 210, 10)
    for level in (0.7, 0.5):  # the second seed ends 0.2 lower
        trial = study.ask()
        trial.suggest_float("lr", 1e-5, 1e-5)
        for step in x:
            trial.report(float(level / (1.0 + (60.0 / step) ** 1.6)), int(step))
            assert not trial.should_prune()
        study.tell(trial, float(level))
