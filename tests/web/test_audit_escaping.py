"""User text on every page is shown as text, never as HTML, and never as Plotly's HTML-like markup either.

Run names (from grid values: ``length.interruption.phrase`` takes any string), compute units, task and model names,
metric names, stop reasons, token and webhook names are all free text. The DOM is checked through
``textContent`` (``h()`` in ``core.js``); Plotly renders a subset of HTML (``<b>``, ``<a href>``, ``<span style>``,
``<br>``) in legend entries, axis titles, annotations and hover labels, so the chart texts are checked too: the
payload must appear there literally, with no link and no markup made from it. Also: the grid form shows the
server's errors next to the form (both tabs), and pages with awkward data (no points, failed and lost runs, 10k
points, a very long name) render without a page or console error.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.server.helpers import curve_points
from tests.web.conftest import LiveService, only_this_server, screenshot
from tests.web.data import create_experiment, post_curve, set_status
from tests.web.forms import field_error, open_new_experiment

pytestmark = pytest.mark.browser

#: HTML that would run a script or inject an element if inserted as HTML.
IMG = '<img src=x onerror="window.__injected=1">'
#: Markup that Plotly renders in its texts (a link out, bold text, a huge span).
LINK = '<a href="https://evil.example/">x</a>'
BOLD = "<b>bold</b>"
SPAN = '<span style="font-size:80px">big</span>'
JS_LINK = '<a href="javascript:window.__injected=2">js</a>'
QUOTES = 'it\'s "quoted" & {braces} %{y}'

RUN_VALUES = [IMG + " " + BOLD, LINK + " " + JS_LINK, SPAN + " " + QUOTES]
UNIT = "<b>h</b>" + LINK  # at most 50 characters
METRIC = "train/" + LINK.replace(" ", "_")  # arbitrary metric names are allowed

#: Everything Plotly drew on the page: texts, links and styled spans inside its SVG.
PLOT_TEXTS = """() => {
  const out = {texts: [], links: [], styled: [], bold: []};
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    for (const t of gd.querySelectorAll('svg text')) out.texts.push(t.textContent);
    for (const a of gd.querySelectorAll('svg a')) out.links.push(`${gd.id}: ${a.closest('text').textContent}`);
    for (const s of gd.querySelectorAll('svg tspan[style]')) {
      const st = s.getAttribute('style') || '';
      const where = `${gd.id}: ${s.closest('text').textContent}`;
      if (/font-size/.test(st)) out.styled.push(where);
      if (/font-weight/.test(st) && !s.closest('.annotation')) out.bold.push(where);
    }
  }
  return out;
}"""


def _no_injection(page: Any) -> None:
    assert page.evaluate("() => window.__injected") is None
    assert page.locator("main img").count() == 0
    texts = page.evaluate(PLOT_TEXTS)
    assert texts["links"] == [], "a link made from user text in a Plotly chart"
    assert texts["styled"] == [], "a styled span made from user text in a Plotly chart"
    assert texts["bold"] == [], "bold text made from user text in a Plotly chart"


def _hostile_experiment(live: LiveService, name: str) -> dict[str, Any]:
    with live.client() as api:
        exp = create_experiment(
            api,
            name,
            grid={"length.interruption.phrase": RUN_VALUES},
            compute_unit=UNIT,
            task="task " + IMG,
            model="model " + LINK,
            description="desc " + IMG,
        )
        for i, run in enumerate(exp["runs"]):
            points = curve_points(0.5 + 0.1 * i, n=24, c_max=4000.0, seed=i)
            for p in points:
                p["metrics"] = {METRIC: p["pass_rate"], "train/reward_mean": p["pass_rate"]}
            res = api.post(f"/api/v1/runs/{run['id']}/metrics", json={"points": points})
            res.raise_for_status()
    return exp


def test_hostile_run_names_and_units_on_the_experiment_page(page: Any, live: LiveService) -> None:
    exp = _hostile_experiment(live, "audit-escape-experiment")
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").nth(2).wait_for()
    page.locator("#chart .legendtext").first.wait_for()
    page.locator("#cmp-chart .legendtext").first.wait_for()
    page.wait_for_timeout(500)
    table = page.locator("#runs").inner_text()
    for value in RUN_VALUES:
        assert value in table
    _no_injection(page)
    texts = page.evaluate(PLOT_TEXTS)["texts"]
    joined = "\n".join(texts)
    legend = page.locator("#chart .legendtext").all_text_contents()
    assert sorted(legend) == sorted(_legend(r["name"]) for r in exp["runs"]), legend
    assert any(BOLD in t for t in legend) and any('<a href="https:' in t for t in legend)
    assert f"compute ({UNIT}, log scale)" in joined, texts
    assert "&quot;" not in joined and "&#" not in joined, "an entity shown literally"

    # Hover labels: the run's points, its parallel-coordinates line (the recipe value is in the hover text). The
    # parallel-coordinates line appears once the run's fit is stored, which can come after the legend on a busy server.
    for plot, uid in (("chart", f"run-{exp['runs'][2]['id']}-points"), ("parcoords", f"pc-run-{exp['runs'][2]['id']}")):
        page.wait_for_function(HAS_TRACE, arg=[plot, uid], timeout=30_000)
        hover = page.evaluate(HOVER, [plot, uid])
        assert "big" in hover["text"] and hover["styled"] == 0 and hover["links"] == 0, hover
        assert "&#" not in hover["text"] and "&quot;" not in hover["text"], hover
        assert QUOTES in hover["text"], hover


def _legend(name: str, limit: int = 64) -> str:
    """A legend entry: long names are cut in the middle (``Charts.legendName``)."""
    tail = limit // 3
    return name if len(name) <= limit else name[: limit - tail - 1] + "…" + name[-tail:]


#: Whether the plot has drawn the trace with this uid.
HAS_TRACE = """([id, uid]) => {
  const gd = document.getElementById(id);
  return !!(gd && gd.data && gd.data.some((t) => t.uid === uid));
}"""

#: Hover the first point of the trace with this uid; the hover label's text, styled spans and links.
HOVER = """([id, uid]) => {
  const gd = document.getElementById(id);
  const curve = gd.data.findIndex((t) => t.uid === uid);
  Plotly.Fx.hover(gd, [{curveNumber: curve, pointNumber: 0}]);
  const layer = gd.querySelector('.hoverlayer');
  const styled = [...layer.querySelectorAll('tspan[style]')].filter((s) => /font-size/.test(s.getAttribute('style')));
  return {text: layer.textContent, styled: styled.length, links: layer.querySelectorAll('a').length};
}"""


def test_hostile_metric_names_units_and_reasons_on_the_run_page(page: Any, live: LiveService) -> None:
    exp = _hostile_experiment(live, "audit-escape-run")
    run = exp["runs"][1]
    with live.client() as api:
        res = api.post(f"/api/v1/runs/{run['id']}/stop", json={"reason": "stop " + IMG + LINK})
        assert res.status_code == 200, res.text
    page.goto(f"{live.url}/runs/{run['id']}")
    page.locator("#facts dd").first.wait_for()
    page.locator("#chart .g-xtitle").wait_for()
    assert page.locator("#run-name").inner_text() == run["name"]
    assert "stop " + IMG + LINK in page.locator("#transitions").inner_text()
    assert "task " + IMG in page.locator("#run-meta").inner_text()
    page.locator("#other-metric").select_option(METRIC)
    page.locator("#other-chart .gtitle").wait_for()
    assert page.locator("#other-chart .gtitle").text_content() == METRIC
    _no_injection(page)
    texts = "\n".join(page.evaluate(PLOT_TEXTS)["texts"])
    assert f"compute ({UNIT}, log scale)" in texts and f"compute seen by the fit ({UNIT}, log scale)" in texts
    hover = page.evaluate(HOVER, ["chart", f"run-{run['id']}-points"])
    assert run["name"] in hover["text"] and UNIT in hover["text"] and hover["links"] == 0, hover


def test_a_metric_name_from_the_address_is_shown_as_text_in_the_comparison(page: Any, live: LiveService) -> None:
    """``?cmp_metric=`` comes from a link anyone can send: it names the comparison's y axis."""
    exp = _hostile_experiment(live, "audit-escape-compare")
    page.goto(f"{live.url}/experiments/{exp['id']}?cmp_metric={quote(METRIC)}")
    page.locator("#cmp-chart .g-ytitle").wait_for()
    assert "<a href" in page.locator("#cmp-chart .g-ytitle").text_content()
    page.goto(f"{live.url}/experiments/{exp['id']}?cmp_metric={quote(LINK + BOLD)}")
    page.locator("#runs tbody tr").first.wait_for()
    page.wait_for_timeout(1000)
    _no_injection(page)


