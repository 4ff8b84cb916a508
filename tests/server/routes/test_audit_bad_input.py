"""Bad input found by probing the REST API as a CI job or trainer would: each one was a 500 (or silently stored
nonsense); each is now a 4xx naming the key and what is allowed, and nothing stored before is lost (both databases).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.alerts.delivery import deliver_due
from server.alerts.raising import raise_alert
from server.alerts.settings import AlertSettings
from server.store.alert_models import AlertDelivery, Webhook
from tests.server.conftest import Service
from tests.server.helpers import curve_points, sweep_doc

JSON = {"Content-Type": "application/json"}


def _post_raw(service: Service, path: str, raw: bytes, headers: dict[str, str]) -> Any:
    return service.client.post(path, content=raw, headers={**headers, **JSON})


def _doc(name: str, **extra: Any) -> bytes:
    """A minimal grid document as JSON text, with ``extra`` keys spliced in verbatim (``Infinity``, ``\\ud800``)."""
    body = f'"name": "{name}", "task": "t", "model": "m", "budget": 1'
    return ("{" + ", ".join([body, *(f'"{k}": {v}' for k, v in extra.items())]) + "}").encode()


def test_lone_surrogates_are_a_422_and_never_poison_later_reads(service: Service) -> None:
    """JSON ``"\\ud800"`` decodes to a lone surrogate that no database and no JSON answer can hold: it was a 500 at
    insert (task, webhook name, reason), or was stored inside the experiment document and made every later
    ``GET /api/v1/experiments`` a 500 for everyone."""
    c = service.client
    kept = c.post("/api/v1/experiments", json=sweep_doc("kept"), headers=service.write)
    assert kept.status_code == 201
    run_id = kept.json()["runs"][0]["id"]

    refused = {
        "/api/v1/runs": (b'{"name": "r1", "task": "\\ud800"}', service.write),
        f"/api/v1/runs/{run_id}/stop": (b'{"reason": "x\\udc80"}', service.write),
        "/api/v1/alerts/webhooks": (b'{"name": "\\ud800", "url": "https://hooks.example.com/x"}', service.admin),
        "/api/v1/tokens": (b'{"name": "ok", "scopes": ["read", "\\ud800"]}', service.admin),
    }
    for path, (raw, headers) in refused.items():
        r = _post_raw(service, path, raw, headers)
        assert r.status_code == 422, (path, r.text)
        assert "Traceback" not in r.text
    r = _post_raw(service, "/api/v1/runs", b'{"name": "r1", "task": "\\ud800"}', service.write)
    assert "lone surrogate" in json.dumps(r.json()["detail"])

    prior = '{"mean": [0, 0], "cov": [[1, 0], [0, 1]], "coordinates": ["\\ud800"]}'
    r = _post_raw(service, "/api/v1/experiments", _doc("poison", fit=f'{{"prior": {prior}}}'), service.write)
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == [
        "fit.prior.coordinates.0: must be valid Unicode text, not a lone surrogate escape such as \\ud800"
    ]
    r = _post_raw(service, "/api/v1/experiments", _doc("poison", grid='{"loss.type": ["\\ud800"]}'), service.write)
    assert r.status_code == 422 and "grid.loss.type.0" in r.json()["detail"][0]

    listed = c.get("/api/v1/experiments", headers=service.read)
    assert listed.status_code == 200
    assert [e["name"] for e in listed.json()] == ["kept"]
    assert c.get(f"/api/v1/runs/{run_id}", headers=service.read).json()["status"] == "queued"


def test_non_finite_numbers_in_recipes_and_grids_are_a_422(service: Service) -> None:
    """``Infinity``/``NaN``/``1e999`` inside a recipe or a grid axis passed rl_core's checks (``lr > 0``): the
    experiment was a 500 (the answer could not be JSON), a registered run's recipe a 500 on PostgreSQL and a
    silently stored ``lr: null`` on SQLite."""
    c = service.client
    cases = {
        "grid": _doc("g", grid='{"optimizer.lr": [1e-6, Infinity]}'),
        "recipe": _doc("r", recipe='{"optimizer": {"lr": 1e999}}'),
        "prior extra": _doc("p", fit='{"prior": {"mean": [0, 0], "cov": [[1, 0], [0, 1]], "extra": {"x": NaN}}}'),
    }
    expected = {
        "grid": "grid.optimizer.lr.1: must be a finite number",
        "recipe": "recipe.optimizer.lr: must be a finite number",
        "prior extra": "fit.prior.extra.x: must be a finite number",
    }
    for label, raw in cases.items():
        for query in ("", "?dry_run=true"):
            r = _post_raw(service, f"/api/v1/experiments{query}", raw, service.write)
            assert r.status_code == 422, (label, r.text)
            assert r.json()["detail"][0].startswith(expected[label]), r.json()
    assert c.get("/api/v1/experiments", headers=service.read).json() == []

    for raw in (b'{"name": "r", "recipe": {"optimizer": {"lr": Infinity}}}', b'{"name": "r", "recipe": {"x": [NaN]}}'):
        r = _post_raw(service, "/api/v1/runs", raw, service.write)
        assert r.status_code == 422, r.text
        assert "must be a finite number" in r.json()["detail"][0]["msg"]
    assert c.get("/api/v1/runs", headers=service.read).json() == []
    ok = _post_raw(service, "/api/v1/runs", b'{"name": "r", "recipe": {"optimizer": {"lr": 1e-6}}}', service.write)
    assert ok.status_code == 201 and ok.json()["recipe"]["optimizer"]["lr"] == 1e-6


def test_webhook_urls_must_parse_and_a_bad_stored_one_does_not_stop_deliveries(service: Service) -> None:
    """A URL with a port out of range, a bad IPv6 literal or no host was stored; its test button was then a 500
    and its deliveries raised inside ``deliver_due``, which stopped every other webhook's deliveries."""
    c = service.client
    for url in ("https://example.com:99999/x", "https://example.com:abc/", "https://[::1/x", "https://", "http:///a"):
        r = c.post("/api/v1/alerts/webhooks", json={"name": "w", "url": url}, headers=service.admin)
        assert r.status_code == 422, (url, r.text)
        assert "URL" in r.json()["detail"][0]["msg"]
    good = c.post(
        "/api/v1/alerts/webhooks", json={"name": "w", "url": "https://hooks.example.com/x"}, headers=service.admin
    )
    assert good.status_code == 201
    hook_id = good.json()["id"]
    r = c.patch(f"/api/v1/alerts/webhooks/{hook_id}", json={"url": "https://example.com:99999/"}, headers=service.admin)
    assert r.status_code == 422
    assert (
        c.get(f"/api/v1/alerts/webhooks/{hook_id}", headers=service.admin).json()["url"]
        == "https://hooks.example.com/x"
    )

    # A URL stored before these checks existed: the test button answers, and deliveries record a failure.
    with service.ctx.sessions.begin() as session:
        hook = session.get(Webhook, hook_id)
        assert hook is not None
        hook.url = "https://example.com:99999/x"
    r = c.post(f"/api/v1/alerts/webhooks/{hook_id}/test", headers=service.admin)
    assert r.status_code == 200, r.text
    assert r.json()["ok"] is False and "refused" in r.json()["error"]

    with service.ctx.sessions.begin() as session:
        raise_alert(session, "experiment_finished", "info", "t", "m", dedupe_key="audit", experiment_id=None)
    assert deliver_due(service.ctx.sessions, AlertSettings()) == 0
    with service.ctx.sessions() as session:
        rows = session.query(AlertDelivery).filter(AlertDelivery.webhook_id == hook_id).all()
        assert rows and all(d.status == "pending" and "refused" in d.last_error for d in rows)


