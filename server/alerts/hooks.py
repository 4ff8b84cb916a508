"""Where alerts come from: a ``before_flush`` listener that watches what the service writes.

It reacts to new ``run_transitions`` rows (run failed or lost, early stop done by ``auto_stop``, experiment
finished), new ``recommendation_snapshots`` (early stop or scale recommended) and new ``full`` fit snapshots
(forecast crossing a user threshold). Watching rows keeps the service's own modules free of alert code: every status
change already writes a transition row, every recommendation a snapshot. :func:`install` is idempotent.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, select
from sqlalchemy.orm import Session, attributes

from server.alerts.raising import AlertType, Severity, raise_alert
from server.lifecycle.runs import SILENT, SYSTEM
from server.lifecycle.status import FINISHED
from server.store.alert_models import Alert, AlertThreshold
from server.store.models import FitSnapshot, RecommendationSnapshot, Run, RunTransition, utcnow

AUTO_STOP_ACTOR = "auto_stop"
UNFINISHED = ("queued", "running", "stopping")
_installed = False


def install() -> None:
    """Register the listener on every SQLAlchemy session of this process (once)."""
    global _installed
    if not _installed:
        event.listen(Session, "before_flush", _before_flush)
        _installed = True


def _before_flush(session: Session, _ctx: Any, _instances: Any) -> None:
    new = list(session.new)
    with session.no_autoflush:
        for obj in new:
            if isinstance(obj, RunTransition) and obj.from_status is not None:
                _on_transition(session, obj)
            elif isinstance(obj, RecommendationSnapshot):
                _on_recommendations(session, obj)
            elif isinstance(obj, FitSnapshot) and obj.kind == "full":
                _on_forecast(session, obj)


def _run(session: Session, run_id: int) -> Run | None:
    return session.get(Run, run_id)


#: run status reached -> (alert type, severity, title); ``stopping`` only when the auto-stop policy asked for it
_TRANSITION_ALERTS: dict[str, tuple[AlertType, Severity, str]] = {
    "failed": ("run_failed", "error", "Run {name} failed"),
    "lost": ("run_lost", "warning", "Run {name} lost its worker"),
    "stopping": ("early_stop_done", "info", "Run {name} stopped early"),
}


def _on_transition(session: Session, tr: RunTransition) -> None:
    run = _run(session, tr.run_id)
    if run is None:
        return
    data: dict[str, Any] = {"run_name": run.name, "attempt": tr.attempt, "reason": tr.reason, "from": tr.from_status}
    alert = _TRANSITION_ALERTS.get(tr.to_status)
    if alert is not None and _alerting(tr):
        kind, severity, title = alert
        if tr.to_status == "lost" and tr.reason.startswith(SILENT):
            title = "Run {name} went silent (its trainer crashed or was killed?)"
        raise_alert(
            session,
            kind,
            severity,
            title.format(name=run.name),
            tr.reason,
            dedupe_key=f"{kind}:{run.id}:{tr.attempt}",
            data=data,
            experiment_id=run.experiment_id,
            run_id=run.id,
        )
    if tr.to_status in FINISHED:  # advice to a finished run no longer applies: withdrawn as it ends
        for _, kind in ADVICE_ALERTS:
            _withdraw(session, run.id, kind, None, None)
    if tr.to_status not in UNFINISHED:
        _check_finished(session, run)


def _alerting(tr: RunTransition) -> bool:
    """``stopping`` alerts only when the auto-stop policy asked for it; ``lost`` only when the reaper found the
    lease expired: a worker that reports ``lost`` itself is releasing the run on a planned shutdown (Ctrl-C of
    ``scalerl up`` or the demo), and the run resumes from its checkpoint at the next start."""
    if tr.to_status == "stopping":
        return tr.actor == AUTO_STOP_ACTOR
    if tr.to_status == "lost":
        return tr.actor == SYSTEM
    return True


def _check_finished(session: Session, run: Run) -> None:
    """Alert once every run of the experiment ended for good: stopped, succeeded or failed (statuses changed in this
    flush count as they will be). A ``lost`` run has not finished: its trainer may report again or be retried, and
    its own alert said it went silent."""
    rows = session.execute(select(Run.id, Run.status).where(Run.experiment_id == run.experiment_id)).all()
    statuses = {int(r[0]): str(r[1]) for r in rows}
    for obj in session.identity_map.values():
        if isinstance(obj, Run) and obj.experiment_id == run.experiment_id:
            statuses[obj.id] = obj.status
    if any(s not in FINISHED for s in statuses.values()):
        return
    counts: dict[str, int] = {}
    for status in statuses.values():
        counts[status] = counts.get(status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    raise_alert(
        session,
        "experiment_finished",
        "info",
        f"Experiment {run.experiment_id} finished",
        f"every run ended: {summary}",
        dedupe_key=f"experiment_finished:{run.experiment_id}",
        experiment_id=run.experiment_id,
        data={"status_counts": counts},
    )


#: Advice that raises an alert, and the alert's type (withdrawn when a later snapshot advises otherwise).
ADVICE_ALERTS: tuple[tuple[str, AlertType], ...] = (("stop", "early_stop_recommended"), ("scale", "scale_recommended"))


def _withdraw(session: Session, run_id: int, type_: AlertType, action: object, reason: object) -> None:
    """Resolve the run's open ``type_`` alert that this snapshot no longer advises, saying what it advises now."""
    open_alerts = session.scalars(
        select(Alert).where(Alert.run_id == run_id, Alert.type == type_, Alert.resolved_at.is_(None))
    ).all()
    if not open_alerts:
        return
    run = _run(session, run_id)
    ended = run is not None and run.status in FINISHED
    for alert in open_alerts:
        alert.resolved_at = utcnow()
        alert.resolution = (
            f"the run has {run.status if run is not None else 'ended'}: the advice no longer applies"
            if ended
            else f"withdrawn by the next assessment: now {action}: {reason}"
        )[:2000]