@pytest.mark.parametrize("target", ["/\\evil.example/", "/\t/evil.example/", "//evil.example/", "javascript:alert(1)"])
def test_sign_in_goes_back_only_to_a_page_of_this_server(page: Any, live: LiveService, target: str) -> None:
    """``/signin?next=`` is in links anyone can send: browsers read ``/\\host`` (and ``/<tab>/host``) as
    ``//host``, another origin, so "starts with a single slash" is not enough."""
    elsewhere = only_this_server(page, live)
    page.goto(f"{live.url}/signin?next={quote(target)}")
    page.get_by_label("API token", exact=True).fill(live.read_token)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()
    assert page.url == f"{live.url}/", page.url
    assert elsewhere == []


def test_clone_round_trips_text_that_yaml_would_read_as_something_else(page: Any, live: LiveService) -> None:
    """The clone (and "from the form") writes YAML, which the server reads as YAML 1.1: ``yes``, ``off``, ``Null``,
    ``1_000`` or ``.inf`` written bare would come back as a boolean, null or number, and the document fail."""
    phrases = ["off", 'say "hi" <b>{x}</b> #1', ".inf"]
    with live.client() as api:
        exp = create_experiment(
            api,
            "audit-clone-yaml",
            grid={"length.interruption.phrase": phrases},
            task="yes",
            model="1_000",
            description="Null",
            compute_unit="on",
        )
    page.goto(f"{live.url}/experiments/new?from={exp['id']}")
    page.locator("#clone-note", has_text=f"Cloned from experiment {exp['id']}").wait_for()
    page.locator("#yaml-preview").click()
    page.locator("#preview-summary", has_text="3 runs").wait_for()
    assert page.locator("#yaml-errors").is_hidden(), page.locator("#yaml-errors").inner_text()
    assert "total compute 24,000 " in page.locator("#preview-summary").inner_text()
    table = page.locator("#preview-table").inner_text()
    for phrase in phrases:
        assert f"length.interruption.phrase = {json.dumps(phrase)}" in table, table
    # The form's own values go through the same writer ("Fill from the form").
    page.get_by_role("tab", name="Form").click()
    page.get_by_label("Name").fill("audit-form-yaml")
    page.get_by_label("Task").fill("no")
    page.get_by_label("Model").fill("True")
    page.get_by_label("Budget per run").fill("300")
    page.locator("#axis-key-0").fill("length.interruption.phrase")
    page.locator("#axis-values-0").fill("on, OFF")
    page.get_by_role("tab", name="YAML").click()
    page.locator("#yaml-from-form").click()
    page.locator("#yaml-preview").click()
    page.locator("#preview-summary", has_text="2 runs").wait_for()
    assert page.locator("#yaml-errors").is_hidden(), page.locator("#yaml-errors").inner_text()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: [unclosed\n", "not a valid YAML document"),
        ("- just\n- a list\n", "must be a mapping"),
        ("", "must be a mapping"),
        ("name: " + IMG + "\ntask: t\nmodel: m\nbudget: 1\n", "name: String should match pattern"),
    ],
)
def test_bad_yaml_shows_the_servers_error_next_to_the_form(
    page: Any, live: LiveService, text: str, expected: str
) -> None:
    page.goto(f"{live.url}/experiments/new")
    page.get_by_role("tab", name="YAML").click()
    page.get_by_label("Grid document (YAML or JSON)").fill(text)
    for button in ("#yaml-preview", "#yaml-submit"):
        page.locator(button).click()
        errors = page.locator("#yaml-errors")
        errors.locator("li").first.wait_for()
        assert expected in errors.inner_text(), errors.inner_text()
        assert page.get_by_label("Grid document (YAML or JSON)").get_attribute("aria-invalid") == "true"
    assert page.url.endswith("/experiments/new")
    assert page.evaluate("() => window.__injected") is None and page.locator("main img").count() == 0


