"""The run-status rules the pages act on come from the server, once (``web/status_rules.py``): every page carries
them as a JSON block before its scripts, no script holds a list of statuses, and the service answers stop, resume
and retry exactly as the rules say, for a run in every status."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.lifecycle.status import ACTIVE, FINISHED, STATUSES, TERMINAL
from tests.web.conftest import LiveService
from tests.web.data import create_experiment, set_status
from web.status_rules import STATUS_RULES

STATIC = Path(__file__).resolve().parents[2] / "web" / "static"
BLOB = re.compile(r'<script type="application/json" id="status-rules">(.*?)</script>', re.S)
PAGES = ["/", "/experiments/new", "/experiments/1", "/runs/1", "/alerts", "/settings", "/signin"]

#: Transitions from ``queued`` that reach each status.
PATH_TO = {
    "queued": (),
    "running": ("running",),
    "stopping": ("running", "stopping"),
    "stopped": ("stopped",),
    "succeeded": ("running", "succeeded"),
    "failed": ("failed",),
    "lost": ("running", "lost"),
}


def test_the_rules_are_the_status_machines_sets() -> None:
    assert STATUS_RULES["statuses"] == list(STATUSES) and set(PATH_TO) == set(STATUSES)
    assert set(STATUS_RULES["finished"]) == FINISHED
    assert set(STATUS_RULES["stoppable"]) == ACTIVE
    resumable, retryable = set(STATUS_RULES["resumable"]), set(STATUS_RULES["retryable"])
    assert resumable | retryable == TERMINAL and not resumable & retryable
    assert all(set(statuses) <= set(STATUSES) for statuses in STATUS_RULES.values())


def test_every_page_carries_the_rules_before_its_scripts(live: LiveService) -> None:
    with httpx.Client(base_url=live.url, timeout=10) as anon:
        for path in PAGES:
            html = anon.get(path).text
            blobs = BLOB.findall(html)
            assert len(blobs) == 1, path
            assert json.loads(blobs[0]) == STATUS_RULES, path
            scripts = re.findall(r'<script src="/static/([\w.]+)\.js">', html)
            assert scripts and "core" in scripts, path
            assert html.index('id="status-rules"') < html.index('<script src="/static/'), f"{path}: rules load first"


def test_no_script_keeps_its_own_list_of_run_statuses() -> None:
    """A list of status names in a script (``["succeeded", "failed", "stopped"].includes(...)``) is a copy of a rule;
    the scripts ask ``S.statusIs(rule, status)`` instead."""
    names = "|".join(STATUSES)
    for path in STATIC.glob("*.js"):
        lists = re.findall(rf'\[\s*"(?:{names})"\s*,\s*"(?:{names})"', path.read_text())
        assert not lists, f"{path.name}: {lists}"
    assert "statusIs" in (STATIC / "core.js").read_text()


@pytest.mark.parametrize("action", ["stop", "resume", "retry"])
def test_the_service_acts_on_a_run_as_the_rules_say(live: LiveService, action: str) -> None:
    rule = {"stop": "stoppable", "resume": "resumable", "retry": "retryable"}[action]
    with live.client() as api:
        exp = create_experiment(api, f"status-rules-{action}", grid={"batch.prompts": [32, 40, 48, 56, 64, 72, 80]})
        acted = []
        for run, status in zip(exp["runs"], STATUSES, strict=True):
            set_status(live, run["id"], *PATH_TO[status])
            assert api.get(f"/api/v1/runs/{run['id']}").json()["status"] == status
            res = api.post(f"/api/v1/runs/{run['id']}/{action}", json={"reason": "status-rules test"})
            assert res.status_code in (200, 409), (status, res.text)
            if res.status_code == 200 and res.json()["status"] != status:
                acted.append(status)
    assert acted == [s for s in STATUSES if s in STATUS_RULES[rule]]


@pytest.mark.browser
def test_a_runs_buttons_follow_the_rules_in_every_status(page: Any, live: LiveService) -> None:
    """The experiment page's runs table, read in a browser: a run in each status offers the actions the rules
    give it (``core.js`` reads them from the page)."""
    with live.client() as api:
        exp = create_experiment(api, "status-rules-buttons", grid={"batch.prompts": [32, 40, 48, 56, 64, 72, 80]})
    status_of = {}
    for run, status in zip(exp["runs"], STATUSES, strict=True):
        set_status(live, run["id"], *PATH_TO[status])
        status_of[run["id"]] = status
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_function("() => document.querySelectorAll('#runs tbody tr[data-status]').length === 7")
    rows = page.evaluate(
        "() => [...document.querySelectorAll('#runs tbody tr[data-status]')].map((tr) => [Number(tr.dataset.runId),"
        " tr.dataset.status, [...tr.querySelectorAll('button[data-action]')].map((b) => b.dataset.action)])"
    )
    rule_of = {"stop": "stoppable", "resume": "resumable", "retry": "retryable", "extend": "extendable"}
    assert len(rows) == len(STATUSES)
    for run_id, status, actions in rows:
        assert status == status_of[run_id]
        assert actions == [a for a, rule in rule_of.items() if status in STATUS_RULES[rule]], status
