"""``Client.list_runs`` with the REST filters: config and summary values compared as stored, tags, sort."""

from __future__ import annotations

import pytest

from scalerl.client import ApiError, Client
from tests.client.conftest import Service


def test_list_runs_filters_and_sorts(service: Service) -> None:
    with Client(service.url, service.token) as api:
        exp = int(api.ensure_experiment("listing")["id"])
        for i, (lr, kl, tags) in enumerate([(1e-3, True, ["a"]), (3e-4, False, ["a", "b"]), (1e-3, False, ["b"])]):
            run = api.register_run(f"r{i}", experiment_id=exp, config={"lr": lr, "use_kl": kl}, tags=tags)
            api.update_run(run.id, summary={"best": 0.5 + 0.1 * i})
        names = lambda runs: [r.name for r in runs]  # noqa: E731
        assert names(api.list_runs(exp, config={"lr": 0.001})) == ["r0", "r2"]
        assert names(api.list_runs(exp, config={"lr": 0.001, "use_kl": False})) == ["r2"]
        assert names(api.list_runs(exp, tags=["a", "b"])) == ["r1"]
        assert names(api.list_runs(exp, tags="b", sort="-summary.best")) == ["r2", "r1"]
        first = api.list_runs(exp, sort="config.lr")[0]
        assert first.name == "r1" and first.config["lr"] == 3e-4 and first.tags == ("a", "b")
        with pytest.raises(ApiError) as bad:
            api.list_runs(exp, sort="bogus")
        assert bad.value.status_code == 422 and "sort" in str(bad.value)
