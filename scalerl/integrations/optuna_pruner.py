"""scalerl's stop decisions as an Optuna pruner (``pip install 'scalerl[integrations]'``, or ``optuna`` alone).

Each trial of a maximising study is a run: ``trial.report(pass_rate, step)`` with ``step`` its cumulative compute
(any integer unit: steps, samples, tokens; or map it with ``compute=``). At every ``trial.should_prune()`` the pruner
builds the study's grid from every trial's intermediate values (running trials live, completed ones completed,
pruned ones stopped), fits it and asks :func:`rl_core.scaling.decide.grid_decisions.assess_grid` -- the decision the
service runs for ``auto_stop`` and ``scalerl replay`` replays -- whether this trial should stop. Trials with the same
``params`` (or the same ``user_attrs["scalerl_recipe"]``) are seeds of one recipe and never stop each other.

Differences from the service, by Optuna's design: a pruned trial cannot be resumed, so scalerl's *resume* advice is
not taken; decisions are made per trial when it asks, on what the study holds at that moment.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from rl_core.scaling.decide.grid_decisions import GridFitter, GridRun, RunStatus, assess_grid
from rl_core.scaling.decide.recommend import Policy
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.grid_fit import fit_grid
from rl_core.scaling.fit.model import FloatArray

try:
    import optuna
    from optuna.trial import FrozenTrial, TrialState
except ImportError as exc:  # an optional extra
    raise ImportError(
        "scalerl's Optuna pruner needs optuna: pip install 'scalerl[integrations]' (or pip install optuna)"
    ) from exc

__all__ = ["RECIPE_ATTR", "ScalerlPruner"]

#: A trial's user attribute naming its recipe (seeds of one recipe share it); default: its ``params``.
RECIPE_ATTR = "scalerl_recipe"
#: Assessments kept for reuse (one per distinct state of the study's values).
_CACHE = 64


class ScalerlPruner(optuna.pruners.BasePruner):
    """Prune a trial when scalerl's grid decision says stop.

    ``budget``: the compute every trial runs to (the unit of ``compute(step)``). ``compute``: Optuna step -> compute
    (default: the step itself). ``policy``: the decision's thresholds (:class:`~rl_core.scaling.decide.recommend.
    Policy`, the service's defaults). ``fitter``: how the study's curves are fitted (default: as one grid, as the
    service fits an experiment's runs). Values must be pass rates in [0, 1] and the study must maximise them.
    """

    def __init__(
        self,
        budget: float,
        *,
        compute: Callable[[int], float] | None = None,
        policy: Policy | None = None,
        fitter: GridFitter | None = None,
    ) -> None:
        if not (np.isfinite(budget) and budget > 0):
            raise ValueError(f"budget must be a finite compute > 0, got {budget}")
        self.budget = float(budget)
        self.compute = compute or float
        self.policy = policy or Policy(min_live=0)
        self.fitter = fitter or recent_grid_fits()
        self._stop_rules: dict[int, str] = {}  # trials this pruner stopped, with the rule (what the service keeps)
        self._assessed: OrderedDict[bytes, dict[int, tuple[str, str, str]]] = OrderedDict()
        self._lock = threading.Lock()
        self.reasons: dict[int, str] = {}
        """Why each pruned trial was pruned (trial number -> the decision's reason)."""

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        if study.direction != optuna.study.StudyDirection.MAXIMIZE:
            raise ValueError("ScalerlPruner needs a study that maximises a pass rate (direction='maximize')")
        if not trial.intermediate_values:
            return False
        with self._lock:  # study.optimize(n_jobs=...) asks from several threads
            return self._prune(study, trial)

    def _prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        runs = self._grid(study.get_trials(deepcopy=False), trial)
        mine = next((r for r in runs if r.run_id == str(trial.number)), None)
        if mine is None or mine.status != "live":
            return False
        key = b"#".join(_key(r) for r in runs)
        answer = self._assessed.get(key)
        if answer is None:
            recs = assess_grid(runs, self.policy, self.fitter).recommendations
            answer = {int(r.run_id): (r.action, r.rule, r.reason) for r in recs}
            self._assessed[key] = answer
            if len(self._assessed) > _CACHE:
                self._assessed.popitem(last=False)
        action, rule, reason = answer[trial.number]
        if action != "stop":
            return False
        self._stop_rules[trial.number] = rule
        self.reasons[trial.number] = reason
        return True

    def _grid(self, trials: Sequence[FrozenTrial], current: FrozenTrial) -> list[GridRun]:
        """The study as a grid: every trial with values up to the budget (failed ones left out)."""
        runs = []
        for t in trials:
            if t.number == current.number:
                t = current  # its newest report may not be in the study's list yet
            if t.state == TrialState.FAIL or not t.intermediate_values:
                continue
            x, y = self._curve(t)
            if x.size == 0:
                continue
            status: RunStatus = "live"
            if t.state == TrialState.PRUNED:
                status = "stopped"
            elif t.state == TrialState.COMPLETE or x[-1] >= self.budget:
                status = "completed"  # at its budget: nothing left to save
            rule = self._stop_rules.get(t.number) if status == "stopped" else None
            runs.append(
                GridRun(
                    str(t.number), x, y, status, self.budget, f"trial {t.number}", config=_recipe(t), stop_rule=rule
                )
            )
        return runs

    def _curve(self, t: FrozenTrial) -> tuple[np.ndarray, np.ndarray]:
        steps = sorted(t.intermediate_values)
        x = np.array([self.compute(s) for s in steps], dtype=np.float64)
        y = np.array([t.intermediate_values[s] for s in steps], dtype=np.float64)
        ok = np.isfinite(x) & np.isfinite(y) & (x <= self.budget)
        x, y = x[ok], y[ok]
        if y.size and (y.min() < 0.0 or y.max() > 1.0):
            raise ValueError(
                f"trial {t.number} reported {y[(y < 0) | (y > 1)][0]:g}: ScalerlPruner reads intermediate values as "
                "pass rates in [0, 1]"
            )
        if x.size > 1 and np.any(np.diff(x) <= 0):
            raise ValueError(f"trial {t.number}: compute(step) must increase with the step")
        return x, y


def recent_grid_fits(size: int = _CACHE) -> GridFitter:
    """The service's fit (the runs as one grid, :func:`~rl_core.scaling.fit.grid_fit.fit_grid`, default options),
    remembering the last ``size`` grids: a study's states are never revisited but by the hold rule (the state one
    report earlier) and by trials asking at once, so an unbounded memo would only grow."""
    memo: OrderedDict[bytes, list[CurveFit]] = OrderedDict()

    def fit(curves: Sequence[tuple[FloatArray, FloatArray]]) -> list[CurveFit]:
        key = b"#".join(
            np.asarray(x, np.float64).tobytes() + b"|" + np.asarray(y, np.float64).tobytes() for x, y in curves
        )
        if key not in memo:
            memo[key] = fit_grid(curves)
            if len(memo) > size:
                memo.popitem(last=False)
        memo.move_to_end(key)
        return memo[key]

    return fit


def _recipe(t: FrozenTrial) -> str | None:
    """Trials of one recipe (seeds) share this: the user attribute :data:`RECIPE_ATTR`, else their ``params``."""
    named: Any = t.user_attrs.get(RECIPE_ATTR)
    if named is not None:
        return str(named)
    return repr(sorted(t.params.items())) if t.params else None


def _key(r: GridRun) -> bytes:
    return f"{r.run_id}|{r.status}|{r.config}|".encode() + r.x.tobytes() + b"|" + r.y.tobytes()
