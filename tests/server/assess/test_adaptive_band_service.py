"""The adaptive band in the service: ``fit: {adaptive_band: true}`` scales every run's calibrated band by what the
experiment's own earlier forecasts did (server/assess/adaptive.py), through one path: the fits' ``band_scale``, which
the band and interval the pages show and the draws the grid decisions compare are all drawn with."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from rl_core.scaling import sigmoid
from rl_core.scaling.decide.grid_decisions import value_draws
from rl_core.scaling.fit.calibration import curve_summary, load_calibration
from server.assess import adaptive
from server.assess.assessing import build_assessment
from server.assess.forecasting import BAND_KEY
from server.assess.schemas import AssessmentOut
from server.lifecycle.grid import parse_document
from server.lifecycle.spec import spec_of
from server.store.db import read_session
from server.store.models import FitSnapshot
from tests.server.conftest import Service, make_settings, start_service
from tests.server.helpers import post_points

BUDGET = 8000.0


def _experiment(service: Service, name: str, fit: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name,
        "preset": "scalerl",
        "grid": {"batch.prompts": [16, 24, 32]},
        "seeds": [0],
        "task": "gsm8k",
        "model": "tiny",
        "budget": BUDGET,
        "fit": {"prior": "none", **(fit or {})},
    }
    r = service.client.post("/api/v1/experiments", json=doc, headers=service.write)
    assert r.status_code == 201, r.text
    out: dict[str, Any] = r.json()
    return out


def _points(A: float, lo: float, hi: float, n: int, seed: int, jump: float = 0.0) -> list[dict[str, Any]]:
    """Points of a sigmoid between compute ``lo`` and ``hi``; ``jump`` is added from compute 3000 on (a second rise
    that no forecast made before it could see)."""
    rng = np.random.default_rng(seed)
    c = np.linspace(lo, hi, n)
    y = sigmoid(c, R0=0.2, A=A, B=2.0, C_mid=1200.0) + rng.normal(0, 0.003, n) + np.where(c > 3000.0, jump, 0.0)
    return [
        {"step": int(ci), "compute": float(ci), "pass_rate": float(np.clip(yi, 0.0, 1.0))}
        for ci, yi in zip(c, y, strict=True)
    ]


def _assess(service: Service, experiment_id: int) -> dict[str, Any]:
    r = service.client.get(f"/api/v1/experiments/{experiment_id}/assessment", headers=service.read)
    assert r.status_code == 200, r.text
    service.drain()
    r = service.client.get(f"/api/v1/experiments/{experiment_id}/assessment", headers=service.read)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def _grow(service: Service, exp: dict[str, Any], jump: float) -> None:
    """Three runs: first up to compute 2400 (assessed: full snapshots kept), then on to 6000, ``jump`` higher past
    3000 than any of the earlier forecasts could know."""
    ids = [r["id"] for r in exp["runs"]]
    for k, rid in enumerate(ids):
        post_points(service, rid, _points(0.45 + 0.05 * k, 100.0, 2400.0, 24, seed=k))
    _assess(service, exp["id"])
    for k, rid in enumerate(ids):
        post_points(service, rid, _points(0.45 + 0.05 * k, 2600.0, 6000.0, 18, seed=10 + k, jump=jump))


def _build(service: Service, experiment_id: int, **fit: Any) -> tuple[AssessmentOut, Any, Any]:
    """The experiment's assessment computed now, in process (``fit`` overrides its fit spec)."""
    with read_session(service.ctx.engine) as session:
        spec = spec_of(session, experiment_id)
        if fit:
            spec = replace(spec, fit=spec.fit.model_copy(update=fit))
        out, decided, fits = build_assessment(session, spec, service.ctx.cache)
        return out, decided, fits


def _numbers(out: AssessmentOut) -> list[dict[str, Any]]:
    """Everything of an assessment's runs, verdict and card (not its time stamps, state or band account)."""
    verdict = out.verdict.model_dump(mode="json", exclude={"computed_at", "assessment_version"})
    return [
        *(e.model_dump(mode="json", exclude={"eta_budget_seconds"}) for e in out.runs),
        verdict,
        out.comparison.model_dump(mode="json"),
        out.counts,
    ]