def test_bad_form_input_shows_the_servers_error_and_a_good_one_still_submits(page: Any, live: LiveService) -> None:
    open_new_experiment(page, live.url, {"Name": IMG, "Task": "task " + IMG, "Budget per run": "300"})
    page.locator("#axis-key-0").fill("no.such.key")
    assert "should match pattern" in field_error(page, "Create experiment", "err-name")
    page.get_by_label("Name").fill("audit-form-ok")
    assert "unknown key" in field_error(page, "Preview runs", "err-axis-0")
    assert page.locator("#err-name").is_hidden()
    page.locator("#axis-key-0").fill("length.interruption.phrase")
    page.locator("#axis-values-0").fill(f"{IMG}, {LINK}")
    page.get_by_role("button", name="Preview runs").click()
    page.locator("#preview-table tbody tr").nth(1).wait_for()
    assert IMG in page.locator("#preview-table").inner_text()
    page.get_by_role("button", name="Create experiment").click()
    page.wait_for_url(re.compile(r"/experiments/\d+$"))
    page.locator("#runs tbody tr").nth(1).wait_for()
    assert page.locator("#exp-meta").inner_text().startswith("task " + IMG)
    page.locator("#chart .main-svg").first.wait_for()
    _no_injection(page)


LONG = "x" * 190  # no space to break at
WIDE = "مرحبا-🚀-\u202eevil\u202c-" + "y" * 60  # right-to-left text, an emoji, an RTL override


