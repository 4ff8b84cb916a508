"""`scalerl runs` with the runs' config, summary and tags: `--columns` adds them, `--tag`, `--where` and `--sort` pass
to the REST filters, tags are shown whenever a listed run has some, and a malformed option is one error line."""

from __future__ import annotations

from scalerl.client import Client
from tests.client.conftest import Service
from tests.integrations.test_own_runs_cli import invoke


def _runs(service: Service) -> None:
    with Client(service.url, service.token) as api:
        a = api.register_run("lr-1e-3", experiment="cols", config={"lr": 1e-3, "loss": "cispo"}, tags=["sweep", "base"])
        b = api.register_run("lr-3e-3", experiment="cols", config={"lr": 3e-3, "loss": "cispo"}, tags=["sweep"])
        api.register_run("plain", experiment="cols", config={"loss": "grpo"})
        api.update_run(a.id, summary={"best": 0.7})
        api.update_run(b.id, summary={"best": 0.8})


def _lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.strip()]


def test_columns_filters_and_sort(service: Service) -> None:
    _runs(service)
    code, out = invoke(service, "runs", "--experiment", "cols", "--columns", "config.lr,summary.best")
    assert code == 0, out
    first, second, third = _lines(out)
    # tags first (shown by default: some run has them), then the columns asked for, aligned
    assert "lr-1e-3  queued" in first and first.endswith("tags=sweep,base  config.lr=0.001  summary.best=0.7"), out
    assert second.endswith("tags=sweep       config.lr=0.003  summary.best=0.8"), out
    assert third.endswith("tags=-           config.lr=-      summary.best=-"), out

    code, out = invoke(service, "runs", "--where", "config.lr=1e-3", "--columns", "config.loss")
    assert code == 0 and len(_lines(out)) == 1 and "lr-1e-3" in out and "config.loss=cispo" in out, out
    code, out = invoke(service, "runs", "--tag", "sweep", "--sort", "-summary.best", "--columns", "summary.best")
    assert code == 0 and [line.split()[3] for line in _lines(out)] == ["lr-3e-3", "lr-1e-3"], out
    code, out = invoke(service, "runs", "--tag", "sweep", "--tag", "base")
    assert code == 0 and _lines(out)[0].split()[3] == "lr-1e-3" and len(_lines(out)) == 1, out
    code, out = invoke(service, "runs", "--where", "tag=base", "--where", "summary.best=0.7")
    assert code == 0 and len(_lines(out)) == 1 and "lr-1e-3" in out, out
    code, out = invoke(service, "runs", "--where", "config.lr=0.5")
    assert code == 0 and out.strip() == "no runs", out
    code, out = invoke(service, "runs", "--experiment", "cols", "--sort", "-name")
    assert code == 0 and [line.split()[3] for line in _lines(out)] == ["plain", "lr-3e-3", "lr-1e-3"], out
    # no tags anywhere: no tags column
    code, out = invoke(service, "runs", "--where", "config.loss=grpo", "--columns", "notes")
    assert code == 0 and "plain" in out and "tags=" not in out and out.rstrip().endswith("notes=-"), out
    code, out = invoke(service, "runs", "--experiment", "cols", "--status", "queued", "--tag", "nope")
    assert code == 0 and out.strip() == "no runs", out


def test_malformed_options_are_one_error_line(service: Service) -> None:
    _runs(service)
    for args, says in (
        (("--where", "lr=0.001"), "'lr' is neither config.KEY nor summary.KEY; write config.KEY=VALUE"),
        (("--where", "config.lr"), "no '='; write config.KEY=VALUE"),
        (("--where", "config.=1"), "the config key is empty"),
        (("--where", "tag="), "the tag is empty"),
        (("--columns", "config.lr,bogus"), "unknown column 'bogus'; allowed: tags, notes, config.KEY"),
        (("--columns", "config."), "unknown column 'config.'"),
        (("--sort", "-"), "--sort needs a field"),
        (("--sort", "bogus"), "'bogus' is not a field runs can be sorted by; allowed: id, name"),
    ):
        code, out = invoke(service, "runs", *args)
        assert code == 2 and "error:" in out and says in out and "Traceback" not in out, (args, out)
