"""GET /api/v1/runs filtered by a run's config, summary and tags, and sorted by a column or a config/summary key, on
SQLite and PostgreSQL (users comparing runs as in W&B/MLflow could only filter by experiment, status and name); a
malformed filter or sort is a 422 naming what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from server.lifecycle import run_query
from server.lifecycle.run_query import lookup, value_matches
from tests.server.conftest import Service


def _names(service: Service, query: str) -> list[str]:
    r = service.client.get(f"/api/v1/runs?{query}", headers=service.read)
    assert r.status_code == 200, (query, r.text)
    return [run["name"] for run in r.json()]


def _grid(service: Service) -> int:
    """Runs a, b, c in one tracking experiment and d in another (config, tags, summary, budget told apart)."""
    c, h = service.client, service.write
    exp = c.post("/api/v1/experiments/tracking", json={"name": "sweep"}, headers=h).json()
    other = c.post("/api/v1/experiments/tracking", json={"name": "other"}, headers=h).json()
    runs: list[tuple[str, int, dict[str, Any]]] = [
        ("a", exp["id"], {"config": {"lr": 1e-3, "loss": "cispo", "use_kl": True, "batch": 32},
                          "tags": ["sweep", "baseline"], "budget": 10.0}),
        ("b", exp["id"], {"config": {"lr": 3e-3, "loss": "dapo", "use_kl": False, "batch": 64}, "tags": ["sweep"]}),
        ("c", exp["id"], {"config": {"lr": "0.001", "optimizer.beta": 0.9}, "budget": 5.0}),
        ("d", other["id"], {"config": {"lr": 0.001}, "tags": ["sweep"]}),
    ]  # fmt: skip
    for name, exp_id, extra in runs:
        made = c.post("/api/v1/runs", json={"name": name, "experiment_id": exp_id, **extra}, headers=h)
        assert made.status_code == 201, made.text
    ids = {r["name"]: r["id"] for r in c.get("/api/v1/runs", headers=service.read).json()}
    for name, best in (("a", 0.7), ("b", 0.8)):
        patched = c.patch(f"/api/v1/runs/{ids[name]}", json={"summary": {"best": best}}, headers=h)
        assert patched.status_code == 200, patched.text
    assert c.post(f"/api/v1/runs/{ids['b']}/stop", headers=h).status_code == 200
    return int(exp["id"])


def test_config_summary_and_tag_filters(service: Service) -> None:
    exp = _grid(service)
    e = f"experiment_id={exp}"
    # a number compares as a number: 0.001, 1e-3 and 0.0010 are the one float; the string "0.001" of run c matches
    # the text 0.001 only, as a string
    assert _names(service, "config.lr=0.001") == ["a", "c", "d"]
    assert _names(service, f"{e}&config.lr=1e-3") == ["a"]
    assert _names(service, f"{e}&config.lr=0.0010") == ["a"]
    assert _names(service, f"{e}&config.batch=32.0") == ["a"]
    assert _names(service, f"{e}&config.use_kl=true") == ["a"]
    assert _names(service, f"{e}&config.use_kl=false") == ["b"]
    assert _names(service, f"{e}&config.use_kl=1") == []
    assert _names(service, f"{e}&config.loss=cispo&config.batch=32") == ["a"]
    assert _names(service, f"{e}&config.loss=cispo&config.batch=64") == []
    assert _names(service, f"{e}&config.optimizer.beta=0.9") == ["c"]  # a dotted key stored flat
    assert _names(service, f"{e}&config.missing=1") == []
    assert _names(service, "summary.best=0.8") == ["b"]
    assert _names(service, "tag=sweep") == ["a", "b", "d"]
    assert _names(service, "tag=sweep&tag=baseline") == ["a"]
    assert _names(service, f"{e}&tag=sweep&status=stopped") == ["b"]
    assert _names(service, "tag=nope") == []
    # unknown parameters that do not look like filters are ignored, as before
    assert _names(service, f"{e}&whatever=1") == ["a", "b", "c"]


def test_sort_by_a_column_or_a_key_with_missing_values_last(service: Service) -> None:
    exp = _grid(service)
    e = f"experiment_id={exp}"
    assert _names(service, f"{e}&sort=-summary.best") == ["b", "a", "c"]
    assert _names(service, f"{e}&sort=summary.best") == ["a", "b", "c"]
    assert _names(service, f"{e}&sort=-config.batch") == ["b", "a", "c"]
    assert _names(service, f"{e}&sort=-id") == ["c", "b", "a"]
    assert _names(service, "sort=-name") == ["d", "c", "b", "a"]
    assert _names(service, f"{e}&sort=budget") == ["c", "a", "b"]  # b has no budget: last
    assert _names(service, f"{e}&sort=-budget") == ["a", "c", "b"]
    assert _names(service, f"{e}&sort=status") == ["a", "c", "b"]  # queued < stopped; ties by id
    # a column sort under a config filter, and the page cut after filtering and sorting
    assert _names(service, "config.lr=0.001&sort=-budget") == ["a", "c", "d"]
    assert _names(service, "tag=sweep&sort=-summary.best&limit=1") == ["b"]
    assert _names(service, "tag=sweep&sort=-summary.best&limit=1&offset=1") == ["a"]
    assert _names(service, "tag=sweep&sort=-summary.best&limit=5&offset=3") == []
    got = service.client.get(f"/api/v1/runs?{e}&tag=sweep&recipes=true&limit=10", headers=service.read).json()
    assert [r["name"] for r in got] == ["a", "b"] and got[0]["config"]["loss"] == "cispo"


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("config.=1", "the config key is empty; write config.<key>=<value>"),
        ("summary.=1", "the summary key is empty; write summary.<key>=<value>"),
        ("config=lr", "name the key: config.<key>=<value>"),
        ("tags=sweep", "the tag filter is tag=<tag>"),
        ("sort=bogus", "'bogus' is not a field runs can be sorted by; allowed: id, name, status"),
        ("sort=config.", "the config key is empty"),
        ("sort=-", "is not a field runs can be sorted by"),
        ("tag=" + "x" * 65, "a tag has 1 to 64 characters"),
        ("tag=", "a tag has 1 to 64 characters"),
        ("config.lr=" + "1" * 501, "at most 500 are allowed"),
        ("config.lr=a%00b", "must not contain NUL"),
        ("summary.b%00est=1", "must not contain NUL"),
    ],
)
def test_malformed_filters_are_a_422_naming_what_is_allowed(service: Service, query: str, says: str) -> None:
    r = service.client.get(f"/api/v1/runs?{query}", headers=service.read)
    assert r.status_code == 422, r.text
    assert says in r.json()["detail"], r.json()


def test_too_many_runs_to_filter_is_a_422_asking_for_a_narrower_list(
    service: Service, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = _grid(service)
    monkeypatch.setattr(run_query, "MAX_SCAN", 3)
    r = service.client.get("/api/v1/runs?tag=sweep", headers=service.read)
    assert r.status_code == 422 and "more than 3 runs" in r.json()["detail"] and "experiment_id" in r.text
    assert _names(service, f"experiment_id={exp}&tag=sweep") == ["a", "b"]  # 3 runs read: within the bound
    assert len(_names(service, "sort=-id")) == 4  # a column sort stays in SQL: never bounded by it


def test_lookup_and_matching_rules() -> None:
    nested = {"optimizer": {"lr": 1e-3, "betas.0": 0.9}, "a.b": {"c": 1}, "flat.key": "x"}
    assert lookup(nested, "optimizer.lr") == 1e-3
    assert lookup(nested, "optimizer.betas.0") == 0.9
    assert lookup(nested, "a.b.c") == 1
    assert lookup(nested, "flat.key") == "x"
    assert lookup(nested, "optimizer.nope") is lookup(nested, "nope")  # the missing marker
    assert value_matches(1e-3, "0.001") and value_matches(1e-3, "1E-3") and not value_matches(1e-3, "0.0011")
    assert value_matches(2**60 + 1, str(2**60 + 1)) and not value_matches(2**60 + 1, str(2**60))
    assert value_matches(True, "TRUE") and not value_matches(True, "1") and not value_matches(1, "true")
    assert not value_matches(1.0, "nan") and not value_matches(1.0, "inf") and not value_matches(1.0, "")
    assert value_matches("0.001", "0.001") and not value_matches("0.001", "1e-3")