#: The innermost elements that stick out of the window on the right.
WIDER = """() => [...document.querySelectorAll('body *')]
  .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)
  .filter((e) => ![...e.children].some((c) => c.getBoundingClientRect().right > window.innerWidth + 1))
  .slice(0, 8).map((e) => `${e.tagName}#${e.id}.${e.className} ${Math.round(e.getBoundingClientRect().right)}`)"""


def _no_overflow(page: Any) -> None:
    width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    wide = page.evaluate(WIDER)
    assert width[0] <= width[1], f"the page scrolls sideways: {width}: {wide}"


def test_awkward_experiments_render_without_errors(page: Any, live: LiveService) -> None:
    """No points at all; a failed, a lost and a 10k-point run; very long names with no space, RTL text, emoji."""
    with live.client() as api:
        empty = create_experiment(api, "audit-empty-" + "e" * 150, grid={"batch.prompts": [32, 48]})
        exp = create_experiment(
            api, "audit-" + LONG, grid={"length.interruption.phrase": ["z" + LONG, WIDE, "failed", "lost", "big"]}
        )
        runs = {r["overrides"]["length.interruption.phrase"]: r for r in exp["runs"]}
        post_curve(api, runs[WIDE]["id"], 0.6, n=20, c_max=3000.0)
        post_curve(api, runs["failed"]["id"], 0.4, n=6, c_max=800.0)
        res = api.post(
            f"/api/v1/runs/{runs['failed']['id']}/status", json={"status": "failed", "reason": "boom " + IMG}
        )
        assert res.status_code == 200, res.text
        big = curve_points(0.7, n=10_000, c_max=6000.0)
        api.post(f"/api/v1/runs/{runs['big']['id']}/metrics", json={"points": big}).raise_for_status()
    set_status(live, runs["lost"]["id"], "running", "lost", reason="browser-test " + IMG)

    page.goto(f"{live.url}/experiments/{empty['id']}")
    page.locator("#runs tbody tr").nth(1).wait_for()
    page.locator("#chart .main-svg").first.wait_for()
    assert "no usable fit yet" in page.locator("#rank-ceiling").inner_text()
    _no_overflow(page)

    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").nth(4).wait_for()
    page.locator("#chart .legendtext").first.wait_for()
    assert page.locator("#exp-name").inner_text() == "audit-" + LONG
    table = page.locator("#runs").inner_text()
    assert WIDE in table and "lost" in table and "failed" in table
    assert "downsampled" in page.locator("#chart-note").inner_text()
    page.wait_for_timeout(500)
    screenshot(page, "audit-long-names", full_page=False)
    plot = page.evaluate("() => [document.getElementById('chart')._fullLayout._size.w, chart.clientWidth]")
    assert plot[0] > 0.5 * plot[1], f"long legend entries squeeze the plot: {plot}"
    assert _legend(runs[WIDE]["name"]) in page.locator("#chart .legend").text_content()
    _no_overflow(page)
    _no_injection(page)

    for run in runs.values():
        page.goto(f"{live.url}/runs/{run['id']}")
        page.locator("#facts dd").first.wait_for()
        page.locator("#chart .main-svg").first.wait_for()
        assert page.locator("#run-name").inner_text() == run["name"]
        page.wait_for_timeout(300)
        _no_overflow(page)
        _no_injection(page)

    page.goto(live.url + "/")
    page.locator(f'#experiments tr[data-experiment-id="{exp["id"]}"]').wait_for()
    _no_overflow(page)
    page.goto(f"{live.url}/alerts")
    page.locator("#alerts tbody tr").first.wait_for()
    _no_overflow(page)
    _no_injection(page)


