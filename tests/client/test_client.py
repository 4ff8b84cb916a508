"""scalerl.client against the real service (uvicorn on 127.0.0.1, SQLite): registration and attach, explicit
errors and timeouts, and the Reporter's promises (buffer while the service is down, deliver once it is back,
idempotent re-sends, stop relayed to the loop, final status)."""

from __future__ import annotations

import json
import logging
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from rl_core.contracts.points import MetricPoint, to_rest
from rl_core.engine.ports import free_port
from scalerl.client import ApiError, Client, Point, Reporter, ServiceUnavailable
from tests.client.conftest import Service, build_context, wait_for, write_token
from tests.server.live import live_server


def curve(step: int) -> tuple[float, float]:
    compute = 5.0 * (step + 1)
    return compute, 0.1 + 0.5 / (1.0 + (60.0 / compute) ** 1.5)


def test_register_attach_post_forecast_and_status(service: Service) -> None:
    with Client(service.url, service.token) as api:
        run = api.register_run("trl-grpo", budget=400.0, task="gsm8k")
        assert run.status == "queued" and run.action == "continue" and run.budget == 400.0
        assert api.register_run("trl-grpo").id == run.id  # a restarted trainer attaches to its run
        with pytest.raises(ApiError) as refused:
            api.register_run("trl-grpo", resume="never")
        assert refused.value.status_code == 409 and "already has a run" in str(refused.value)

        points = [Point.make(s, *curve(s), metrics={"loss": 1.0 / (s + 1)}) for s in range(12)]
        answer = api.post_points(run.id, points)
        assert (answer.accepted, answer.duplicates, answer.action, answer.status) == (12, 0, "continue", "running")
        assert answer.fit is None and answer.fit_pending  # the point fit runs off the request path
        assert service.ctx.drain(30)
        again = api.post_points(run.id, points[:3])  # idempotent by step; the answer carries the stored fit
        assert (again.accepted, again.duplicates) == (0, 3)
        assert again.fit is not None and again.fit.kind == "point" and again.fit.n_points > 0 and not again.fit_pending
        changed = api.post_points(run.id, [Point.make(2, 999.0, 0.9)])  # a stored step is never overwritten
        assert changed.accepted == 0 and changed.rejected and changed.rejected[0]["step"] == 2

        forecast = api.forecast(run.id)
        assert forecast is not None and forecast.A is not None and forecast.predictions
        assert api.report_status(run.id, "succeeded", "done").status == "succeeded"
        stored = api.get_points(run.id)
        assert [p["step"] for p in stored] == list(range(12)) and stored[2]["compute"] == curve(2)[0]


def test_point_validation_is_local_and_explicit() -> None:
    p = Point.make(3, 1.5, 0.25, {"loss": 0.5, "nan": float("nan"), "flag": True, "x" * 101: 1.0, "s": "no"})
    assert p.to_json() == {"step": 3, "compute": 1.5, "pass_rate": 0.25, "metrics": {"loss": 0.5, "x" * 100: 1.0}}
    for bad in ((-1, 0.0, None), (1.5, 0.0, None), (0, float("inf"), None), (0, -1.0, None), (0, 1.0, 1.2)):
        with pytest.raises(ValueError):
            Point.make(*bad)
    many = Point.make(0, 0.0, None, {f"m{i}": i for i in range(100)})
    assert len(many.metrics) == 64


def test_a_point_keeps_its_metrics_by_the_rule_of_to_rest() -> None:
    """One rule (rl_core.contracts.points.keep_metrics): Point.make, Point.merged and to_rest keep the same metrics
    (long names cut, curve metrics first when there are more than 64), and what the client sends is to_rest's."""
    named: dict[str, Any] = {f"z{i:03d}": float(i) for i in range(70)}
    named |= {"train/loss": 1.0, "eval/reward": 2.0, "y" * 120: 3.0, "np": np.float32(0.5), "inf": float("inf")}
    made = Point.make(4, 2.0, None, named)
    engine = MetricPoint(step=4, compute=2.0, metrics={k: float(v) for k, v in named.items()})
    assert made.to_json() == to_rest(made) == to_rest(engine)
    assert len(made.metrics) == 64 and {"train/loss", "eval/reward"} <= made.metrics.keys()
    assert {"np", "y" * 100, "z059"} <= made.metrics.keys() and "z060" not in made.metrics  # then by name
    merged = Point.make(4, 1.0, 0.5, {"eval/acc": 0.9}).merged(made)
    assert "eval/acc" in merged.metrics and len(merged.metrics) == 64 and merged.pass_rate == 0.5
    sent: list[Any] = []

    def record(request: httpx.Request) -> httpx.Response:
        sent.extend(json.loads(request.content)["points"])
        return httpx.Response(200, json={"run_id": 1, "accepted": 2, "duplicates": 0, "status": "running"})

    with Client("http://svc", "t", transport=httpx.MockTransport(record)) as api:
        api.post_points(1, [made, engine])
    assert sent == [to_rest(engine)] * 2


