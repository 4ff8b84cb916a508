"""The experiment page says what the adaptive band (``fit: {adaptive_band: true}``) did, in the
assessment's own words and with its multiplier; without the option the note is not shown."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.conftest import LiveService
from tests.web.data import assessed, create_experiment, open_experiment_at, post_curve

pytestmark = pytest.mark.browser


def _band_note(page: Any, live: LiveService, exp_id: int, version: int) -> dict[str, Any]:
    open_experiment_at(page, live.url, exp_id, version)
    return page.evaluate(  # type: ignore[no-any-return]
        """() => { const n = document.getElementById('band-note');
                   return {hidden: n.hidden, text: n.textContent, scale: n.dataset.scale || null}; }"""
    )


def test_the_page_shows_the_adaptive_band_note_only_when_it_is_on(page: Any, live: LiveService) -> None:
    with live.client() as api:
        on = create_experiment(
            api, "browser-adaptive-on", grid={"batch.prompts": [16, 32]}, fit={"adaptive_band": True}
        )
        off = create_experiment(api, "browser-adaptive-off", grid={"batch.prompts": [16, 32]})
        for exp in (on, off):
            for k, run in enumerate(exp["runs"]):
                post_curve(api, run["id"], 0.5 + 0.1 * k, n=20, seed=k + 1)
        a_on, a_off = assessed(api, on["id"]), assessed(api, off["id"])
    assert a_off["adaptive_band"] is None and a_on["adaptive_band"] is not None
    seen = _band_note(page, live, on["id"], a_on["version"])
    assert not seen["hidden"], seen
    assert seen["text"] == f"Adaptive band: {a_on['adaptive_band']['note']}.", seen
    assert float(seen["scale"]) == a_on["adaptive_band"]["scale"], seen
    hidden = _band_note(page, live, off["id"], a_off["version"])
    assert hidden["hidden"] and hidden["text"] == "", hidden