def test_hostile_token_and_webhook_names_on_the_settings_page(page: Any, live: LiveService) -> None:
    name = "tok:+=@/ a.b-" + "t" * 150  # token names are restricted (server.base.types.Name); long is allowed
    with live.client() as api:
        api.post("/api/v1/tokens", json={"name": name, "scopes": ["read"]}).raise_for_status()
        hook = api.post("/api/v1/alerts/webhooks", json={"name": "hook " + IMG, "url": "https://hooks.example/x"})
        hook.raise_for_status()
    page.context.add_init_script(f"localStorage.setItem('scalerl.token', {live.admin_token!r});")
    page.goto(f"{live.url}/settings")
    page.locator("#tokens tbody tr").first.wait_for()
    page.locator("#hooks tbody tr").first.wait_for()
    assert name in page.locator("#tokens").inner_text()
    assert "hook " + IMG in page.locator("#hooks").inner_text()
    page.get_by_role("button", name=f"Delete webhook hook {IMG}").click()
    dialog = page.locator("dialog#confirm")
    dialog.wait_for(state="visible")
    assert dialog.locator("h2").inner_text() == f"Delete hook {IMG}?"
    dialog.get_by_role("button", name="Cancel").click()
    page.get_by_role("button", name=f"Revoke token {name}").click()
    dialog.wait_for(state="visible")
    assert dialog.locator("h2").inner_text() == f"Revoke {name}?"
    dialog.get_by_role("button", name="Cancel").click()
    # A bad name from the form: the server's message, as text, next to the form.
    page.locator("#token-create input[name=name]").fill(IMG)
    page.locator("#token-create").evaluate("(f) => f.requestSubmit()")
    error = page.locator("#token-create-error")
    error.wait_for(state="visible")
    assert "should match pattern" in error.inner_text()
    _no_injection(page)


def test_csv_cells_never_start_a_spreadsheet_formula(page: Any, live: LiveService) -> None:
    """The runs table's CSV download (``Export.cell``): recipe values and reasons are free text."""
    with live.client() as api:
        exp = create_experiment(api, "audit-csv", grid={"length.interruption.phrase": ["-2+3+cmd|' /C calc'!A0"]})
    page.goto(f"{live.url}/experiments/{exp['id']}")
    page.locator("#runs tbody tr").first.wait_for()
    with page.expect_download() as download:
        page.locator("#export-csv").click()
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert ",'-2+3+cmd|' /C calc'!A0," in text, text
    cells = page.evaluate(
        """() => [-0.5, 1e-7, "-0.25", "1e5", "-2+3+cmd|' /C calc'!A0", "=1+1", "@SUM(A1)", "+x", "\\t=1", "-x",
                  "plain", "a,b"].map(Export.cell)"""
    )
    assert cells == [
        "-0.5",
        "1e-7",
        "-0.25",
        "1e5",
        "'-2+3+cmd|' /C calc'!A0",
        "'=1+1",
        "'@SUM(A1)",
        "'+x",
        "'\t=1",
        "'-x",
        "plain",
        '"a,b"',
    ]