def _on_recommendations(session: Session, snap: RecommendationSnapshot) -> None:
    for rec in snap.body:
        action = rec.get("action")
        for advised, kind in ADVICE_ALERTS:
            if action != advised:
                _withdraw(session, int(rec["run_id"]), kind, action, rec.get("reason", ""))
        if action not in ("stop", "scale"):
            continue
        run = _run(session, int(rec["run_id"]))
        if run is None or run.status not in ("queued", "running"):
            continue
        type_: AlertType = "early_stop_recommended" if action == "stop" else "scale_recommended"
        verb = "should stop early" if action == "stop" else "is worth scaling"
        raise_alert(
            session,
            type_,
            "info",
            f"Run {run.name} {verb}",
            str(rec.get("reason", "")),
            dedupe_key=f"{type_}:{run.id}",
            experiment_id=run.experiment_id,
            run_id=run.id,
            data={"run_name": run.name, "numbers": rec.get("numbers", {})},
        )


def forecast_at(body: dict[str, Any], compute: float) -> float | None:
    """The fit's predicted mean at the stored prediction closest to ``compute`` (None without predictions)."""
    best: tuple[float, float] | None = None
    for p in body.get("predictions") or []:
        if p.get("mean") is None or p.get("compute") is None:
            continue
        gap = abs(float(p["compute"]) - compute)
        if best is None or gap < best[0]:
            best = (gap, float(p["mean"]))
    return None if best is None else best[1]


def _on_forecast(session: Session, snap: FitSnapshot) -> None:
    run = _run(session, snap.run_id)
    if run is None:
        return
    thresholds = session.scalars(
        select(AlertThreshold).where(
            (AlertThreshold.experiment_id.is_(None)) | (AlertThreshold.experiment_id == run.experiment_id)
        )
    ).all()
    for th in thresholds:
        reference = run.budget if run.budget is not None else snap.compute_max
        value = forecast_at(snap.body, th.factor * reference)
        if value is None:
            continue
        crossed = value >= th.value if th.direction == "above" else value <= th.value
        state = dict(th.state or {})
        before = state.get(str(run.id), {"crossed": False, "crossings": 0})
        if crossed == before["crossed"]:
            continue
        crossings = before["crossings"] + int(crossed)
        state[str(run.id)] = {"crossed": crossed, "crossings": crossings}
        th.state = state
        attributes.flag_modified(th, "state")
        if crossed:
            raise_alert(
                session,
                "forecast_threshold",
                "info",
                f"Run {run.name}: forecast {th.direction} {th.value:g}",
                f"threshold {th.name!r}: the forecast at {th.factor:g}× the budget is {value:.4f} "
                f"({th.direction} {th.value:g})",
                dedupe_key=f"forecast_threshold:{th.id}:{run.id}:{crossings}",
                experiment_id=run.experiment_id,
                run_id=run.id,
                data={"threshold_id": th.id, "forecast": value, "factor": th.factor, "value": th.value},
            )
