"""From the dashboard: the new-experiment page creates an experiment for runs trained elsewhere, by
name, with no grid document and no planned run; a name taken is said next to the form."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.conftest import LiveService
from tests.web.forms import open_new_experiment

pytestmark = pytest.mark.browser


def test_the_form_creates_an_experiment_for_own_runs(page: Any, live: LiveService) -> None:
    fields = {
        "Called": "browser-own-runs",
        "Unit its runs report in": "tokens",
        "Default run budget (optional)": "1000000",
        "Trained on (optional label)": "gsm8k",
    }
    open_new_experiment(page, live.url, fields)
    page.get_by_role("button", name="Start a group for my runs").click()
    page.wait_for_url(re.compile(r"/experiments/\d+$"))
    exp_id = int(page.url.rsplit("/", 1)[1])
    with live.client() as api:
        exp = api.get(f"/api/v1/experiments/{exp_id}").json()
    assert exp["name"] == "browser-own-runs" and exp["n_runs"] == 0
    assert exp["document"]["kind"] == "tracking" and exp["document"]["compute_unit"] == "tokens"
    assert exp["document"]["budget"] == 1e6 and exp["document"]["task"] == "gsm8k"

    open_new_experiment(page, live.url, {"Called": "browser-own-runs"})
    page.get_by_role("button", name="Start a group for my runs").click()
    error = page.locator("#own-error")
    error.wait_for()
    assert "already exists" in error.inner_text()
    assert page.url.endswith("/experiments/new")
