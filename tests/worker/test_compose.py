"""The deployment files, checked without a Docker engine: docker-compose.yml and the Dockerfile parse, the
services are all there and wired, every SCALERL_* variable is a real setting, and the commands exist."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from scalerl.cli.main import cli
from server.alerts.settings import AlertSettings
from server.store.settings import Settings
from worker.settings import WorkerSettings

REPO = Path(__file__).resolve().parents[2]
SERVICES = {"postgres", "redis", "migrations", "api", "worker-cpu", "worker-train", "worker-gpu", "worker-gpu-2"}
#: The containers that run scalerl, and the image each one runs (the service image never holds torch).
IMAGES = {
    "migrations": "scalerl:service",
    "api": "scalerl:service",
    "worker-cpu": "scalerl:service",
    "worker-train": "scalerl:cpu",
    "worker-gpu": "scalerl:cuda",
    "worker-gpu-2": "scalerl:cuda",
}


def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def known_settings() -> set[str]:
    fields = set(Settings.model_fields) | set(WorkerSettings.model_fields) | set(AlertSettings.model_fields)
    return {f"SCALERL_{name.upper()}" for name in fields}


def test_services_dependencies_and_ports() -> None:
    services = compose()["services"]
    assert set(services) == SERVICES
    for name, svc in services.items():
        for dep in svc.get("depends_on", {}):
            assert dep in services, (name, dep)
    assert services["api"]["depends_on"]["migrations"]["condition"] == "service_completed_successfully"
    assert services["api"]["ports"] == [f"127.0.0.1:{Settings.model_fields['port'].default}:8765"]
    reservation = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert reservation["driver"] == "nvidia" and reservation["capabilities"] == ["gpu"]
    assert (
        services["worker-gpu"]["build"]["target"] == "cuda" and services["migrations"]["build"]["target"] == "service"
    )
    assert services["worker-train"]["build"]["target"] == "cpu"
    assert {name: svc.get("image") for name, svc in services.items() if name in IMAGES} == IMAGES
    # A plain `docker compose up -d` starts what runs on any host; GPU workers are opt-in profiles.
    assert services["worker-gpu"]["profiles"] == ["gpu"] and services["worker-gpu-2"]["profiles"] == ["multi-gpu"]
    assert "name" not in compose()  # Debian's docker-compose 1.29 rejects a top-level name


def test_environment_matches_the_settings() -> None:
    known = known_settings()
    for name, svc in compose()["services"].items():
        env = svc.get("environment", {})
        scalerl = {k: v for k, v in env.items() if k.startswith("SCALERL_")}
        assert set(scalerl) <= known, (name, set(scalerl) - known)
        if name in IMAGES:
            assert scalerl["SCALERL_DATABASE_URL"].startswith("postgresql://")
            # The passwords are .env's (docker-compose.yml's header): a required variable, never a default.
            assert re.fullmatch(r"redis://:\$\{REDIS_PASSWORD:\?[^}]+\}@redis:6379/0", scalerl["SCALERL_BROKER_URL"])
            assert scalerl["SCALERL_SERVER_URL"] == "http://api:8765"
            assert "api" in json.loads(scalerl["SCALERL_ALLOWED_HOSTS"])  # the workers' Host is allowed
    values = {k: str(v) for k, v in compose()["services"]["worker-gpu"]["environment"].items() if "TOKEN" not in k}
    settings = WorkerSettings(**{k.removeprefix("SCALERL_").lower(): v for k, v in values.items()})  # type: ignore[arg-type]
    assert settings.broker_kind == "redis" and settings.engine_device == "cuda"
    postgres = compose()["services"]["postgres"]["environment"]
    assert (
        f"{postgres['POSTGRES_USER']}:{postgres['POSTGRES_PASSWORD']}@postgres:5432/{postgres['POSTGRES_DB']}"
        in (values["SCALERL_DATABASE_URL"])
    )


def test_two_gpu_worker_mounts_a_template_the_engine_accepts() -> None:
    from worker.engine_config import engine_config, load_template

    svc = compose()["services"]["worker-gpu-2"]
    assert svc["profiles"] == ["multi-gpu"]  # a plain `docker compose up` leaves it out
    env = svc["environment"]
    source, target = next(v.split(":")[:2] for v in svc["volumes"] if v.startswith("./"))
    assert target == env["SCALERL_ENGINE_TEMPLATE"]
    run = {"id": 1, "seed": 0, "recipe": None, "task": "synthetic-addition", "model": "qwen2-0.5b", "budget": 1.0}
    cfg = engine_config(run, "gpu_hours", load_template(REPO / source), device=env["SCALERL_ENGINE_DEVICE"], steps=10)
    assert cfg["device"] == "cuda:0" and cfg["generator"]["device"] == "cuda:1"
    assert cfg["weight_sync"]["transport"] == "nccl"
    devices = svc["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"]
    assert len(devices) == 2


def test_commands_are_scalerl_commands() -> None:
    for name, svc in compose()["services"].items():
        command = svc.get("command")
        if command and command[0] == "scalerl":
            assert command[1] in cli.commands, (name, command)
    assert compose()["services"]["worker-gpu"]["command"][-1] == "gpu"
    assert compose()["services"]["worker-cpu"]["command"][-1] == "cpu"


def test_dockerfile_targets_install_what_each_container_needs() -> None:
    text = (REPO / "Dockerfile").read_text()
    targets = re.findall(r"^FROM \S+ AS ([\w-]+)$", text, flags=re.M)
    # cuda's stages last: the legacy builder builds every stage before its target (the Dockerfile's header)
    assert targets == ["base", "deps-service", "deps-cpu", "service", "cpu", "cuda-base", "deps-cuda", "cuda"]
    # the training worker holds the run storage's fsspec and sshfs (a run resumes on another host: worker/storage.py)
    assert '"/src[server,worker]"' in text and '"/src[train,server,worker,storage]"' in text
    # the GPU worker: DeepSpeed and the storage too, pinned by its own lock (tests/packaging/test_cuda_image.py)
    assert '"/src[train,server,worker,deepspeed,storage]"' in text and "constraints/cuda.txt" in text
    assert "constraints/cpu.txt" in text and text.count("$PIP_EXTRA") >= 3
    for path in re.findall(r"^COPY (?!--from)(\S+) ", text, flags=re.M):
        assert (REPO / path).exists(), path
    # `scalerl db upgrade` needs the migrations inside the image: they ship inside the server package
    assert "COPY server " in text and (REPO / "server/store/migrations/env.py").is_file()
    ignored = (REPO / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored


def test_cpu_worker_mounts_a_template_that_learns() -> None:
    """The stack as written learns: worker-train's template starts every run from the warmed-up base checkpoint,
    cached on the shared runs volume (built once per stack), and the engine accepts it with CI's first grid."""
    from worker.engine_config import engine_config, load_template

    svc = compose()["services"]["worker-train"]
    env = svc["environment"]
    source, target = next(v.split(":")[:2] for v in svc["volumes"] if v.startswith("./"))
    assert target == env["SCALERL_ENGINE_TEMPLATE"] and source == "./configs/engine-cpu.yaml"
    template = load_template(REPO / source)
    assert not {"name", "seed", "device", "recipe", "model", "task", "budget"} & set(template)  # the run's own
    grid = yaml.safe_load((REPO / "tests/compose/grid.yaml").read_text())
    run = {"id": 1, "seed": 0, "recipe": grid["recipe"], "task": grid["task"], "model": grid["model"], "budget": 0.1}
    cfg = engine_config(run, "gpu_hours", template, device=env["SCALERL_ENGINE_DEVICE"], steps=1_000_000)
    assert cfg["device"] == "cpu" and cfg["budget"]["max_device_hours"] == 0.1
    base = cfg["base_checkpoint"]
    runs_volume = next(v.split(":")[1] for v in svc["volumes"] if v.startswith("runs:"))
    assert base["enabled"] and base["cache_dir"].startswith(runs_volume + "/")
    assert runs_volume == env["SCALERL_RUNS_DIR"]


def test_ci_overlay_changes_timings_only() -> None:
    """tests/compose/ci.yml changes leases, heartbeats, polling, backoff and the stop grace, nothing else: CI runs
    the images, volumes, commands and engine template of docker-compose.yml as written."""
    overlay = yaml.safe_load((REPO / "tests/compose/ci.yml").read_text())
    timings = {
        "SCALERL_LEASE_SECONDS",
        "SCALERL_HEARTBEAT_SECONDS",
        "SCALERL_REAPER_INTERVAL_SECONDS",
        "SCALERL_SUPERVISE_SECONDS",
        "SCALERL_POLL_SECONDS",
        "SCALERL_MAX_BACKOFF_SECONDS",
        "SCALERL_STOP_GRACE_SECONDS",
    }
    assert set(overlay) <= {"services", "x-fast"}
    for name, svc in overlay["services"].items():
        assert name in compose()["services"] and set(svc) == {"environment"}, (name, svc)
        assert set(svc["environment"]) <= timings, (name, set(svc["environment"]) - timings)