def test_the_option_is_part_of_the_grid_document_and_round_trips(service: Service) -> None:
    base = {"name": "x", "grid": {"batch.prompts": [16, 32]}, "task": "t", "model": "m", "budget": 10.0}
    assert parse_document(base).fit.adaptive_band is False
    doc = parse_document({**base, "fit": {"adaptive_band": True}})
    assert doc.fit.adaptive_band is True
    again = parse_document(doc.model_dump(mode="json"))
    assert again == doc and again.fit.adaptive_band is True
    schema = service.client.get("/openapi.json").json()
    fit_schema = next(s for name, s in schema["components"]["schemas"].items() if name.startswith("FitSpec"))
    prop = fit_schema["properties"]["adaptive_band"]
    assert prop["type"] == "boolean" and prop["default"] is False and "earlier forecast" in prop["description"]
    exp = _experiment(service, "round-trip", {"adaptive_band": True})
    with read_session(service.ctx.engine) as session:
        assert spec_of(session, exp["id"]).fit.adaptive_band is True
    got = service.client.get(f"/api/v1/experiments/{exp['id']}", headers=service.read).json()
    assert got["document"]["fit"]["adaptive_band"] is True


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_a_bad_value_is_a_422_naming_the_option(service: Service, value: object) -> None:
    doc = {
        "name": "bad",
        "grid": {"batch.prompts": [16, 32]},
        "task": "t",
        "model": "m",
        "budget": 10.0,
        "fit": {"adaptive_band": value},
    }
    r = service.client.post("/api/v1/experiments", json=doc, headers=service.write)
    assert r.status_code == 422, r.text
    assert "fit.adaptive_band" in r.text and "boolean" in r.text, r.text


