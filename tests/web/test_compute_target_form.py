"""The form sets the one knob (``policy.compute_target``): a value outside (0, 1] is refused next to the policy
field; a valid one reaches the experiment's document."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.conftest import LiveService
from tests.web.forms import field_error, open_new_experiment

pytestmark = pytest.mark.browser


def test_the_form_sets_the_compute_target(page: Any, live: LiveService) -> None:
    open_new_experiment(page, live.url, {"Name": "browser-compute-target", "Budget per run": "300"})
    page.get_by_label("Recommendations").select_option("auto_stop")
    page.get_by_label("Compute target (optional)").fill("0")
    assert "greater than 0" in field_error(page, "Create experiment", "err-policy")
    page.get_by_label("Compute target (optional)").fill("0.3")
    page.get_by_role("button", name="Create experiment").click()
    page.wait_for_url(re.compile(r"/experiments/\d+$"))
    exp_id = int(page.url.rsplit("/", 1)[1])
    with live.client() as client:
        doc = client.get(f"/api/v1/experiments/{exp_id}").json()["document"]
    assert doc["policy"]["mode"] == "auto_stop" and doc["policy"]["compute_target"] == 0.3
