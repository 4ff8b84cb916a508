"""docker-compose.yml's secrets, shutdown order, volumes and replicas, checked without a Docker engine (the stack
itself runs in ``make compose-test``, tests/compose/stack.py). ``docker-compose config`` is used when installed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.compose.stack import SECRET_VARS, header_command, header_commands, read_env_file
from worker.settings import WorkerSettings

REPO = Path(__file__).resolve().parents[2]
#: The services that talk to PostgreSQL or Redis through the API or directly: each must stop before both.
CLIENTS = ("api", "worker-cpu", "worker-train", "worker-gpu", "worker-gpu-2")
WORKERS = ("worker-cpu", "worker-train", "worker-gpu", "worker-gpu-2")


def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())  # type: ignore[no-any-return]


def required(value: str) -> list[str]:
    """The variables ``${VAR:?message}`` in ``value`` (compose refuses to start while one is unset or empty)."""
    return re.findall(r"\$\{([A-Z_]+):\?\1 is not set", value)


def test_no_default_secret_every_one_is_a_required_variable() -> None:
    services = compose()["services"]
    postgres, redis = services["postgres"], services["redis"]
    assert required(postgres["environment"]["POSTGRES_PASSWORD"]) == ["POSTGRES_PASSWORD"]
    assert required(redis["environment"]["REDIS_PASSWORD"]) == ["REDIS_PASSWORD"]
    assert "requirepass $$REDIS_PASSWORD" in redis["command"][-1]  # `$$`: the container's shell expands it
    for name in CLIENTS:
        env = services[name]["environment"]
        assert required(env["SCALERL_DATABASE_URL"]) == ["POSTGRES_PASSWORD"], name
        assert required(env["SCALERL_BROKER_URL"]) == ["REDIS_PASSWORD"], name
    migrations = services["migrations"]["environment"]
    assert required(migrations["IMPORT_ADMIN_TOKEN"]) == ["SCALERL_ADMIN_TOKEN"]
    assert required(migrations["IMPORT_WORKER_TOKEN"]) == ["SCALERL_WORKER_TOKEN"]
    # Workers read their own variable, never a shell's SCALERL_TOKEN (compose prefers the shell to .env).
    for name in WORKERS:
        assert required(services[name]["environment"]["SCALERL_TOKEN"]) == ["SCALERL_WORKER_TOKEN"], name
    text = (REPO / "docker-compose.yml").read_text()
    assert "${SCALERL_TOKEN" not in text and "scalerl@postgres" not in text and "redis://redis" not in text


def test_the_header_generator_makes_a_private_env_and_never_overwrites_it(tmp_path: Path) -> None:
    generator = header_command("python3 -c")
    subprocess.run(generator, cwd=tmp_path, check=True)
    env = tmp_path / ".env"
    assert env.stat().st_mode & 0o777 == 0o600
    values = read_env_file(env)
    assert set(values) == set(SECRET_VARS) and all(len(v) >= 32 for v in values.values())
    assert values["SCALERL_ADMIN_TOKEN"].startswith("srl_") and values["SCALERL_WORKER_TOKEN"].startswith("srl_")
    assert len(set(values.values())) == 4
    # URL-safe: the passwords go into the database and broker URLs as they are.
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+", v) for v in values.values())
    before = env.read_bytes()
    again = subprocess.run(generator, cwd=tmp_path, capture_output=True, check=False)
    assert again.returncode != 0 and env.read_bytes() == before


def test_env_is_ignored_by_git() -> None:
    if not (REPO / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    assert subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=REPO, check=False).returncode == 0


def test_the_header_commands_run_in_scripts() -> None:
    """Every `docker compose exec` of the header has -T (without it compose wants a TTY: 'the input device is not a
    TTY' in any script); the stack is started by `up -d` alone (the tokens come from .env)."""
    commands = header_commands()
    execs = [c for c in commands if " exec " in c]
    assert execs and all(" exec -T " in c for c in execs), execs
    assert "docker compose up -d" in commands and "docker compose build" in commands


def test_workers_stop_before_the_api_the_database_and_the_broker() -> None:
    """Compose stops a service once every running service that depends on it has stopped; migrations has exited
    by then, so a dependency through it does not count: each client names postgres and redis itself."""
    services = compose()["services"]
    for name in CLIENTS:
        deps = services[name]["depends_on"]
        assert {"postgres", "redis"} <= set(deps), name
        assert all(deps[d]["condition"] == "service_healthy" for d in ("postgres", "redis")), name
    for name in WORKERS:
        assert "api" in services[name]["depends_on"], name


def seconds(period: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", period):
        total += float(amount) * {"h": 3600, "m": 60, "s": 1}[unit]
    return total


def test_training_workers_have_time_to_checkpoint_and_release() -> None:
    """The engine's grace after SIGTERM, then the points and the release: well inside the container's
    stop_grace_period (docker's SIGKILL at its end leaves the run to its lease)."""
    services = compose()["services"]
    default_grace = WorkerSettings.model_fields["stop_grace_seconds"].default
    for name in ("worker-train", "worker-gpu", "worker-gpu-2"):
        svc = services[name]
        grace = float(svc["environment"].get("SCALERL_STOP_GRACE_SECONDS", default_grace))
        assert seconds(svc["stop_grace_period"]) >= grace + 120, name


def test_no_anonymous_volume() -> None:
    """The service and cpu images declare no VOLUME; the services of an image that does (cuda) mount it by name."""
    text = (REPO / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.M)
    volumes = {}
    for stage in stages[1:]:
        name = stage.split("\n", 1)[0].split(" AS ")[-1].strip()
        volumes[name] = re.findall(r"^VOLUME (.+)$", stage, flags=re.M)
    assert volumes["service"] == [] and volumes["cpu"] == []
    declared = {target: v for target, v in volumes.items() if v}
    services = compose()["services"]
    named = set(compose()["volumes"])
    for name, svc in services.items():
        build = svc.get("build", {})
        target = build.get("target") if isinstance(build, dict) else None
        image = svc.get("image", "")
        stage = target or {"scalerl:service": "service", "scalerl:cpu": "cpu", "scalerl:cuda": "cuda"}.get(image)
        for paths in declared.get(stage or "", []):
            for path in re.findall(r'"([^"]+)"', paths) or [paths.strip()]:
                mounts = [v.split(":")[:2] for v in svc.get("volumes", [])]
                assert [source for source, at in mounts if at == path and source in named], (name, path)


def test_worker_train_replicas_come_from_a_variable() -> None:
    deploy = compose()["services"]["worker-train"]["deploy"]
    assert deploy["replicas"] == "${WORKER_TRAIN_REPLICAS:-1}"


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_docker_compose_refuses_to_start_without_each_secret(tmp_path: Path) -> None:
    """Debian's docker-compose 1.29 (what `make compose-test` runs the stack with) interpolates `${VAR:?}`."""
    subprocess.run(header_command("python3 -c"), cwd=tmp_path, check=True)
    values = read_env_file(tmp_path / ".env")
    env = {k: v for k, v in os.environ.items() if k not in SECRET_VARS}

    def config(env_file: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["docker-compose", "--env-file", str(env_file), "-p", "scalerl-config-check", "config", "-q"],
            cwd=REPO, env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip

    assert config(tmp_path / ".env").returncode == 0
    for name in SECRET_VARS:
        partial = tmp_path / f"without-{name}"
        partial.write_text("".join(f"{k}={v}\n" for k, v in values.items() if k != name))
        r = config(partial)
        assert r.returncode != 0 and f"{name} is not set" in r.stderr, (name, r.stderr[-300:])
        assert not any(v in r.stdout + r.stderr for v in values.values())
