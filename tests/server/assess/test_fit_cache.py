"""The full-fit cache is keyed on what the fit reads (a run's pass-rate points and the fit options): points that
carry only other metrics neither refit a curve, nor store a new full snapshot, nor publish new recommendations
or alerts; a new pass-rate point does."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from rl_core.scaling.fit.summary import summarize
from server.lifecycle.spec import ExperimentSpec
from server.store.alert_models import Alert
from server.store.models import Experiment, FitSnapshot, RecommendationSnapshot, Run, StoredAssessment
from tests.server.conftest import Service
from tests.server.helpers import curve_points, sweep_doc


def _counts(service: Service) -> dict[str, int]:
    with service.ctx.sessions() as session:
        return {
            "full_snapshots": session.scalar(select(func.count()).where(FitSnapshot.kind == "full")) or 0,
            "recommendations": session.scalar(select(func.count()).select_from(RecommendationSnapshot)) or 0,
            "alerts": session.scalar(select(func.count()).select_from(Alert)) or 0,
            "assessment_version": session.scalar(select(func.max(StoredAssessment.version))) or 0,
        }


@pytest.fixture
def fits(service: Service, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every full fit the cache computes (single-run and joint)."""
    pool = service.ctx.cache._pool
    calls: list[str] = []
    full, grid = pool.full_fit, pool.grid_fit

    def full_fit(*args: Any) -> Any:
        calls.append("full")
        return full(*args)

    def grid_fit(*args: Any) -> Any:
        calls.append("grid")
        return grid(*args)

    monkeypatch.setattr(pool, "full_fit", full_fit)
    monkeypatch.setattr(pool, "grid_fit", grid_fit)
    return calls


def _post(service: Service, run_id: int, points: list[dict[str, Any]]) -> None:
    r = service.client.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points}, headers=service.write)
    assert r.status_code == 200 and r.json()["accepted"] == len(points), r.text


@pytest.mark.parametrize("policy", ["recommend", "auto_stop"])
def test_other_metrics_do_not_refit_resnapshot_or_realert_an_unchanged_curve(
    service: Service, fits: list[str], policy: str
) -> None:
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(policy={"mode": policy}), headers=service.write)
    runs = [r["id"] for r in exp.json()["runs"]]
    for run_id, a in zip(runs, (0.65, 0.45), strict=True):
        _post(service, run_id, curve_points(A=a, n=30, seed=run_id))
    service.drain()
    # Under auto_stop the first assessment moved a run to stopping: a new state, assessed once more when read.
    exp_id = exp.json()["id"]
    assert service.client.get(f"/api/v1/experiments/{exp_id}/assessment", headers=service.read).status_code == 200
    service.drain()
    before, n_fits = _counts(service), len(fits)
    assert before["full_snapshots"] >= 2 and before["recommendations"] >= 1 and n_fits >= 1

    last = curve_points(A=0.65, n=30)[-1]
    extra = [
        {"step": last["step"] + i, "compute": last["compute"] + i, "metrics": {"loss": 0.1, "train/entropy": 1.0}}
        for i in (1, 2, 3)
    ]
    _post(service, runs[0], extra)
    service.drain()
    assert fits[n_fits:] == [], "an unchanged pass-rate curve was refitted"
    assert _counts(service) == before, "an unchanged curve was re-snapshotted, re-decided or re-alerted"
    chart = service.client.get(f"/api/v1/dashboard/experiments/{exp.json()['id']}/chart", headers=service.read)
    assert chart.status_code == 200 and fits[n_fits:] == []  # the pages read the same cached fits

    _post(service, runs[0], [{"step": last["step"] + 10, "compute": last["compute"] + 10, "pass_rate": 0.6}])
    service.drain()
    after = _counts(service)
    assert len(fits) > n_fits and after["full_snapshots"] > before["full_snapshots"]
    assert after["recommendations"] > before["recommendations"]


def test_a_guard_rule_on_a_metric_decides_again_without_refitting(service: Service, fits: list[str]) -> None:
    policy = {"mode": "recommend", "guards": [{"metric": "train/entropy", "max_value": 5.0}]}
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(policy=policy), headers=service.write)
    runs = [r["id"] for r in exp.json()["runs"]]
    for run_id, a in zip(runs, (0.65, 0.45), strict=True):
        _post(service, run_id, curve_points(A=a, n=30, seed=run_id))
    service.drain()
    before, n_fits = _counts(service), len(fits)
    last = curve_points(A=0.65, n=30)[-1]
    _post(
        service,
        runs[0],
        [{"step": last["step"] + 1, "compute": last["compute"] + 1, "metrics": {"train/entropy": 9.0}}],
    )
    service.drain()
    after = _counts(service)
    assert fits[n_fits:] == [] and after["full_snapshots"] == before["full_snapshots"]
    assert after["assessment_version"] == before["assessment_version"] + 1  # the guard reads the new metric
    assert after["recommendations"] == before["recommendations"]  # the same advice is not stored twice


def test_a_grid_run_snapshot_follows_the_joint_fit(service: Service) -> None:
    """In a grid-fitted experiment a sibling's new points move every run's joint fit: the finished run's stored
    snapshot (what its table row shows) is refreshed to the fit the decision uses, not left at its own last points."""
    exp = service.client.post("/api/v1/experiments", json=sweep_doc(), headers=service.write).json()
    a, b = (r["id"] for r in exp["runs"])
    _post(service, a, curve_points(A=0.65, n=30, seed=a))
    b_points = curve_points(A=0.45, n=30, seed=b)
    _post(service, b, b_points[:12])
    service.drain()

    def latest(run_id: int) -> FitSnapshot:
        with service.ctx.sessions() as session:
            snap = session.scalars(
                select(FitSnapshot)
                .where(FitSnapshot.run_id == run_id, FitSnapshot.kind == "full")
                .order_by(FitSnapshot.id.desc())
            ).first()
            assert snap is not None
            return snap

    first = latest(a).id
    _post(service, b, b_points[12:])  # only b's points change
    service.drain()
    snap = latest(a)
    assert snap.id > first, "run a's snapshot was not refreshed after the joint fit moved"
    with service.ctx.sessions() as session:
        experiment = session.get(Experiment, exp["id"])
        run = session.get(Run, a)
        assert experiment is not None and run is not None
        current = service.ctx.cache.get(session, run, ExperimentSpec.of(experiment))
    # the stored A is the fit's one posterior summary (the median inside its interval), as every page shows it
    assert current.params is not None and snap.A == pytest.approx(summarize(current).value("A"))
