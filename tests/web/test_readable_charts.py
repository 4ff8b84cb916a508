"""Charts a reader can read and every rule term explained at hand, in a real browser: log compute axes
always carry labelled ticks (less than a decade and several decades of compute, and after a zoom), evaluations at
compute 0 sit in a marked lane at the left edge with their own legend entry, empty charts show the metric's own
range, a finished run shows no ETA, and every rule term in a reason is explained where it is shown."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rl_core.scaling.decide.policy import BehindRule, Policy
from tests.web.conftest import LiveService, screenshot
from tests.web.data import create_experiment

ROOT = Path(__file__).resolve().parents[2]

TICKS = "() => [...document.querySelectorAll('#chart .xtick text')].map(t => t.textContent)"
FIRSTS = "() => (document.getElementById('chart').data || []).some(t => (t.uid || '').endsWith('-first'))"
ARRAY_TICKS = "() => ((document.getElementById('chart').layout || {}).xaxis || {}).tickmode === 'array'"
TRACES = (
    "() => document.getElementById('chart').data.map(t => ({uid: t.uid || '', name: t.name || '', x: t.x, y: t.y,"
    " showlegend: t.showlegend, legendgroup: t.legendgroup || ''}))"
)


def _sigmoid(c: Any, A: float, c_mid: float, B: float = 1.8, R0: float = 0.3) -> Any:
    return R0 + (A - R0) / (1 + (c_mid / c) ** B)


def _post(api: Any, run_id: int, lo: float, hi: float, A: float, seed: int, n: int = 14) -> None:
    """Synthetic points of a sigmoid from ``lo`` to ``hi`` (log-spaced), after an evaluation at compute 0."""
    xs = np.geomspace(lo, hi, n)
    ys = np.clip(_sigmoid(xs, A, float(np.sqrt(lo * hi))) + np.random.default_rng(seed).normal(0, 0.01, n), 0, 1)
    points = [{"step": 0, "compute": 0.0, "pass_rate": 0.3}]
    points += [
        {"step": (i + 1) * 10, "compute": float(x), "pass_rate": float(y)}
        for i, (x, y) in enumerate(zip(xs, ys, strict=True))
    ]
    api.post(f"/api/v1/runs/{run_id}/metrics", json={"points": points}).raise_for_status()


def _grid(live: LiveService, name: str, lo: float, hi: float) -> dict[str, Any]:
    with live.client() as api:
        exp = create_experiment(api, name, budget=hi, grid={"batch.prompts": [32, 48, 64]})
        for i, run in enumerate(exp["runs"]):
            _post(api, run["id"], lo, hi, 0.6 + 0.05 * i, seed=i)
    if live.ctx.refitter is not None:
        live.ctx.drain(30)
    return exp


def _number(label: str) -> float:
    """A tick label's value ("0.005", "20", "10k", "2e-6")."""
    m = re.fullmatch(r"(-?[\d.]+(?:e-?\d+)?)([kMGT]?)", label.replace("\u2212", "-"))
    assert m, f"a tick label is a full value: {label!r}"
    return float(m.group(1)) * {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[m.group(2)]


def _labels(page: Any) -> list[str]:
    return [t for t in page.evaluate(TICKS) if t.strip()]


def _check_ticks(labels: list[str], lo: float, hi: float) -> None:
    assert labels[0] == "0", f"the lane of compute-0 evaluations is the tick '0': {labels}"
    values = [_number(t) for t in labels[1:]]
    assert len(values) >= 3, f"at least three labelled compute ticks: {labels}"
    assert values == sorted(values) and len(set(values)) == len(values), labels
    inside = [v for v in values if lo * 0.99 <= v <= hi * 1.01]
    assert len(inside) >= 2, f"ticks inside the data's range {lo}..{hi}: {labels}"


@pytest.mark.browser
@pytest.mark.parametrize(
    ("lo", "hi"),
    [(0.02, 0.05), (0.0005, 0.05), (1.0, 8000.0)],
    ids=["under-a-decade", "two-decades-of-device-hours", "four-decades"],
)
def test_log_compute_axis_is_labelled_and_compute_0_has_its_lane(
    page: Any, live: LiveService, lo: float, hi: float
) -> None:
    exp = _grid(live, f"browser-ticks-{lo}-{hi}", lo, hi)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.wait_for_function(FIRSTS)
    page.wait_for_function(ARRAY_TICKS)
    _check_ticks(_labels(page), lo, hi)
    lay = page.evaluate("() => document.getElementById('chart').layout")
    traces = page.evaluate(TRACES)
    # The compute-0 evaluations: one marker per run, left of every real point, inside the shaded lane, all under
    # one legend entry "at compute 0" (not the runs' own entries).
    firsts = [t for t in traces if t["uid"].endswith("-first")]
    positive = [x for t in traces if not t["uid"].endswith("-first") for x in (t["x"] or []) if x and x > 0]
    assert len(firsts) == 3 and all(t["y"] == [0.3] for t in firsts)
    assert all(t["legendgroup"] == "zero-lane" and t["showlegend"] is False for t in firsts)
    lane = [s for s in lay["shapes"] if s["type"] == "rect"]
    assert len(lane) == 1
    for t in firsts:
        assert lane[0]["x0"] <= t["x"][0] <= lane[0]["x1"] < min(positive), (t["x"], lane[0], min(positive))
    key = [t for t in traces if t["uid"] == "zero-lane-key"]
    assert len(key) == 1 and key[0]["name"] == "at compute 0" and key[0]["legendgroup"] == "zero-lane"
    legend = page.evaluate("() => [...document.querySelectorAll('#chart .legendtext')].map(t => t.textContent)")
    assert "at compute 0" in legend, legend
    # The hover gives compute as a plain decimal, like the ticks ("0.000711 gpu_hours", not "711µ").
    hover = page.evaluate(
        """() => { const gd = document.getElementById('chart');
                   const i = gd.data.findIndex((t) => (t.uid || '').endsWith('-fit'));
                   Plotly.Fx.hover(gd, [{curveNumber: i, pointNumber: 0}]);
                   return gd.querySelector('.hoverlayer').textContent; }"""
    )
    m = re.search(r"([\d,.]+) gpu_hours", hover)
    assert m and float(m.group(1).replace(",", "")) == pytest.approx(
        page.evaluate("() => document.getElementById('chart').data.find((t) => (t.uid || '').endsWith('-fit')).x[0]"),
        rel=0.01,
    ), hover
    # A zoom into a short stretch gets ticks of its own, still labelled with full values.
    a, b = np.log10(lo * 1.5), np.log10(lo * 2.5)
    page.evaluate(f"() => Plotly.relayout('chart', {{'xaxis.range': [{a}, {b}]}})")
    page.wait_for_function(
        f"() => (document.getElementById('chart').layout.xaxis.tickvals || []).filter(v => v >= {10**a} && "
        f"v <= {10**b}).length >= 2"
    )
    zoomed = [_number(t) for t in _labels(page)]
    assert len([v for v in zoomed if 10**a <= v <= 10**b]) >= 2, zoomed
    page.evaluate("() => Plotly.relayout('chart', {'xaxis.autorange': true})")
    page.wait_for_function(f"() => ({TICKS})().includes('0')")
    screenshot(page, f"chart-ticks-{lo}-{hi}", full_page=False)
    # The run page draws the same lane and ticks.
    page.goto(f"{live.url}/runs/{exp['runs'][0]['id']}")
    page.wait_for_function(ARRAY_TICKS)
    _check_ticks(_labels(page), lo, hi)


@pytest.mark.browser
def test_empty_charts_show_the_pass_rate_range_until_data_arrives(page: Any, live: LiveService) -> None:
    with live.client() as api:
        exp = create_experiment(api, "browser-empty-chart", grid={"batch.prompts": [32, 48]})
        page.goto(f"{live.url}/experiments/{exp['id']}")
        page.locator("#live.on").wait_for()
        page.wait_for_function("() => document.getElementById('chart')._fullLayout")
        assert page.evaluate("() => document.getElementById('chart')._fullLayout.yaxis.range") == [0, 1]
        assert len(_labels(page)) >= 2, "the empty log axis is labelled too"
        screenshot(page, "chart-empty", full_page=False)
        # Data arrives: the axis fits the data again (the empty range is not kept by the live redraw).
        _post(api, exp["runs"][0]["id"], 100.0, 4000.0, 0.62, seed=3)
        page.wait_for_function(
            "() => (document.getElementById('chart').data || []).some(t => (t.uid || '').endsWith('-points'))",
            timeout=20_000,
        )
        page.wait_for_function("() => document.getElementById('chart')._fullLayout.yaxis.range[0] > 0.1")
        page.goto(f"{live.url}/runs/{exp['runs'][1]['id']}")
        page.wait_for_function("() => document.getElementById('chart')._fullLayout")
        assert page.evaluate("() => document.getElementById('chart')._fullLayout.yaxis.range") == [0, 1]
        assert page.evaluate("() => document.getElementById('history')._fullLayout.yaxis.range") == [0, 1]


@pytest.mark.browser
def test_a_finished_run_shows_no_eta(page: Any, live: LiveService) -> None:
    exp = _grid(live, "browser-eta", 100.0, 8000.0)
    running, done = exp["runs"][0]["id"], exp["runs"][1]["id"]
    with live.client() as api:
        api.post(f"/api/v1/runs/{done}/status", json={"status": "succeeded", "reason": "budget reached"})
    # The pace is the server's; here it is fixed, so that only the page's rule is under test.
    answer = {
        "target": 0.9,
        "reachable": True,
        "compute": 20000.0,
        "lo": 12000.0,
        "hi": 40000.0,
        "probability": 0.7,
        "eta_seconds": 600.0,
        "eta_budget_seconds": 300.0,
        "compute_used": 4000.0,
        "budget": 8000.0,
        "reason": "",
    }
    page.route("**/reach?*", lambda r: r.fulfill(status=200, content_type="application/json", body=json.dumps(answer)))
    page.goto(f"{live.url}/runs/{running}")
    page.wait_for_function("() => /reaches/.test(document.getElementById('reach').textContent)")
    text = page.locator("#reach").inner_text()
    assert "ETA 10 min at the current pace" in text and "budget used up in 5 min" in text, text
    page.goto(f"{live.url}/runs/{done}")
    page.wait_for_function("() => /reaches/.test(document.getElementById('reach').textContent)")
    text = page.locator("#reach").inner_text()
    assert "ETA" not in text and "budget used up" not in text, text
    assert "not reached: the run succeeded" in text, text


# Reasons as the rules write them (rl_core/scaling: grid_decisions.py, equal_compute_stops.py, recommend.py,
# decide_grid's hold and min_fraction), each with the glossary terms it must be explained by.
REASONS = [
    (
        "dominated: P(value at budget < b's − 0.01) = 0.97 ≥ 0.9; forecast at budget 0.512 (floored at its recent "
        "level 0.520) vs 0.640",
        {"dominated", "floored"},
    ),
    (
        "cannot matter: expected gain over the leader b is 0.0010 < 0.004; forecast at budget 0.600 vs 0.640",
        {"cannot_matter", "leader"},
    ),
    (
        "behind at equal compute: 0.120 below b over its last 2 evaluations (> 0.061 = margin 0.02 + 2.5 × seed "
        "spread 0.012 × √2)",
        {"behind", "seed_spread"},
    ),
    (
        "successive halving: at 11% of the budget its value is 0.410, and 2 of the other 6 recipes there stand higher "
        "by more than 0.01; only the top 2 of 7 go on (η = 3)",
        {"rung", "eta"},
    ),
    (
        "stop pending confirmation: dominated: P(value at budget < b's − 0.01) = 0.95 ≥ 0.9; forecast at budget 0.5 "
        "(capped at its recent level 0.480: fell 0.100 from its peak 0.580) vs 0.6",
        {"hold", "dominated", "fallen"},
    ),
    ("would stop, but only 6% of the budget is used (< 10%): behind at equal compute: ...", {"too_early", "behind"}),
    (
        "plateaued: the remaining budget buys +0.001 (at most +0.004) < 0.01; predicted 0.6 at budget vs ceiling 0.61; "
        "kept while it may be the best",
        {"plateau"},
    ),
    ("ceiling not identified yet: A in [0.40, 0.95] at 80%; collect more points before deciding", {"unidentified"}),
    ("best of 3 runs by forecast at budget (0.640); on track: ceiling A=0.650, B=1.8", {"leader"}),
]


@pytest.mark.browser
def test_every_rule_term_in_a_reason_is_explained(page: Any, live: LiveService) -> None:
    exp = _grid(live, "browser-glossary", 0.0005, 0.05)
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").nth(2).wait_for()
    # Every reason shape the rules write has its terms marked, with the term's sentence as the tooltip.
    found = page.evaluate(
        """(reasons) => reasons.map((text) => {
             const span = document.createElement('span');
             span.className = 'rec-reason';
             span.textContent = text;
             Glossary.annotate(span);
             return { text: span.textContent, terms: [...span.querySelectorAll('abbr.term')].map(a => a.dataset.term),
                      titles: [...span.querySelectorAll('abbr.term')].map(a => a.title) };
           })""",
        [r for r, _ in REASONS],
    )
    for (reason, terms), got in zip(REASONS, found, strict=True):
        assert got["text"] == reason, "marking a term leaves the reason's text as it was"
        assert terms <= set(got["terms"]), (reason, got["terms"])
        assert all(len(t) > 40 for t in got["titles"])
    # A rule the reason does not name gets a "?" with the rule's sentence.
    q = page.evaluate(
        """() => { const s = document.createElement('span'); s.className = 'rec-reason'; s.dataset.rule = 'rung';
                   s.textContent = 'stopped at the first checkpoint'; Glossary.annotate(s);
                   const a = s.querySelector('abbr.term-q'); return a && [a.dataset.term, a.textContent]; }"""
    )
    assert q == ["rung", "?"]
    # The page's own reasons are marked as they arrive (the table, the verdict), and the Terms block lists every
    # term; a click on a term opens it there.
    marked = "#runs .rec-reason abbr.term, #verdict abbr.term"
    page.wait_for_function(f"() => document.querySelectorAll('{marked}').length > 0", timeout=20_000)
    block = page.locator("[data-glossary-legend] details.terms")
    assert block.locator("dt").count() == 14  # every term of the glossary, compute_target included
    assert not block.evaluate("d => d.open")
    term = page.locator(marked).first
    key = term.get_attribute("data-term")
    term.click()
    assert block.evaluate("d => d.open")
    assert page.locator(f"#term-{key}").evaluate("d => d.classList.contains('active')")
    screenshot(page, "glossary-experiment", full_page=True)
    # The alerts page marks the terms of its messages too.
    page.goto(f"{live.url}/alerts?experiment_id={exp['id']}")
    page.locator("[data-glossary-legend] details.terms").wait_for()
    page.wait_for_function(
        "() => document.querySelectorAll('#alerts tbody tr').length > 0 || !document.getElementById('empty').hidden"
    )
    stops = page.locator("#alerts tbody tr", has_text="should stop early")
    for k in range(stops.count()):
        stops.nth(k).locator(".rec-reason abbr.term").first.wait_for()
    screenshot(page, "glossary-alerts", full_page=False)


def test_the_glossary_states_the_policy_defaults() -> None:
    """The sentences quote the defaults in [brackets] after the policy key (a rule's setting as block.setting); they
    must be Policy's."""
    text = (ROOT / "web" / "static" / "glossary.js").read_text()
    quoted = re.findall(r"([a-z_.]+) \[([\d.]+)(%?)\]", text)
    assert {k for k, _, _ in quoted} >= {
        "value_margin",
        "p_stop",
        "min_expected_gain",
        "hold",
        "min_fraction",
        "rung.eta",
        "seed_z",
        "min_gain",
        "max_ceiling_width",
    }
    policy = Policy()
    for key, value, pct in quoted:
        expected = float(functools.reduce(getattr, key.split("."), policy))
        assert float(value) / (100 if pct else 1) == pytest.approx(expected), (key, value, expected)
    # The numbers written out in full: the behind rule's margin, z and points, hold's 2, rungs at 1/9 and 1/3.
    assert policy.behind == BehindRule(z=2.5, margin=0.02, points=2)
    assert "last 2 evaluations" in text and "0.02 + 2.5 ×" in text
    assert policy.rung is not None and policy.rung.eta == 3 and "1/9 and 1/3" in text


@pytest.mark.browser
def test_compare_on_a_log_x_puts_x_0_in_the_lane(page: Any, live: LiveService) -> None:
    exp = _grid(live, "browser-compare-lane", 0.02, 0.05)
    page.goto(f"{live.url}/experiments/{exp['id']}?cmp_x=compute&cmp_logx=1")
    page.wait_for_function(
        "() => (document.getElementById('cmp-chart').data || []).filter(t => (t.uid || '').endsWith('-zero'))"
        ".length === 3"
    )
    page.wait_for_function(ARRAY_TICKS.replace("'chart'", "'cmp-chart'"))
    labels = [t for t in page.evaluate(TICKS.replace("#chart", "#cmp-chart")) if t.strip()]
    _check_ticks(labels, 0.02, 0.05)
    lines = page.evaluate(
        "() => document.getElementById('cmp-chart').data.filter(t => (t.uid || '').startsWith('cmp-run-')"
        " && !t.uid.endsWith('-zero')).map(t => Math.min(...t.x))"
    )
    assert len(lines) == 3 and all(x > 0 for x in lines), "the lines start at the first positive compute"
    legend = page.evaluate("() => [...document.querySelectorAll('#cmp-chart .legendtext')].map(t => t.textContent)")
    assert "at compute 0" in legend, legend
    # Seeds as mean and band: the lane still holds the value at compute 0.
    page.get_by_label("Seeds as mean and band").check()
    page.wait_for_function(
        "() => (document.getElementById('cmp-chart').data || []).some(t => (t.uid || '').endsWith('-zero'))"
        " && document.getElementById('cmp-chart').data"
        ".some(t => (t.name || '').length && !(t.uid || '').startsWith('cmp-run-'))"
    )
    page.locator("#compare-card").screenshot(path=str(ROOT / "tests" / "artifacts" / "compare-lane.png"))


@pytest.mark.browser
def test_log_ticks_label_every_range_and_width(page: Any, live: LiveService) -> None:
    """Charts.logTicks over 12 decades of position, ranges from 0.05 to 9 decades, plots 120 to 1000 px wide:
    always two or more ticks inside the range, increasing, each labelled with its own value, none overlapping."""
    page.set_content("<!doctype html><html><body></body></html>")
    page.add_script_tag(url=f"{live.url}/static/charts.js")
    cases = [
        (float(lo), float(lo * 10**span), width)
        for lo in np.geomspace(1e-6, 1e6, 13)
        for span in (0.05, 0.3, 0.7, 1.0, 2.0, 3.5, 6.0, 9.0)
        for width in (120, 300, 600, 1000)
    ]
    out = page.evaluate(
        "(cases) => cases.map(([lo, hi, w]) => { const v = Charts.logTicks(lo, hi, w);"
        " return { v, t: v.map(Charts.tickText) }; })",
        cases,
    )
    for (lo, hi, width), got in zip(cases, out, strict=True):
        vals, labels = got["v"], got["t"]
        assert len(vals) >= 2, (lo, hi, width, labels)
        assert all(lo * (1 - 1e-6) <= v <= hi * (1 + 1e-6) for v in vals), (lo, hi, vals)
        assert vals == sorted(vals) and len(set(labels)) == len(labels), (lo, hi, width, labels)
        for v, label in zip(vals, labels, strict=True):
            assert _number(label) == pytest.approx(v, rel=1e-3), (label, v)
        # Neighbouring labels do not overlap (about 7 px a character at the axis' font size).
        px = [np.log10(v / lo) / np.log10(hi / lo) * width for v in vals]
        for k in range(1, len(vals)):
            assert px[k] - px[k - 1] >= (len(labels[k]) + len(labels[k - 1])) * 3.5, (lo, hi, width, labels)
