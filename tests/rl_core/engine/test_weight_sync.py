"""Weight transports: bucket planning, the gloo collective between real processes (in order, complete, bounded by
a timeout), streamed publishes (ZeRO-3 style), layout validation and engine runs over each CPU transport."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.multiprocessing as mp

from rl_core.contracts.points import read_points
from rl_core.contracts.run_config import ConfigError, parse_run_config
from rl_core.engine.collective import CollectiveWeights, plan_buckets
from rl_core.engine.runner import run
from rl_core.engine.weight_sync import make_channel, resolve_transport
from rl_core.engine.weights import SharedWeights, WeightSyncError
from tests.support.tiny_run import tiny_config


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _state() -> dict[str, torch.Tensor]:
    return {
        "a.weight": torch.zeros(300, 10),
        "b.weight": torch.zeros(7),
        "c.bias": torch.zeros(50),
        "d.scale": torch.zeros(4, dtype=torch.float64),
    }


def test_buckets_cover_every_tensor_once_within_the_size_and_one_dtype_each() -> None:
    specs = {k: (tuple(v.shape), v.dtype) for k, v in _state().items()}
    buckets = plan_buckets(specs, bucket_bytes=400)  # 100 float32 elements
    names = [e.name for b in buckets for e in b.entries]
    assert sorted(names) == sorted(specs)
    for b in buckets:
        assert len({e.dtype for e in b.entries}) == 1 and b.dtype == b.entries[0].dtype
        assert b.numel == sum(e.numel for e in b.entries)
        size = b.numel * torch.empty((), dtype=b.dtype).element_size()
        assert size <= 400 or len(b.entries) == 1  # only a tensor larger than a bucket gets one alone
        offsets = [e.offset for e in b.entries]
        assert offsets == sorted(offsets) and offsets[0] == 0
    assert len(plan_buckets(specs, bucket_bytes=10**9)) == 2  # one per dtype when everything fits


def _receiver(channel: CollectiveWeights, versions: list[int], out: Any) -> None:
    channel.connect_receiver("cpu")
    target = {k: torch.full_like(v, -1.0) for k, v in channel.tensors.items()}
    for version in versions:
        got = channel.wait_for_version(version, timeout_s=30)
        channel.read_into(target)
        out.put((got, {k: float(v.flatten()[0]) for k, v in target.items()}))
    channel.close()


def _sleeper(channel: CollectiveWeights, out: Any) -> None:
    out.put("ready")  # torch is imported (unpickling the channel did it): the slow part of a spawn is over
    channel.connect_receiver("cpu")
    out.put("connected")
    time.sleep(600)


def test_gloo_collective_delivers_every_version_complete_and_in_order() -> None:
    state = _state()
    channel = CollectiveWeights(
        state, init_method=f"tcp://127.0.0.1:{_port()}", backend="gloo", bucket_mb=0.001, timeout_s=30
    )
    assert len(channel.buckets) >= 3  # really bucketed
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_receiver, args=(channel, [0, 1, 2, 3, 7], out))
    proc.start()
    try:
        channel.connect_sender("cpu")
        seen = []
        for version in range(4):
            # Streamed (an iterator of pairs, as ZeRO-3 gathers them), every tensor = version + its index.
            items = ((k, torch.full_like(v, float(version * 10 + i))) for i, (k, v) in enumerate(state.items()))
            channel.publish(items, version)
            seen.append(out.get(timeout=60))  # lock-step: the reader saw this version before the next publish
        for version in range(4, 8):  # a burst: the reader then holds the newest version, complete
            channel.publish(
                {k: torch.full_like(v, float(version * 10 + i)) for i, (k, v) in enumerate(state.items())}, version
            )
        seen.append(out.get(timeout=60))
    finally:
        channel.close()
        proc.join(30)
    assert proc.exitcode == 0
    assert [v for v, _ in seen] == [0, 1, 2, 3, 7]
    for version, values in seen:
        assert values == {k: float(version * 10 + i) for i, k in enumerate(state)}


def test_a_dead_generator_fails_the_publish_within_the_timeout_and_breaks_the_channel() -> None:
    channel = CollectiveWeights(_state(), init_method=f"tcp://127.0.0.1:{_port()}", backend="gloo", timeout_s=5)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_sleeper, args=(channel, out))
    proc.start()
    try:
        # the 5 s timeout is for the publish; a spawned process importing torch on a loaded machine can take longer
        # than that to reach the rendezvous, so the sender waits for it to be up before joining
        assert out.get(timeout=120) == "ready"
        channel.connect_sender("cpu")
        assert out.get(timeout=60) == "connected"
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(10)
        t0 = time.monotonic()
        with pytest.raises(WeightSyncError):
            channel.publish(_state(), 1)
        assert time.monotonic() - t0 < 5 + 5
        with pytest.raises(WeightSyncError, match="broken"):
            channel.publish(_state(), 2)
    finally:
        channel.close()
        if proc.is_alive():
            proc.kill()


def test_a_generator_that_never_connects_is_a_weight_sync_error_after_the_timeout() -> None:
    channel = CollectiveWeights(_state(), init_method=f"tcp://127.0.0.1:{_port()}", backend="gloo", timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(WeightSyncError, match="could not connect to the generator"):
        channel.connect_sender("cpu")
    assert time.monotonic() - t0 < 2 + 10


def test_a_publish_missing_tensors_is_refused_before_anything_is_sent() -> None:
    shared = SharedWeights(_state(), version=0)
    partial = dict(_state())
    del partial["c.bias"]
    with pytest.raises(KeyError, match="missing 1"):
        shared.publish(partial, 1)
    assert shared.version == 0


def test_shared_weights_take_a_stream_and_the_sync_dtype() -> None:
    shared = SharedWeights(_state(), version=0, dtype=torch.bfloat16)
    assert all(t.dtype == torch.bfloat16 for t in shared.tensors.values())
    shared.publish(((k, torch.full_like(v, 2.5)) for k, v in _state().items()), 3)
    target = {k: torch.zeros_like(v) for k, v in _state().items()}
    assert shared.read_into(target) == 3
    assert all(bool((t == 2.5).all()) for t in target.values())


def test_layouts_are_validated_once_with_clear_errors() -> None:
    ok = parse_run_config(tiny_config(**{"device": "cpu"}))
    assert resolve_transport(ok) == "shared_memory"
    gloo = parse_run_config(tiny_config(**{"weight_sync": {"transport": "gloo", "bucket_mb": 1}}))
    assert resolve_transport(gloo) == "gloo"
    split = parse_run_config(tiny_config(**{"device": "cuda:0", "generator.device": "cuda:1"}))
    assert resolve_transport(split) == "cuda_ipc"
    wide = parse_run_config(
        tiny_config(
            **{
                "device": "cuda",
                "trainer": {"backend": "deepspeed", "ranks": 2},
                "generator": {"device": "cuda:2", "processes": 3},
                "weight_sync": {"transport": "nccl"},
            }
        )
    )
    assert wide.trainer_devices() == ["cuda:0", "cuda:1"]
    assert wide.generator_devices() == ["cuda:2", "cuda:3", "cuda:4"]
    for bad, message in [
        ({"weight_sync": {"transport": "nccl"}}, "nccl needs the trainer and the generator on GPUs"),
        ({"device": "cuda:0", "weight_sync": {"transport": "nccl"}}, "other GPUs than the trainer"),
        (
            {
                "device": "cuda:0",
                "trainer": {"backend": "deepspeed", "ranks": 2},
                "generator.device": "cuda:1",
                "weight_sync": {"transport": "nccl"},
            },
            r"\['cuda:1'\] are both",
        ),
        ({"weight_sync": {"transport": "cuda_ipc"}}, "cuda_ipc needs a GPU"),
        ({"generator.device": "gpu1"}, "generator.device must be 'cpu', 'cuda' or 'cuda:N'"),
        ({"generator.device": "cuda:x"}, "must be a GPU index"),
        ({"weight_sync": {"transport": "gloo", "init_method": "localhost:99"}}, "weight_sync.init_method"),
        ({"weight_sync": {"timeout_s": 0}}, "weight_sync.timeout_s"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_run_config(tiny_config(**bad))


def test_the_shared_copy_is_in_the_generator_dtype() -> None:
    cfg = parse_run_config(tiny_config(**{"recipe.precision": {"generator_dtype": "bfloat16"}}))
    channel = make_channel(cfg, _state(), version=0)
    assert isinstance(channel, SharedWeights)
    assert {t.dtype for t in channel.tensors.values()} == {torch.bfloat16}


@pytest.mark.parametrize("transport", ["shared_memory", "gloo"])
def test_the_engine_runs_over_each_cpu_transport(tmp_path: Path, transport: str) -> None:
    cfg = tiny_config(**{"weight_sync": {"transport": transport, "bucket_mb": 0.01}, "budget.steps": 5})
    result = run(parse_run_config(cfg), tmp_path)
    assert result.status == "succeeded", result.reason
    points = read_points(tmp_path / "metrics.jsonl")
    assert [p.step for p in points] == [0, 1, 2, 3, 4, 5]
    # Pipeline k=2: tokens at most 2 versions old, which holds only if the transport delivered the updates
    # (undelivered weights would leave every token at version 0, 4 behind at the last step).
    assert all(p.metrics["train/staleness_max"] <= 2 for p in points[1:])


@pytest.mark.parametrize("transport", ["shared_memory", "gloo"])
def test_two_generator_processes_share_the_orders_and_the_weights(tmp_path: Path, transport: str) -> None:
    cfg = tiny_config(
        **{
            "generator.processes": 2,
            "weight_sync": {"transport": transport, "bucket_mb": 0.01},
            "recipe.pipeline": {"mode": "pipeline", "k": 2},
            "budget.steps": 6,
        }
    )
    result = run(parse_run_config(cfg), tmp_path)
    assert result.status == "succeeded", result.reason
    points = read_points(tmp_path / "metrics.jsonl")
    assert [p.step for p in points] == list(range(7))
    steps = points[1:]
    assert {p.metrics["gen/generator"] for p in steps} == {1.0, 2.0}  # both processes generated batches
    assert all(p.metrics["train/staleness_max"] <= 2 for p in steps)  # and both received every update