def test_errors_and_timeouts_are_explicit(service: Service) -> None:
    with Client(service.url, "srl_not-a-token") as api, pytest.raises(ApiError) as denied:
        api.register_run("x")
    assert denied.value.status_code == 401
    with Client(f"http://127.0.0.1:{free_port()}", "t", timeout=2) as api, pytest.raises(ServiceUnavailable):
        api.health()
    silent = socket.socket()  # accepts connections (backlog) but never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        start = time.monotonic()
        api = Client(f"http://127.0.0.1:{silent.getsockname()[1]}", "t", timeout=0.3)
        with api, pytest.raises(ServiceUnavailable, match="in time"):
            api.health()
        assert time.monotonic() - start < 5
    finally:
        silent.close()


def test_reporter_buffers_while_down_delivers_when_back_and_relays_stop(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = build_context(tmp_path)
    token = write_token(ctx)
    port = free_port()
    caplog.set_level(logging.INFO, logger="scalerl.client")
    rep = Reporter.start(
        "while-down", url=f"http://127.0.0.1:{port}", token=token, budget=300.0, timeout=2.0,
        flush_interval=0.05, backoff=0.05, max_backoff=0.2, poll_interval=0.2,
    )  # fmt: skip
    start = time.monotonic()
    for s in range(20):
        compute, rate = curve(s)
        assert rep.log(s, compute, rate, loss=1.0 / (s + 1)) == "continue"
    assert time.monotonic() - start < 0.5  # never blocks on the network
    assert wait_for(lambda: rep.connected is False)
    assert rep.buffered == 20 and rep.run_id is None and rep.last_error
    assert any("unavailable" in r.getMessage() and "buffering" in r.getMessage() for r in caplog.records)

    with live_server(ctx, port) as url:
        assert rep.flush(timeout=20)
        assert rep.connected is True and rep.buffered == 0 and rep.run_id is not None
        assert any("reachable again" in r.getMessage() for r in caplog.records)
        with Client(url, token) as api:
            stored = api.get_points(rep.run_id)
            assert [p["step"] for p in stored] == list(range(20))
            assert all(p["pass_rate"] is not None and p["metrics"]["loss"] > 0 for p in stored)
            assert ctx.drain(30)  # the service refits off the request path

            # the same steps again (a restarted loop re-logging): stored once, counted as duplicates; the answer
            # carries the run's stored fit
            rep.log(5, *curve(5), loss=1.0 / 6)
            assert rep.flush(timeout=10)
            assert rep.last_answer is not None and rep.last_answer.duplicates == 1
            assert rep.last_fit is not None and rep.last_fit.status in ("ok", "insufficient_data", "flat")
            assert len(api.get_points(rep.run_id)) == 20

            # the train metrics and the evaluation of one step, logged separately, travel as one point
            rep.log(20, curve(20)[0], loss=0.01)
            rep.log(20, curve(20)[0], pass_rate=curve(20)[1])
            assert rep.flush(timeout=10)
            last = api.get_points(rep.run_id, after_step=19)
            assert len(last) == 1 and last[0]["pass_rate"] == curve(20)[1] and last[0]["metrics"] == {"loss": 0.01}

            # a stop requested by the user reaches a loop that logs nothing (the reporter polls the run)
            api.stop_run(rep.run_id, "ceiling below baseline")
            assert wait_for(lambda: rep.should_stop, timeout=10)
            assert rep.finish()
            assert api.run_info(rep.run_id).status == "stopped"
    ctx.engine.dispose()


def test_a_second_reporter_resends_idempotently(service: Service) -> None:
    first = Reporter.start("resend", url=service.url, token=service.token, flush_interval=0.05)
    for s in range(10):
        first.log(s, *curve(s))
    assert first.flush(timeout=10)
    # the process restarts and replays its log file from the beginning, then goes on (continuing the run of that
    # name is asked for: under 'auto' a second live process gets a run of its own)
    second = Reporter.start("resend", url=service.url, token=service.token, flush_interval=0.05, resume="allow")
    for s in range(15):
        second.log(s, *curve(s))
    assert second.flush(timeout=10)
    assert second.run_id == first.run_id and second.delivered == 15
    with service.http() as http:
        stored = http.get(f"/api/v1/runs/{first.run_id}/metrics").json()
    assert [p["step"] for p in stored] == list(range(15))
    assert second.finish("succeeded", "done")
    first.finish()


def test_a_refused_start_raises_and_a_refused_reporter_never_raises_in_the_loop(service: Service) -> None:
    with pytest.raises(ApiError) as refused:  # as wandb.init: a bad token is found before any training
        Reporter.start("denied", url=service.url, token="srl_wrong", flush_interval=0.05)
    assert refused.value.status_code == 401
    with Client(service.url, service.token) as api:
        run_id = api.register_run("denied-later", resume="never").id
    rep = Reporter.attach(run_id, url=service.url, token="srl_wrong", flush_interval=0.05)
    rep.log(0, 0.0, 0.1)
    assert wait_for(lambda: rep.last_error is not None and "401" in rep.last_error)
    assert rep.log(1, 1.0, 0.2) == "continue"  # still never raises in the loop
    assert rep.flush(timeout=2) is False
    assert rep.finish() is False
