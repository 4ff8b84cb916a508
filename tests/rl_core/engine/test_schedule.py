"""The schedule that never loses to sync: an overlapping schedule with a generator on the trainer's GPU runs
as sync and says so; on the CPU, or with the generator on its own GPU, the recipe's schedule runs unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from rl_core.contracts.run_config import parse_run_config
from rl_core.engine.admission import AdmissionPolicy
from rl_core.engine.pipeline import Engine
from rl_core.engine.schedule import choose_schedule, cuda_index, shared_gpu
from rl_core.engine.sinks import MultiSink
from tests.support.tiny_run import tiny_config

PIPE8 = AdmissionPolicy(mode="pipeline", k=8)


def test_device_names() -> None:
    assert cuda_index("cuda") == 0 and cuda_index("cuda:3") == 3 and cuda_index("cpu") is None
    assert shared_gpu("cuda", ["cuda:0"]) == 0
    assert shared_gpu("cuda:1", ["cuda:2", "cuda:1"]) == 1  # one of several generators on the trainer's GPU
    assert shared_gpu("cuda:0", ["cuda:1", "cuda:2"]) is None
    assert shared_gpu("cpu", ["cpu"]) is None  # CPU threads are not one GPU's SMs


@pytest.mark.parametrize("mode", ["pipeline", "ppo_off_policy"])
def test_an_overlapping_schedule_on_the_trainers_gpu_runs_sync_and_says_why(mode: str) -> None:
    requested = AdmissionPolicy(mode=mode, k=4)  # type: ignore[arg-type]
    choice = choose_schedule(requested, "cuda", ["cuda:0"])
    assert choice.changed and choice.used == AdmissionPolicy(mode="sync", k=1)
    assert choice.requested == requested
    assert choice.note is not None and mode in choice.note and "cuda:0" in choice.note and "sync" in choice.note


@pytest.mark.parametrize(
    ("requested", "trainer", "generators"),
    [
        (PIPE8, "cuda:0", ["cuda:1"]),  # the generator on its own GPU: overlap pays
        (PIPE8, "cpu", ["cpu"]),
        (AdmissionPolicy(mode="sync", k=1), "cuda:0", ["cuda:0"]),  # sync stays sync
    ],
)
def test_otherwise_the_recipes_schedule_runs(requested: AdmissionPolicy, trainer: str, generators: list[str]) -> None:
    choice = choose_schedule(requested, trainer, generators)
    assert choice.used == requested and not choice.changed and choice.note is None


def test_the_engine_admits_by_the_chosen_schedule(tmp_path: Path) -> None:
    colocated = Engine(parse_run_config(tiny_config(device="cuda:0")), tmp_path / "a", MultiSink([]))
    assert colocated.policy.mode == "sync" and colocated.policy.capacity(0) == 1
    apart = Engine(
        parse_run_config(tiny_config(**{"device": "cuda:0", "generator.device": "cuda:1"})),
        tmp_path / "b",
        MultiSink([]),
    )
    assert apart.policy == AdmissionPolicy(mode="pipeline", k=2) and apart.schedule.note is None
    cpu = Engine(parse_run_config(tiny_config()), tmp_path / "c", MultiSink([]))
    assert cpu.policy == AdmissionPolicy(mode="pipeline", k=2)
    assert "running sync" in (colocated.schedule.note or "")


@pytest.mark.parametrize(
    ("threads", "mode", "processes", "cores", "expected"),
    [
        (3, "sync", 1, 8, 3),  # as given
        ("auto", "sync", 1, 2, 2),  # the roles take turns: every core for whichever works
        ("auto", "pipeline", 1, 2, 1),  # trainer and generator at once: the cores split between them
        ("auto", "pipeline", 3, 16, 4),
        ("auto", "ppo_off_policy", 2, 2, 1),  # never below one
    ],
)
def test_auto_threads_give_every_core_to_sync_and_split_them_when_processes_overlap(
    threads: int | str, mode: str, processes: int, cores: int, expected: int
) -> None:
    from rl_core.engine.schedule import torch_threads

    assert torch_threads(threads, mode, processes, cores=cores) == expected  # type: ignore[arg-type]


def test_a_sync_run_with_auto_threads_trains_with_every_core(tmp_path: Path) -> None:
    from rl_core.engine.runner import run

    cfg = parse_run_config(tiny_config(threads="auto", **{"recipe.pipeline": {"mode": "sync"}}))
    result = run(cfg, tmp_path)
    assert result.status == "succeeded", result.reason
