"""One story on every surface, read in a real browser at three moments of a live 5-run grid: two runs
done and the rest queued, mid-way, and finished. Every number the experiment page, the run page and the home page
show (table, banner, rankings, card, chart data) must agree to display precision with each other and with the
REST answers of the same assessment version."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import assessed, create_experiment, post_curve

pytestmark = pytest.mark.browser

CEILINGS = (0.66, 0.5, 0.58, 0.46, 0.62)


def _f3(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def _page_numbers(page: Any) -> dict[str, Any]:
    return page.evaluate(  # type: ignore[no-any-return]
        """() => ({
          version: document.getElementById('verdict-as-of').textContent,
          rows: [...document.querySelectorAll('#runs tbody tr')].map(tr => ({
            id: Number(tr.dataset.runId),
            A: tr.querySelector('td[data-col="A"]').textContent,
            V: tr.querySelector('td[data-col="at_budget"]').textContent,
            rec: tr.querySelector('td[data-col="recommendation"]').textContent})),
          bestRun: (document.querySelector('#verdict [data-best-run]') || {dataset: {}}).dataset.bestRun || null,
          bestV: (document.querySelector('#verdict [data-best-run]') || {dataset: {}}).dataset.vBudget || null,
          verdict: document.getElementById('verdict').textContent,
          rankA: [...document.querySelectorAll('#rank-ceiling li')].map(li => li.textContent),
          rankV: [...document.querySelectorAll('#rank-budget li')].map(li => li.textContent),
          card: [...document.querySelectorAll('#comparison tbody tr')].map(tr =>
            (tr.querySelector('td[data-col="A_diff"]') || {textContent: ''}).textContent),
          chart: (document.getElementById('chart').data || []).length,
        })"""
    )


def _check_moment(page: Any, live: LiveService, exp_id: int, label: str) -> dict[str, Any]:
    with live.client() as api:
        a = assessed(api, exp_id)
        verdict = api.get(f"/api/v1/experiments/{exp_id}/verdict").json()
        card = api.get(f"/api/v1/dashboard/experiments/{exp_id}/comparison").json()
        home = {e["id"]: e for e in api.get("/api/v1/dashboard/experiments").json()}[exp_id]
    page.goto(f"{live.url}/experiments/{exp_id}")
    page.wait_for_function(
        f"() => /assessment v{a['version']} of/.test((document.getElementById('verdict-as-of') || {{}}).textContent)"
    )
    seen = _page_numbers(page)
    table = {r["id"]: r for r in a["runs"]}
    assert verdict["assessment_version"] == a["version"], label
    for row in seen["rows"]:
        want = table[row["id"]]
        assert row["A"].startswith(_f3(want["A"])), (label, row, want["A"])
        assert row["V"].startswith(_f3(want["V_budget"])), (label, row, want["V_budget"])
        if want["A"] is not None and not want["ceiling_identified"]:
            assert "not identified" in row["A"], (label, row)
        if want["status"] in ("succeeded", "failed", "stopped"):
            assert "finished: no advice" in row["rec"], (label, row)
    # the banner: the same best run, forecast and decision as /verdict and the table
    if verdict["best_run_id"] is not None:
        assert int(seen["bestRun"]) == verdict["best_run_id"], label
        assert f"{float(seen['bestV']):.3f}" == _f3(table[verdict["best_run_id"]]["V_budget"]), label
    assert ("Decided" in seen["verdict"]) == verdict["decided"], (label, seen["verdict"])
    # the rankings list the table's numbers in the table's order
    by_v = sorted((r for r in a["runs"] if r["rank_at_budget"] is not None), key=lambda r: r["rank_at_budget"])
    for li, r in zip(seen["rankV"], by_v, strict=False):
        assert r["name"] in li and _f3(r["V_budget"]) in li, (label, li, r)
    by_a = sorted((r for r in a["runs"] if r["rank_ceiling"] is not None), key=lambda r: r["rank_ceiling"])
    for li, r in zip(seen["rankA"], by_a, strict=False):
        assert r["name"] in li and _f3(r["A"]) in li, (label, li, r)
    # the card: ΔA is the table's A difference, or "—" where a ceiling is not identified
    for text, row in zip(seen["card"], card["rows"], strict=True):
        assert text == ("—" if row["A_diff"] is None else f"{'+' if row['A_diff'] >= 0 else ''}{row['A_diff']:.3f}")
        if row["A_diff"] is not None:
            assert row["A_diff"] == pytest.approx(table[row["run_id"]]["A"] - table[card["reference_id"]]["A"])
    screenshot(page, f"one-truth-{label}")
    # the home page counts the same advice (unfinished runs only)
    assert home["recommendations"] == a["counts"], label
    page.goto(f"{live.url}/")
    row = page.locator(f'#experiments tr[data-experiment-id="{exp_id}"]')
    row.wait_for()
    for action, n in a["counts"].items():
        assert f"{n} {action.replace('_', ' ')}" in row.inner_text(), (label, action)
    return {"assessment": a, "verdict": verdict}


def test_one_story_at_three_moments(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-one-truth", grid={"batch.prompts": [16, 24, 32, 40, 48]})
        runs = exp["runs"]
        # moment 1: two runs done, three queued
        for i in (0, 1):
            post_curve(api, runs[i]["id"], CEILINGS[i], n=30, c_max=8000.0, seed=i)
            api.post(f"/api/v1/runs/{runs[i]['id']}/status", json={"status": "succeeded", "reason": "done"})
    first = _check_moment(page, live, exp["id"], "two-done")
    assert first["verdict"]["decided"] is False and len(first["verdict"]["waiting_for"]) == 3
    assert "waiting for" in first["verdict"]["reason"]

    # moment 2: the other three half-way
    with live.client() as api:
        for i in (2, 3, 4):
            post_curve(api, runs[i]["id"], CEILINGS[i], n=15, c_max=4000.0, seed=i)
    _check_moment(page, live, exp["id"], "mid-way")

    # moment 3: finished
    with live.client() as api:
        for i in (2, 3, 4):
            post_curve(api, runs[i]["id"], CEILINGS[i], n=30, c_max=8000.0, seed=i)
            api.post(f"/api/v1/runs/{runs[i]['id']}/status", json={"status": "succeeded", "reason": "done"})
    last = _check_moment(page, live, exp["id"], "finished")
    assert last["verdict"]["finished"] is True and last["assessment"]["counts"] == {}


def test_the_run_page_shows_the_tables_numbers(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-one-truth-run", grid={"batch.prompts": [16, 24]})
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], CEILINGS[i], n=20, c_max=4000.0, seed=i)
        a = assessed(api, exp["id"])
    run = a["runs"][0]
    page.goto(f"{live.url}/runs/{run['id']}")
    page.wait_for_function("() => /v\\d+ of/.test(document.getElementById('facts').textContent)")
    facts = page.locator("#facts").inner_text()
    assert f"{run['A']:.3f} [{run['A_lo']:.3f}, {run['A_hi']:.3f}]" in facts, facts
    assert f"{run['V_budget']:.3f} [{run['V_lo']:.3f}, {run['V_hi']:.3f}]" in facts, facts
    assert a["fit"] in facts