def test_alert_bodies_are_strict(service: Service) -> None:
    """``"0.5"``, ``true`` and ``"yes"`` were coerced (a threshold at pass rate 1.0 from ``value: true``)."""
    c = service.client
    for body in (
        {"name": "t", "value": "0.5"},
        {"name": "t", "value": True},
        {"name": "t", "value": 0.5, "factor": "2"},
    ):
        r = c.post("/api/v1/alerts/thresholds", json=body, headers=service.admin)
        assert r.status_code == 422, (body, r.text)
    r = c.post(
        "/api/v1/alerts/webhooks",
        json={"name": "w", "url": "https://hooks.example.com/x", "enabled": "no"},
        headers=service.admin,
    )
    assert r.status_code == 422
    assert c.get("/api/v1/alerts/thresholds", headers=service.read).json() == []
    assert c.get("/api/v1/alerts/webhooks", headers=service.admin).json() == []


def test_claiming_from_an_unknown_experiment_is_a_404(service: Service) -> None:
    """It was a 204 ("nothing queued"): a worker pointed at a wrong experiment id waited forever."""
    c = service.client
    exp = c.post("/api/v1/experiments", json=sweep_doc("e"), headers=service.write).json()
    r = c.post("/api/v1/runs/claim", json={"worker": "w", "experiment_id": exp["id"] + 1000}, headers=service.write)
    assert r.status_code == 404 and "does not exist" in r.json()["detail"]
    r = c.post("/api/v1/runs/claim", json={"worker": "w", "experiment_id": exp["id"]}, headers=service.write)
    assert r.status_code == 200 and r.json()["run"]["experiment_id"] == exp["id"]


def test_rejected_points_quote_long_metric_names_clipped(service: Service) -> None:
    """A 1,000-character metric name was quoted whole in every rejected point's error."""
    c = service.client
    run = c.post("/api/v1/runs", json={"name": "r", "budget": 8000.0}, headers=service.write).json()
    good = curve_points(0.6)[:5]
    bad = {"step": 1000, "compute": 9000.0, "metrics": {"x" * 1000: 1.0}}
    r = c.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": [*good, bad]}, headers=service.write)
    assert r.status_code == 200
    (rejected,) = r.json()["rejected"]
    assert rejected["index"] == 5 and len(rejected["errors"][0]) < 300, rejected
    assert len(c.get(f"/api/v1/runs/{run['id']}/metrics", headers=service.read).json()) == 5


@pytest.mark.parametrize("query", ["/api/v1/runs?name=%00", "/api/v1/runs?name=a%00b"])
def test_a_nul_in_a_text_query_is_a_422_on_every_database(service: Service, query: str) -> None:
    """PostgreSQL refuses NUL in any text value: the filter answered 500 there (found by the OpenAPI fuzzing)."""
    r = service.client.get(query, headers=service.read)
    assert r.status_code == 422, r.text