def test_off_the_assessment_is_as_before_and_never_reads_snapshots(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = _experiment(service, "off")
    _grow(service, exp, jump=0.3)
    stored = _assess(service, exp["id"])
    assert stored["adaptive_band"] is None
    assert all("earlier forecasts" not in (r["forecast"] or "") for r in stored["runs"])
    with read_session(service.ctx.engine) as session:  # off: no band kept in the snapshots either
        bodies = session.scalars(select(FitSnapshot.body).where(FitSnapshot.kind == "full")).all()
    assert bodies and all(BAND_KEY not in b for b in bodies)

    def never(*_: object, **__: object) -> None:
        raise AssertionError("the adaptive band is off: its residuals must not be read")

    monkeypatch.setattr("server.assess.gather.experiment_band", never)
    out, _, fits = _build(service, exp["id"])
    assert out.adaptive_band is None and all(f.band_scale == 1.0 for f in fits.values())
    assert _numbers(out) == _numbers(AssessmentOut.model_validate(stored))


def test_on_without_earlier_forecasts_the_multiplier_is_exactly_one(database_url: str, tmp_path: Path) -> None:
    # No background assessment: one after the points would store a full snapshot (an earlier forecast) before this
    # test builds its first.
    with contextmanager(start_service)(make_settings(database_url, tmp_path, interval_refit=False)) as service:
        _fresh_multiplier_is_one(service)


def _fresh_multiplier_is_one(service: Service) -> None:
    exp = _experiment(service, "on-fresh", {"adaptive_band": True})
    ids = [r["id"] for r in exp["runs"]]
    for k, rid in enumerate(ids):
        post_points(service, rid, _points(0.45 + 0.05 * k, 100.0, 2400.0, 24, seed=k))
    service.drain()
    with read_session(service.ctx.engine) as session:
        assert not session.scalars(select(FitSnapshot.id).where(FitSnapshot.kind == "full")).all()
    on, _, _ = _build(service, exp["id"])
    off, _, _ = _build(service, exp["id"], adaptive_band=False)
    band = on.adaptive_band
    assert band is not None and band.scale == 1.0 and band.residuals == 0 and band.forecasts == 0
    assert band.applied and "×1" in band.note
    assert _numbers(on) == _numbers(off)  # bit for bit: the shipped band
    assert off.adaptive_band is None


def test_on_earlier_forecasts_that_missed_widen_the_band_and_the_decisions_draws_alike(service: Service) -> None:
    exp = _experiment(service, "on-missed", {"adaptive_band": True})
    _grow(service, exp, jump=0.05)  # the fits' bands are ~0.05 wide: the earlier forecasts miss by a band or more
    with read_session(service.ctx.engine) as session:
        kept = session.scalars(select(FitSnapshot.body).where(FitSnapshot.kind == "full")).all()
    assert kept and all(BAND_KEY in b for b in kept)
    assert {b[BAND_KEY]["calibration"] for b in kept} == {load_calibration().version}

    stored = _assess(service, exp["id"])
    band = stored["adaptive_band"]
    assert band is not None and band["applied"] is True, band
    assert 1.3 < band["scale"] < 3.0 and band["runs"] == 3 and band["residuals"] > 0 and band["forecasts"] >= 3, band
    assert "wider" in band["note"]
    assert all(f"×{band['scale']:.2f} by this experiment's earlier forecasts" in r["forecast"] for r in stored["runs"])

    out, decided, fits = _build(service, exp["id"])
    assert out.adaptive_band is not None
    k = out.adaptive_band.scale
    assert k == band["scale"]
    assert all(f.band_scale == 1.0 for f in fits.values())  # the fits stored as snapshots stay as fitted
    plain, _, _ = _build(service, exp["id"], adaptive_band=False)
    plain_runs = {e.id: e for e in plain.runs}
    checked = 0
    for i, (run, rec) in enumerate(decided):
        entry = next(e for e in out.runs if e.id == run.id)
        if entry.V_lo is None or entry.V_hi is None or entry.band is None or run.budget is None:
            continue
        # The decision's own interval (its value draws) is the scaled calibration's: the draws it compared on.
        drawn = value_draws(replace(fits[run.id], band_scale=k), run.budget, i, "calibrated")
        assert drawn is not None
        lo, med, hi = np.quantile(drawn, [0.1, 0.5, 0.9])
        assert (rec.numbers["V_lo"], rec.numbers["V_budget"], rec.numbers["V_hi"]) == pytest.approx((lo, med, hi))
        assert (entry.V_lo, entry.V_budget, entry.V_hi) == pytest.approx((lo, med, hi))
        # ... the band the pages draw is the same scaled forecast, and the centre never moves.
        x = np.array(entry.band.x[1:-1])
        summary = curve_summary(replace(fits[run.id], band_scale=k), x)
        assert summary is not None
        assert np.allclose(np.array(entry.band.lo[1:-1], dtype=float), summary[1], rtol=1e-5, atol=1e-6)
        assert np.allclose(np.array(entry.band.hi[1:-1], dtype=float), summary[2], rtol=1e-5, atol=1e-6)
        before = plain_runs[run.id]
        assert before.V_lo is not None and before.V_hi is not None and before.V_budget is not None
        # the centre is not moved; the draws' median moves only by the draws' own granularity
        assert entry.V_budget == pytest.approx(before.V_budget, abs=0.01 * (entry.V_hi - entry.V_lo) + 1e-3)
        width, width_before = entry.V_hi - entry.V_lo, before.V_hi - before.V_lo
        assert width > width_before and width == pytest.approx(k * width_before, rel=0.1)
        checked += 1
    assert checked >= 2

    # Learned against the calibrated band: reported but not applied when the decisions compare other draws.
    with read_session(service.ctx.engine) as session:
        spec = spec_of(session, exp["id"])
        blended = replace(spec, policy=replace(spec.policy, forecast_comparison="blended"))
        other, _, _ = build_assessment(session, blended, service.ctx.cache)
    assert other.adaptive_band is not None and other.adaptive_band.applied is False
    assert other.adaptive_band.scale == k and "not applied" in other.adaptive_band.note
    assert all("earlier forecasts" not in (e.forecast or "") for e in other.runs)


def test_chosen_snapshots_are_few_and_far_enough_from_the_newest_point() -> None:
    rows = [(i, c) for i, c in enumerate([100.0, 200.0, 200.0, 400.0, 800.0, 1600.0, 3000.0, 3100.0], start=1)]
    picked = adaptive.chosen_snapshots(rows, 3200.0, 0.25)
    assert len(picked) <= adaptive.MAX_FORECASTS and len(set(picked)) == len(picked)
    assert picked == [6, 5, 4]  # 7 and 8 are closer than 0.25 e-folds to the newest point
    assert adaptive.chosen_snapshots([(1, 200.0), (2, 200.0)], 1000.0, 0.25) == [2]  # the latest at one compute
    assert adaptive.chosen_snapshots([], 3200.0, 0.25) == []
