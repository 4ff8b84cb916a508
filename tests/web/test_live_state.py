"""Live pages that keep the user's state, in a real browser: a live refresh keeps the user's zoom and
hidden legend entries, the log axis has labels on a short range, the mode bar leaves the legend alone and offers
no "Share chart…", burn-in points and the first evaluation are marked, and the numbers say which data they are."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment, grid_with_curves, post_curve

pytestmark = pytest.mark.browser


HIDDEN = "() => document.getElementById('chart').data.filter(t => t.visible === 'legendonly').map(t => t.uid)"


def _n_points(page: Any) -> int:
    n: int = page.evaluate(
        "() => (document.getElementById('chart').data || []).filter(t => (t.uid || '').endsWith('-points'))"
        ".reduce((k, t) => k + t.x.length, 0)"
    )
    return n


def _boxes_overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def test_a_live_refresh_keeps_zoom_and_hidden_legend_entries(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-uirevision", grid={"batch.prompts": [32, 48, 64]})
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.5 + 0.05 * i, n=12, c_max=2000.0, seed=i)
        page.goto(f"{live.url}/experiments/{exp['id']}")
        page.locator("#live.on").wait_for()
        page.wait_for_function("() => (document.getElementById('chart').data || []).length >= 6")
        before = _n_points(page)
        # The user hides the first run (a click on its legend entry) and zooms (a drag over the plot).
        page.locator("#chart .legend .traces").first.click()
        page.wait_for_function(
            "() => document.getElementById('chart').data.some(t => t.visible === 'legendonly')", timeout=5_000
        )
        drag = page.locator("#chart .nsewdrag").first.bounding_box()
        assert drag is not None
        x0, y0 = drag["x"] + drag["width"] * 0.3, drag["y"] + drag["height"] * 0.3
        page.mouse.move(x0, y0)
        page.mouse.down()
        page.mouse.move(x0 + drag["width"] * 0.3, y0 + drag["height"] * 0.3, steps=8)
        page.mouse.up()
        page.wait_for_function("() => document.getElementById('chart').layout.xaxis.autorange === false")
        zoomed = page.evaluate("() => document.getElementById('chart').layout.xaxis.range.slice()")
        hidden_before = page.evaluate(HIDDEN)
        assert len(hidden_before) >= 5, hidden_before  # the run's points, burn-in, fit, forecast and band
        # New points arrive: the page redraws with them ...
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.5 + 0.05 * i, n=20, c_max=3000.0, seed=i)
        page.wait_for_function(
            "n => (document.getElementById('chart').data || []).filter(t => (t.uid || '').endsWith('-points'))"
            ".reduce((k, t) => k + t.x.length, 0) > n",
            arg=before,
            timeout=20_000,
        )
    # ... and keeps what the user did.
    after = page.evaluate("() => document.getElementById('chart').layout.xaxis.range.slice()")
    assert after == pytest.approx(zoomed), (zoomed, after)
    assert sorted(page.evaluate(HIDDEN)) == sorted(hidden_before)


def test_chart_chrome_axis_labels_burn_in_and_first_evaluation(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-chart-chrome", grid={"batch.prompts": [32, 48]})
        for i, run in enumerate(exp["runs"]):
            # A short range (less than a decade of compute), with the evaluation before training at compute 0.
            first = {"step": 0, "compute": 0.0, "pass_rate": 0.3}
            res = api.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": [first]})
            res.raise_for_status()
            post_curve(api, run["id"], 0.6 - 0.05 * i, n=16, c_max=4000.0, seed=i)
    if live.ctx.refitter is not None:
        live.ctx.drain(30)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_function("() => (document.getElementById('chart').data || []).some(t => t.mode === 'markers')")
    page.locator("#runs tbody tr").nth(1).wait_for()
    lay = page.evaluate("() => document.getElementById('chart').layout")
    assert lay["xaxis"]["type"] == "log" and lay["xaxis"].get("dtick") is None
    assert lay.get("uirevision"), "uirevision keeps the user's view"
    labels = page.evaluate("() => [...document.querySelectorAll('#chart .xtick text')].map(t => t.textContent)")
    assert len([t for t in labels if t.strip()]) >= 2, f"the log axis shows tick labels: {labels}"
    # The mode bar has no cloud button and does not cover the legend.
    page.locator("#chart").hover()
    page.locator("#chart .modebar").wait_for(state="visible")
    titles = page.evaluate(
        "() => [...document.querySelectorAll('#chart .modebar-btn')].map(b => b.getAttribute('data-title'))"
    )
    assert titles and not any("Share" in (t or "") or "Cloud" in (t or "") for t in titles), titles
    modebar = page.locator("#chart .modebar").bounding_box()
    legend_first = page.locator("#chart .legend .traces").first.bounding_box()
    assert modebar and legend_first and not _boxes_overlap(modebar, legend_first), (modebar, legend_first)
    # Burn-in points are open circles; the first evaluation (compute 0) is drawn at the left edge.
    traces = page.evaluate(
        "() => document.getElementById('chart').data.map(t => ({uid: t.uid || '', x: t.x, y: t.y,"
        " symbol: (t.marker || {}).symbol || null}))"
    )
    points = [t for t in traces if t["uid"].endswith("-points")]
    burn = [t for t in traces if t["uid"].endswith("-burn")]
    assert len(points) == 2 and len(burn) == 2, "each run's burn-in points are a trace of their own"
    assert all(t["symbol"] == "circle-open" for t in burn)
    assert all(max(b["x"]) < min(p["x"]) for b, p in zip(burn, points, strict=True)), "the burn-in comes first"
    assert all(x > 0 for t in points + burn for x in t["x"]), "no point at compute 0 on the log axis"
    firsts = [t for t in traces if t["uid"].endswith("-first")]
    assert len(firsts) == 2 and all(t["y"] == [0.3] for t in firsts)
    assert all(t["x"][0] < min(b["x"]) for t, b in zip(firsts, burn, strict=True))
    # Every number below the chart says which data it is.
    page.wait_for_function("() => /as of step \\d/.test(document.querySelector('[data-as-of]').textContent)")
    runs_header = page.locator("#runs").locator("xpath=ancestor::section").inner_text()
    assert re.search(r"assessment v\d+ of .* · points as of step 160", runs_header), runs_header
    screenshot(page, "experiment-chart-chrome", full_page=False)


def test_dark_mode_and_keyboard_use(browser: Any, live: LiveService) -> None:
    """Dark mode follows prefers-color-scheme (page and charts); the run actions work from the keyboard."""
    with live.client() as api:
        exp = create_experiment(api, "browser-dark", grid={"batch.prompts": [32, 48]})
        post_curve(api, exp["runs"][0]["id"], 0.55, n=12, c_max=2000.0)
    context = browser.new_context(color_scheme="dark", viewport={"width": 1440, "height": 1000})
    context.add_init_script(f"localStorage.setItem('scalerl.token', {live.write_token!r});")
    context.set_default_timeout(10_000)
    try:
        page = context.new_page()
        page.goto(f"{live.url}/experiments/{exp['id']}")
        page.locator("#runs tbody tr").nth(1).wait_for()
        page.wait_for_function("() => (document.getElementById('chart').data || []).length > 0")
        body_bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert body_bg == "rgb(15, 19, 26)", body_bg
        assert page.evaluate("() => document.getElementById('chart').layout.paper_bgcolor") == "#171c25"
        screenshot(page, "experiment-dark", full_page=False)
        extend = page.locator('#runs [data-action="extend"]').first
        extend.focus()
        page.keyboard.press("Enter")
        dialog = page.locator("dialog#confirm")
        dialog.wait_for(state="visible")
        assert page.evaluate("() => document.activeElement.id") == "confirm-input", "focus moves into the dialog"
        page.keyboard.press("Escape")
        dialog.wait_for(state="hidden")
    finally:
        context.close()


def test_the_runs_table_and_chart_data_download(page: Any, live: LiveService) -> None:
    import csv
    import io
    import json

    with live.client() as api:
        exp = create_experiment(api, "browser-export", grid={"batch.prompts": [32, 48], "optimizer.lr": [1e-4]})
        post_curve(api, exp["runs"][0]["id"], 0.55, n=12, c_max=2000.0)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").nth(1).wait_for()
    with page.expect_download() as got:
        page.get_by_role("button", name="Download CSV").click()
    download = got.value
    assert download.suggested_filename == "browser-export-runs.csv"
    rows = list(csv.DictReader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert [int(r["run_id"]) for r in rows] == [r["id"] for r in exp["runs"]]
    assert [r["batch.prompts"] for r in rows] == ["32", "48"] and rows[0]["optimizer.lr"] == "0.0001"
    assert rows[0]["status"] == "running" and rows[1]["A"] == ""
    with page.expect_download() as got:
        page.get_by_role("button", name="Download JSON").click()
    data = json.loads(Path(got.value.path()).read_text(encoding="utf-8"))
    assert data["chart"]["experiment_id"] == exp["id"] and len(data["chart"]["runs"]) == 2
    assert len(data["chart"]["runs"][0]["points"]["x"]) == 12


def test_the_runs_table_sorts_and_shows_the_recipe_keys_that_vary(page: Any, live: LiveService) -> None:
    grid = {"batch.prompts": [32, 48, 64], "optimizer.lr": [1e-4]}
    exp = grid_with_curves(live, "browser-sort", grid, [0.5, 0.65, 0.58], n=16, c_max=3000.0)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    rows = page.locator("#runs tbody tr")
    rows.nth(2).wait_for()
    names = [r["name"] for r in exp["runs"]]
    page.wait_for_function(
        "() => /0\\.\\d{3}/.test(document.querySelector('#runs tbody tr td:nth-child(4)').textContent)"
    )

    def order() -> list[str]:
        return [
            str(x)
            for x in page.evaluate(
                "() => [...document.querySelectorAll('#runs tbody tr td:first-child a')].map(a => a.textContent)"
            )
        ]

    assert order() == names
    page.locator('#runs th button[data-sort="A"]').click()  # numbers: highest first
    assert order() == [names[1], names[2], names[0]]
    assert page.locator('#runs th[aria-sort="descending"]').count() == 1
    page.locator('#runs th button[data-sort="A"]').press("Enter")  # again, from the keyboard: lowest first
    assert order() == [names[0], names[2], names[1]]
    page.locator("#col-picker summary").click()
    options = page.locator("#col-options input")
    assert options.count() == 1 and options.first.get_attribute("value") == "batch.prompts", "only keys that vary"
    options.first.check()
    cells = page.locator('#runs tbody td[data-col="recipe:batch.prompts"]')
    assert cells.count() == 3 and cells.first.inner_text() == "32"
    page.locator('#runs th button[data-sort="recipe:batch.prompts"]').click()
    assert [c.inner_text() for c in cells.all()] == ["32", "48", "64"]
    # The view is in the address: the same link opens the same sort and columns.
    assert "sort=recipe%3Abatch.prompts" in page.url and "col=batch.prompts" in page.url
    page.get_by_label("Filter").fill("64")
    page.wait_for_function("() => location.search.includes('filter=64')")
    page.goto(page.url)
    page.locator('#runs tbody td[data-col="recipe:batch.prompts"]').first.wait_for()
    assert page.get_by_label("Filter").input_value() == "64" and rows.count() == 1
    assert page.locator('#runs th[aria-sort="ascending"] button').get_attribute("data-sort") == "recipe:batch.prompts"


def test_clone_an_experiment_into_the_form(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-clone", grid={"batch.prompts": [32, 64]}, seeds=[0, 1])
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").first.wait_for()
    page.get_by_role("link", name="Clone into the form").click()
    page.locator("#clone-note", has_text=f"Cloned from experiment {exp['id']}").wait_for()
    text = page.get_by_label("Grid document (YAML or JSON)").input_value()
    assert "name: browser-clone-copy" in text and "batch.prompts" in text
    page.locator("#yaml-preview").click()
    page.locator("#preview-summary", has_text="4 runs").wait_for()


def test_compare_runs_metric_axis_smoothing_and_seed_groups(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-compare", grid={"batch.prompts": [32, 64]}, seeds=[0, 1])
        for i, run in enumerate(exp["runs"]):
            post_curve(api, run["id"], 0.5 + 0.03 * i, n=16, c_max=3000.0, seed=i)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_function("() => (document.getElementById('cmp-chart').data || []).length === 4")
    lay = page.evaluate("() => document.getElementById('cmp-chart').layout")
    assert lay["hovermode"] == "x unified" and lay["xaxis"]["type"] == "linear"
    page.get_by_label("Metric", exact=True).select_option("train/entropy")
    page.wait_for_function("() => /entropy/.test(document.getElementById('cmp-chart').layout.yaxis.title.text)")
    raw = page.evaluate("() => document.getElementById('cmp-chart').data[0].y.slice()")
    page.locator("#cmp-smooth").fill("0.8")
    page.locator("#cmp-smooth").dispatch_event("input")
    smoothed = page.evaluate("() => document.getElementById('cmp-chart').data[0].y.slice()")
    assert smoothed[0] == raw[0] and smoothed[-1] > raw[-1], "an exponential moving average of a falling metric"
    page.get_by_label("Against", exact=True).select_option("compute")
    page.get_by_label("Log x").check()
    page.wait_for_function("() => document.getElementById('cmp-chart').layout.xaxis.type === 'log'")
    page.get_by_label("Seeds as mean and band").check()
    page.wait_for_function(
        "() => document.getElementById('cmp-chart').data.filter(t => t.fill === 'tonexty').length === 2"
    )
    names = page.evaluate("() => document.getElementById('cmp-chart').data.map(t => t.name).filter(Boolean)")
    assert sorted(names) == ["batch.prompts=32 (mean of 2 seeds)", "batch.prompts=64 (mean of 2 seeds)"], names
    screenshot(page, "compare-runs", full_page=False)
    # The comparison's view is in the address: the same link opens it again.
    url = page.url
    assert "cmp_metric=train%2Fentropy" in url and "cmp_x=compute" in url and "cmp_group=1" in url
    assert "cmp_smooth=0.8" in url and "cmp_logx=1" in url
    page.goto(url)
    page.wait_for_function(
        "() => (document.getElementById('cmp-chart').data || []).filter(t => t.fill === 'tonexty').length === 2"
    )
    assert page.get_by_label("Metric", exact=True).input_value() == "train/entropy"
    assert page.get_by_label("Log x").is_checked() and page.locator("#cmp-smooth").input_value() == "0.8"
