"""The remaining experiment-page views in a real browser: parallel coordinates of the grid's varied recipe
keys against the forecast at budget and the ceiling A (the runs table's numbers), and the run comparison against
wall time (seconds since each run's first stored point, as received)."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from tests.server.helpers import curve_points
from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment, grid_with_curves

pytestmark = pytest.mark.browser

PARCOORDS = "document.getElementById('parcoords').data"


def _table_numbers(page: Any) -> dict[str, tuple[float, float]]:
    """Run name -> (A, forecast at budget) as the runs table shows them (3 decimals)."""
    rows: list[list[str]] = page.evaluate(
        "() => [...document.querySelectorAll('#runs tbody tr')].map(tr => [tr.querySelector('td a').textContent,"
        " tr.querySelector('td[data-col=\"A\"]').textContent, tr.querySelector('td[data-col=\"at_budget\"]')"
        ".textContent])"
    )
    return {name: (float(a[:5]), float(v[:5])) for name, a, v in rows}


def test_parallel_coordinates_of_the_varied_keys_against_the_forecast(page: Any, live: LiveService) -> None:
    grid = {"batch.prompts": [32, 64], "loss.type": ["cispo", "dapo"], "optimizer.lr": [1e-4]}
    exp = grid_with_curves(live, "browser-parcoords", grid, [0.5, 0.62, 0.56, 0.68], n=16, c_max=3000.0)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_function(f"() => ({PARCOORDS} || []).length === 5")  # a line per run and the colour bar
    page.wait_for_function(
        "() => /0\\.\\d{3}/.test(document.querySelector('#runs td[data-col=\"at_budget\"]').textContent)"
    )
    meta = page.evaluate("() => document.getElementById('parcoords').layout.meta")
    labels = [d["label"] for d in meta["dimensions"]]
    assert labels == ["batch.prompts", "loss.type", "forecast at budget", "ceiling A"], "only the keys that vary"
    prompts, loss, forecast, ceiling = meta["dimensions"]
    names = [r["name"] for r in exp["runs"]]
    assert meta["runs"] == names
    loss_of = {r["name"]: r["recipe"]["loss"]["type"] for r in exp["runs"]}  # the default (cispo) is no override
    assert prompts["kind"] == "number" and prompts["values"] == [32, 32, 64, 64], "numbers stay numbers"
    assert loss["kind"] == "category" and loss["tickvals"] == [0, 1] and loss["ticktext"] == ["cispo", "dapo"]
    assert [loss["ticktext"][v] for v in loss["coded"]] == [loss_of[n] for n in names], "labelled integer ticks"
    assert meta["color"] == forecast["values"], "coloured by the forecast at budget"
    table = _table_numbers(page)
    for name, a, v in zip(names, ceiling["values"], forecast["values"], strict=True):
        assert (a, v) == pytest.approx(table[name], abs=5.1e-4), f"{name}: the table's numbers (3 decimals)"
    # Drawn as SVG (Plotly's WebGL parcoords cannot run under the page's CSP): a path per run, axis labels shown.
    assert page.locator("#parcoords .scatterlayer .trace path.js-line").count() == 4
    assert page.locator("#parcoords .annotation-text", has_text="loss.type").count() == 1
    assert page.locator("#parcoords .annotation-text", has_text="dapo").count() == 1
    page.locator("#parcoords").scroll_into_view_if_needed()
    screenshot(page, "parallel-coordinates", full_page=False)


def test_compare_runs_against_wall_time_as_received(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-walltime", grid={"batch.prompts": [32, 64]})
        points = {run["id"]: curve_points(0.55, n=12, c_max=3000.0, seed=i) for i, run in enumerate(exp["runs"])}
        for run_id, pts in points.items():  # the first half now, the rest 1.2 s later
            api.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts[:6]}).raise_for_status()
        time.sleep(1.2)
        for run_id, pts in points.items():
            api.post(f"/api/v1/runs/{run_id}/metrics", json={"points": pts[6:]}).raise_for_status()
        body = api.get(f"/api/v1/dashboard/experiments/{exp['id']}/metrics", params={"x": "time"}).json()
        bad = api.get(f"/api/v1/dashboard/experiments/{exp['id']}/metrics", params={"x": "wall"})
    assert body["x"] == "time" and body["x_label"] == "time since first point (as received), s"
    for run in body["runs"]:
        assert run["x"][0] == 0.0 and max(run["x"][:6]) < 0.5, "one batch: (about) one arrival time"
        assert 1.2 <= run["x"][6] <= run["x"][-1] < 30, "the second batch, seconds later"
        assert run["without_time"] == 0
    assert bad.status_code == 422 and all(w in bad.text for w in ("'step'", "'compute'", "'time'")), bad.text
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_function("() => (document.getElementById('cmp-chart').data || []).length === 2")
    page.get_by_label("Against", exact=True).select_option("time")
    page.wait_for_function("() => /as received/.test(document.getElementById('cmp-chart').layout.xaxis.title.text)")
    xs = page.evaluate("() => document.getElementById('cmp-chart').data[0].x.slice()")
    assert xs[0] == 0 and xs[-1] >= 1.2
    assert "cmp_x=time" in page.url, "in the address, like the other comparison settings"
    page.goto(page.url)
    page.wait_for_function(
        "() => /as received/.test(((document.getElementById('cmp-chart').layout || {}).xaxis || {title: {}})"
        ".title.text)"
    )
    assert page.get_by_label("Against", exact=True).input_value() == "time"


def test_the_verdict_banner_shows_the_tables_numbers_for_its_best_run(page: Any, live: LiveService) -> None:
    grid = {"batch.prompts": [32, 48, 64]}
    exp = grid_with_curves(live, "browser-one-fit", grid, [0.5, 0.66, 0.58], n=16, c_max=3000.0)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    best = page.locator("#verdict [data-best-run]")
    best.wait_for()
    page.wait_for_function("() => document.getElementById('verdict-as-of').dataset.agrees === 'yes'")
    run_id = int(best.get_attribute("data-best-run") or 0)
    v_banner = float(best.get_attribute("data-v-budget") or "nan")
    name = next(r["name"] for r in exp["runs"] if r["id"] == run_id)
    assert name == exp["runs"][1]["name"], "the highest curve leads"
    assert page.locator("#verdict strong").inner_text().endswith(name) or name in page.locator("#verdict").inner_text()
    table = _table_numbers(page)
    assert f"{v_banner:.3f}" == f"{table[name][1]:.3f}", "the banner's forecast at budget is the table's"
    assert f"forecasts {v_banner:.3f} at the budget" in page.locator("#verdict").inner_text()
    version = page.locator("#verdict-as-of").inner_text()
    assert re.match(r"assessment v\d+ of .*: the table's numbers", version), version
    # the card names the same assessment and the table's fit
    assert page.locator("#ceff-note").inner_text() != ""
    assert page.locator("#ceff-as-of").inner_text().startswith(version.split(" of ")[0])
