"""scalerl's stop decisions as an Optuna pruner (``pip install 'scalerl[integrations]'``, or ``optuna`` alone).

Each trial of a maximising study is a run: ``trial.report(pass_rate, step)`` with ``step`` its cumulative compute
(any integer unit: steps, samples, tokens; or map it with ``compute=``). At a trial's ``trial.should_prune()`` the
pruner builds the study's grid from every trial's intermediate values (running trials live, completed ones
completed, pruned ones stopped) and asks :func:`rl_core.scaling.decide.grid_decisions.assess_grid` -- the decision the
service runs for ``auto_stop`` and ``scalerl replay`` replays -- whether this trial should stop. Trials with the same
``params`` (or the same ``user_attrs["scalerl_recipe"]``) are seeds of one recipe and never stop each other.

Fits are incremental (:class:`~rl_core.scaling.fit.grid_fit.IncrementalGridFit`, one per study): a trial is fitted once
per state of its values, as one run of the study's grid against the other trials as they are then, and that fit is
reused while its values do not change, so a report refits the reporting trial alone and a finished trial is never
refitted. A from-scratch grid fit would also refit the trials that did not report (their shape prior comes from
their siblings, as they are now); the decision can differ from a from-scratch one only through those kept fits. No
decision is made where none could stop the trial (before the policy's ``min_fraction`` of the budget, unless
observed-value rules or a low ``compute_target`` are set).

Each decision is written to the asking trial's system attributes in the study's storage (so an RDB study keeps
them): :data:`DECISION_ATTR` (the newest decision) and, when it prunes, :data:`PRUNED_ATTR`; :func:`stored_decision`
reads them back from a :class:`~optuna.trial.FrozenTrial` (``study.trials``). Optuna 5 dropped ``Trial.
set_system_attr`` but keeps the storage's ``set_trial_system_attr`` (what its ``SuccessiveHalvingPruner`` writes its
rungs with) and ``FrozenTrial.system_attrs``, with no deprecation warning.

Differences from the service, by Optuna's design: a pruned trial cannot be resumed, so scalerl's *resume* advice is
not taken; decisions are made per trial when it asks, on what the study holds at that moment.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rl_core.scaling.decide.compute_target import effective_policy
from rl_core.scaling.decide.grid_decisions import GridFitter, GridRun, RunStatus, assess_grid
from rl_core.scaling.decide.policy import Policy
from rl_core.scaling.decide.recommend import Recommendation
from rl_core.scaling.decide.rules import Rules
from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.grid_fit import IncrementalGridFit
from rl_core.scaling.fit.model import FloatArray

try:
    import optuna
    from optuna.trial import FrozenTrial, TrialState
except ImportError as exc:  # an optional extra
    raise ImportError(
        "scalerl's Optuna pruner needs optuna: pip install 'scalerl[integrations]' (or pip install optuna)"
    ) from exc

__all__ = ["DECISION_ATTR", "PRUNED_ATTR", "RECIPE_ATTR", "ScalerlPruner", "stored_decision"]

#: A trial's user attribute naming its recipe (seeds of one recipe share it); default: its ``params``.
RECIPE_ATTR = "scalerl_recipe"
#: The trial's system attribute holding the pruner's newest decision on it (a JSON object, see :func:`_record`).
DECISION_ATTR = "scalerl:decision"
#: The trial's system attribute holding the decision that pruned it (the same object), written only when it prunes.
PRUNED_ATTR = "scalerl:pruned"
#: Assessments kept for reuse (one per distinct state of the study's values: trials asking at once share one).
_CACHE = 64


@dataclass
class _StudyCache:
    """What the pruner keeps per study: the incremental fits and the recent assessments."""

    fits: IncrementalGridFit
    assessed: OrderedDict[bytes, dict[int, Recommendation]] = field(default_factory=OrderedDict)


class ScalerlPruner(optuna.pruners.BasePruner):
    """Prune a trial when scalerl's grid decision says stop.

    ``budget``: the compute every trial runs to (the unit of ``compute(step)``). ``compute``: Optuna step -> compute
    (default: the step itself). ``policy``: the decision's thresholds (:class:`~rl_core.scaling.decide.policy.Policy`,
    the service's defaults but ``min_live=0``). ``interval``: decide at a trial's every ``interval``-th
    report only (its report count a multiple of it; between, ``should_prune()`` answers False at once), as
    ``MedianPruner(interval_steps=...)``; 1 (the default) decides at every report. ``store_decisions``: write every
    decision to the trial's system attributes (:data:`DECISION_ATTR`; False: only the pruning one,
    :data:`PRUNED_ATTR` and :data:`DECISION_ATTR`). ``fitter``: fit the whole study at every new state with this
    instead (a :data:`~rl_core.scaling.decide.grid_decisions.GridFitter`; default: incremental grid fits, see the
    module docstring). Values must be pass rates in [0, 1] and the study must maximise them.
    """

    def __init__(
        self,
        budget: float,
        *,
        compute: Callable[[int], float] | None = None,
        policy: Policy | None = None,
        interval: int = 1,
        store_decisions: bool = True,
        fitter: GridFitter | None = None,
    ) -> None:
        if not (np.isfinite(budget) and budget > 0):
            raise ValueError(f"budget must be a finite compute > 0, got {budget}")
        if int(interval) != interval or interval < 1:
            raise ValueError(f"interval must be an integer >= 1, got {interval}")
        self.budget = float(budget)
        self.compute = compute or float
        self.policy = policy or Policy(min_live=0)
        self.interval = int(interval)
        # Below this compute no decision can stop a trial (nothing stops before the policy's min_fraction of the
        # budget but the observed-value rules and a low compute target's schedule): answered without deciding.
        pol = effective_policy(self.policy)
        early = pol.rules == Rules() and pol.target_start is None
        self._no_stop_below = pol.min_fraction * self.budget if early else None
        self.store_decisions = store_decisions
        self.fitter = fitter
        self.decisions = 0
        """Decisions made (assessments of a new state of a study; answers to trials asking at once are shared)."""
        self.fit_seconds = 0.0
        """Wall time spent fitting (inside the decisions)."""
        self.decide_seconds = 0.0
        """Wall time spent deciding, fits included."""
        self._stop_rules: dict[int, str] = {}  # trials this pruner stopped, with the rule (what the service keeps)
        self._studies: weakref.WeakKeyDictionary[Any, dict[int, _StudyCache]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self.reasons: dict[int, str] = {}
        """Why each pruned trial was pruned (trial number -> the decision's reason), in this process; the study's
        storage keeps them too (:func:`stored_decision`)."""

    @property
    def fits(self) -> int:
        """Trial fits made so far, over every study (the incremental fitter's; 0 with a ``fitter`` of your own)."""
        return sum(c.fits.fits for caches in self._studies.values() for c in caches.values())

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        if study.direction != optuna.study.StudyDirection.MAXIMIZE:
            raise ValueError("ScalerlPruner needs a study that maximises a pass rate (direction='maximize')")
        if not trial.intermediate_values:
            return False
        with self._lock:  # study.optimize(n_jobs=...) asks from several threads
            return self._prune(study, trial)

    def _cache(self, study: optuna.study.Study) -> _StudyCache:
        per_storage = self._studies.setdefault(study._storage, {})
        found = per_storage.get(study._study_id)
        if found is None:
            found = per_storage[study._study_id] = _StudyCache(IncrementalGridFit())
        return found

    def _prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        runs = self._grid(study.get_trials(deepcopy=False), trial)
        mine = next((r for r in runs if r.run_id == str(trial.number)), None)
        if mine is None or mine.status != "live" or mine.x.size % self.interval:
            return False
        if self._no_stop_below is not None and float(mine.x[-1]) < self._no_stop_below:
            return False
        cache = self._cache(study)
        key = b"#".join(_key(r) for r in runs)
        answer = cache.assessed.get(key)
        if answer is None:
            numbers = [int(r.run_id) for r in runs]
            fit = self.fitter or (lambda curves: cache.fits.fit(numbers, curves))

            def timed(curves: Sequence[tuple[FloatArray, FloatArray]]) -> list[CurveFit]:
                started = time.perf_counter()
                try:
                    return fit(curves)
                finally:
                    self.fit_seconds += time.perf_counter() - started

            started = time.perf_counter()
            recs = assess_grid(runs, self.policy, timed).recommendations
            self.decide_seconds += time.perf_counter() - started
            answer = {int(r.run_id): r for r in recs}
            cache.assessed[key] = answer
            if len(cache.assessed) > _CACHE:
                cache.assessed.popitem(last=False)
            self.decisions += 1
        rec = answer[trial.number]
        stop = rec.action == "stop"
        if self.store_decisions or stop:
            record = _record(rec, answer, trial.last_step, float(mine.x[-1]))
            study._storage.set_trial_system_attr(trial._trial_id, DECISION_ATTR, record)
            if stop:
                study._storage.set_trial_system_attr(trial._trial_id, PRUNED_ATTR, record)
        if not stop:
            return False
        self._stop_rules[trial.number] = rec.rule
        self.reasons[trial.number] = rec.reason
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
            rule = self._stop_rule(t) if status == "stopped" else None
            runs.append(
                GridRun(
                    str(t.number), x, y, status, self.budget, f"trial {t.number}", config=_recipe(t), stop_rule=rule
                )
            )
        return runs

    def _stop_rule(self, t: FrozenTrial) -> str | None:
        """The rule that pruned a trial: this process's, else what the storage holds (another process pruned it)."""
        rule = self._stop_rules.get(t.number)
        if rule is None:
            stored = t.system_attrs.get(PRUNED_ATTR)
            rule = stored.get("rule") if isinstance(stored, dict) else None
        return rule or None

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


def stored_decision(trial: FrozenTrial, pruned: bool = False) -> dict[str, Any] | None:
    """The pruner's newest decision on ``trial`` as its study's storage holds it (``pruned=True``: the decision that
    pruned it), or ``None``: a dict with ``step``, ``compute``, ``action``, ``rule``, ``reason``, ``forecast`` (the
    trial's value at the budget, median), ``band`` ([lo, hi] of that forecast), ``leader`` (the leading trial's number),
    ``leader_forecast``, ``p_below`` (P(value at budget below the strongest rival's minus the margin)) and
    ``expected_gain`` (over the leader); numbers the decision did not reach are ``None``."""
    found = trial.system_attrs.get(PRUNED_ATTR if pruned else DECISION_ATTR)
    return found if isinstance(found, dict) else None


def _record(rec: Recommendation, answer: dict[int, Recommendation], step: int | None, x: float) -> dict[str, Any]:
    """What is stored of a decision (JSON: non-finite numbers become ``None``)."""
    n = rec.numbers
    leader = next((k for k, r in answer.items() if r.rule == "leader"), None)
    lead_forecast = None if leader is None else answer[leader].numbers.get("V_budget")
    return {
        "step": step,
        "compute": _finite(x),
        "action": rec.action,
        "rule": rec.rule,
        "reason": rec.reason,
        "forecast": _finite(n.get("V_budget")),
        "band": [_finite(n.get("V_lo")), _finite(n.get("V_hi"))],
        "leader": leader,
        "leader_forecast": _finite(lead_forecast if lead_forecast is not None else n.get("leader_V_budget")),
        "p_below": _finite(n.get("p_below")),
        "expected_gain": _finite(n.get("expected_gain_over_leader")),
    }


def _finite(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _recipe(t: FrozenTrial) -> str | None:
    """Trials of one recipe (seeds) share this: the user attribute :data:`RECIPE_ATTR`, else their ``params``."""
    named: Any = t.user_attrs.get(RECIPE_ATTR)
    if named is not None:
        return str(named)
    return repr(sorted(t.params.items())) if t.params else None


def _key(r: GridRun) -> bytes:
    return f"{r.run_id}|{r.status}|{r.config}|{r.stop_rule}|".encode() + r.x.tobytes() + b"|" + r.y.tobytes()
