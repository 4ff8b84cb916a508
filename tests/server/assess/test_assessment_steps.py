"""The assessment's pure steps, with no database: ``decide`` is the library's grid assessment of what ``gather``
read, and ``present`` turns it into what every surface reads; the verdict keeps where it stands as fields."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from rl_core.scaling import CurveFit
from rl_core.scaling.decide.grid_decisions import assess_grid
from rl_core.scaling.fit.model import sigmoid
from server.assess.deciding import decide, grid_runs
from server.assess.fitcache import FitCache
from server.assess.fitpool import FitPool
from server.assess.forecasting import Curve
from server.assess.gather import Gathered
from server.assess.present import present
from server.assess.verdict import at_confidence, undecided
from server.assess.verdict_schemas import VerdictOut, WorkSpreadOut
from server.lifecycle.spec import ExperimentSpec
from server.store.models import Experiment, Run, utcnow

BUDGET = 8000.0
CEILINGS = {"high": 0.8, "low": 0.35, "mid": 0.6}


def _gathered(n: int, statuses: dict[str, str] | None = None, stop_rules: dict[str, str] | None = None) -> Gathered:
    """Three runs with ``n`` evaluations each, built in memory (transient rows: no session, no database)."""
    experiment = Experiment(id=1, name="steps", document={"policy": {"mode": "auto_stop"}})
    spec = ExperimentSpec.of(experiment)
    x = np.linspace(BUDGET / 12, BUDGET * n / 12, n)
    runs, curves = [], {}
    for i, (name, a) in enumerate(CEILINGS.items(), start=1):
        status = (statuses or {}).get(name, "running")
        row = Run(id=i, experiment_id=1, name=name, status=status, budget=BUDGET, compute_used=float(x[-1]))
        row.n_points = row.curve_points = n
        runs.append(row)
        y = sigmoid(x, R0=0.1, A=a, B=1.7, C_mid=2000.0) + np.random.default_rng(i).normal(0, 0.004, n)
        curves[i] = Curve(x, np.clip(y, 0.0, 1.0))
    cache = FitCache(FitPool(0))

    def prefix_fits(points: Sequence[Curve]) -> list[CurveFit]:
        return cache.prefix_fits(points, spec.fit, True)

    fits = dict(zip(curves, prefix_fits([curves[r.id] for r in runs]), strict=True))
    rules = {r.id: (stop_rules or {}).get(r.name) for r in runs}
    return Gathered(
        spec=spec,
        runs=runs,
        state="s",
        data_as_of=utcnow(),
        fits=fits,
        curves=curves,
        metrics={r.id: {} for r in runs},
        recipes={r.id: None for r in runs},
        stop_rules=rules,
        resumes={},
        starts={r.id: float(curves[r.id].compute[0]) for r in runs},
        rates={},
        work="steps",
        units={r.id: "gpu_hours" for r in runs},
        band=None,
        prefix_fits=prefix_fits,
    )


def test_decide_is_the_librarys_grid_assessment_of_what_was_gathered() -> None:
    g = _gathered(8)
    d = decide(g)
    direct = assess_grid(grid_runs(g), g.spec.policy, lambda pts: g.prefix_fits([Curve(*p) for p in pts]),
                         [g.fits[r.id] for r in g.runs])  # fmt: skip
    assert [rec for _, rec in d.runs] == list(direct.recommendations)
    assert d.verdict.order == direct.verdict.order and d.verdict.confidence == direct.verdict.confidence
    assert [run.name for run, _ in d.runs] == ["high", "low", "mid"] and d.band_scale == 1.0


def test_present_ranks_the_runs_and_states_the_verdict_as_fields() -> None:
    g = _gathered(10)
    out = present(g, decide(g))
    assert out == present(g, decide(g))  # pure: the same inputs give the same assessment
    ranks = {e.name: e.rank_at_budget for e in out.runs}
    assert ranks["high"] == 1 and ranks["low"] == 3, ranks
    v = out.verdict
    assert v.best_run_name == "high" and v.state in ("decided", "below") and v.summary is not None
    assert v.reason == f"{v.summary} [{v.reason.removeprefix(v.summary + ' [')}"
    assert v.decided == (v.state == "decided") and (v.decided_by is not None) == v.decided


def test_a_stopped_run_auto_stop_may_resume_is_waited_for_while_the_grid_is_live() -> None:
    g = _gathered(10, statuses={"low": "stopped"}, stop_rules={"low": "dominated"})
    v = present(g, decide(g)).verdict
    assert v.waiting_for == ["low"] and v.state == "waiting" and not v.decided
    assert "[not decided: waiting for low" in v.reason
    done = _gathered(10, statuses={"low": "stopped", "high": "succeeded", "mid": "succeeded"},
                     stop_rules={"low": "dominated"})  # fmt: skip
    assert present(done, decide(done)).verdict.waiting_for == []  # nothing live: the policy cannot resume it


def _stored(**fields: object) -> VerdictOut:
    base = undecided(1, "", False).model_copy(
        update={"best_run_id": 1, "best_run_name": "a", "runner_up_id": 2, "runner_up_name": "b", **fields}
    )
    return base.model_copy(update={"summary": "a forecasts 0.8 vs b's 0.6", "reason": "a forecasts 0.8 vs b's 0.6"})


@pytest.mark.parametrize(
    ("fields", "early", "state", "by"),
    [
        ({"confidence": 0.95}, False, "decided", "confidence"),
        ({"confidence": 0.5}, False, "below", None),
        ({"confidence": 0.5, "others_dominated": True}, False, "decided", "dominance"),
        ({"confidence": 0.95, "waiting_for": ["c"]}, False, "waiting", None),
        ({"confidence": 0.95, "waiting_for": ["c"]}, True, "decided", "confidence"),
        ({"confidence": None, "runner_up_id": None}, False, "no_comparison", None),
    ],
)
def test_where_a_stored_verdict_stands_is_read_into_fields(
    fields: dict[str, object], early: bool, state: str, by: str | None
) -> None:
    v = at_confidence(_stored(**fields), 0.9, decide_early=early)
    assert (v.state, v.decided_by, v.decided, v.decided_early) == (
        state,
        by,
        state == "decided",
        early and by is not None,
    )
    if state != "no_comparison":
        assert v.reason.startswith("a forecasts 0.8 vs b's 0.6 [") and v.reason.count("[") == 1
    again = at_confidence(v, 0.9, decide_early=early)  # re-reading never stacks a second standing
    assert again.reason == v.reason


def test_a_spread_that_could_explain_the_lead_keeps_it_undecided() -> None:
    spread = WorkSpreadOut(ratio=1.5, threshold=1.2, work="steps", work_per_compute={}, best_vs_runner_up=1.5,
                           equal_work_confidence=0.6, warning="w")  # fmt: skip
    v = at_confidence(_stored(confidence=0.95, work_spread=spread), 0.9)
    assert v.state == "work_spread" and not v.decided and "[not decided: the runs' steps per compute unit" in v.reason
    assert at_confidence(v, 0.5).state == "decided"  # at equal work P(higher) = 0.6 clears 0.5


def test_a_verdict_stored_before_the_fields_keeps_its_reason() -> None:
    legacy = _stored(confidence=0.95).model_copy(update={"summary": None, "state": None, "reason": "old [≥ 0.9]"})
    v = at_confidence(legacy, 0.99)
    assert v.state == "below" and not v.decided and v.reason == "old [≥ 0.9]"
