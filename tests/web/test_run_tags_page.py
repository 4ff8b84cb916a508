"""The experiment page shows each run's tags (users comparing with W&B/MLflow found them on the run page only) and
filters its runs table by tag: a click on a tag, or ``?tag=`` in the address (repeatable: every tag)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment, post_curve

pytestmark = pytest.mark.browser


def _rows(page: Any) -> list[str]:
    names: list[str] = page.locator("#runs tbody tr td:first-child a").all_inner_texts()
    return names


def test_tags_are_shown_and_filter_the_runs_table(page: Any, live: LiveService) -> None:
    with live.client(live.write_token) as http:
        exp = http.post("/api/v1/experiments/tracking", json={"name": "tagged-runs", "compute_unit": "gpu_hours"})
        assert exp.status_code == 201, exp.text
        exp_id = exp.json()["id"]
        for i, (name, tags) in enumerate((("tag-a", ["sweep", "baseline"]), ("tag-b", ["sweep"]), ("tag-c", None))):
            body: dict[str, Any] = {"name": name, "experiment_id": exp_id, "budget": 8000.0}
            if tags:
                body["tags"] = tags
            made = http.post("/api/v1/runs", json=body)
            assert made.status_code == 201, made.text
            post_curve(http, made.json()["id"], 0.5 + 0.1 * i, n=8, seed=i)
    page.goto(f"{live.url}/experiments/{exp_id}")
    page.locator("#runs tbody tr").nth(2).wait_for()
    assert _rows(page) == ["tag-a", "tag-b", "tag-c"]
    assert page.locator('#runs thead [data-sort="tags"]').count() == 1
    first = page.locator("#runs tbody tr").first
    assert first.locator('[data-col="tags"] [data-tag]').all_inner_texts() == ["#sweep", "#baseline"]
    assert page.locator("#runs tbody tr").nth(2).locator('[data-col="tags"]').inner_text() == ""
    assert page.locator("#tag-filter").is_hidden()

    first.locator('[data-tag="baseline"]').click()  # a click on a tag keeps the runs having it
    assert _rows(page) == ["tag-a"]
    assert page.locator("#tag-filter [data-tag]").all_inner_texts() == ["#baseline ×"]
    assert "tag=baseline" in page.url
    screenshot(page, "experiment-run-tags")
    page.locator('#tag-filter [data-tag="baseline"]').click()  # removed from the filter: every run again
    assert _rows(page) == ["tag-a", "tag-b", "tag-c"] and page.locator("#tag-filter").is_hidden()
    assert "tag=" not in page.url

    page.goto(f"{live.url}/experiments/{exp_id}?tag=sweep")
    page.locator("#runs tbody tr").nth(1).wait_for()
    assert _rows(page) == ["tag-a", "tag-b"]
    page.goto(f"{live.url}/experiments/{exp_id}?tag=sweep&tag=baseline")
    page.locator("#tag-filter").wait_for()
    page.locator("#runs tbody tr").first.wait_for()
    assert _rows(page) == ["tag-a"]
    page.goto(f"{live.url}/experiments/{exp_id}?tag=nope")
    page.locator("#tag-filter").wait_for()
    assert _rows(page) == []
    page.goto(f"{live.url}/experiments/{exp_id}")
    page.locator("#runs tbody tr").nth(2).wait_for()
    page.locator("#run-filter").fill("basel")  # the text filter reads tags too
    assert _rows(page) == ["tag-a"]


def test_an_experiment_without_tags_has_no_tags_column(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "untagged-grid", grid={"batch.prompts": [32, 48]})
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").nth(1).wait_for()
    assert page.locator('#runs thead [data-sort="tags"]').count() == 0
    assert page.locator('#runs [data-col="tags"]').count() == 0
