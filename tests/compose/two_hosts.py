"""Two worker hosts and no shared volume, built and run for real: a run killed on one host resumes on the other from
its last checkpoint in the run storage (``SCALERL_RUN_STORAGE``, worker/storage.py).

The stack is docker-compose.yml with tests/compose/two-hosts.yml over it: the API, PostgreSQL, Redis, the supervisor
(``worker-cpu``) as written; two training workers of ``scalerl:cpu``, ``host-a`` and ``host-b``, each on a Docker
network of its own with a volume of its own (neither can reach the other, nor see its runs dir or its base-checkpoint
cache); and an SFTP server (tests/compose/storage: Debian's openssh-server on the Debian stand-in base, keys only,
generated here) reachable from both, which holds the checkpoints.

1. the base images (../shared/tools/local-base-images when missing), ``make wheelhouse``, ``docker compose build``
   offline (scalerl:service, scalerl:cpu, the SFTP server);
2. up: PostgreSQL, Redis, the migrations, the API, the storage; tokens; the supervisor and ``host-a`` only;
3. a one-run experiment (the grid of tests/compose/grid.yaml at lr 1e-5, the engine template configs/engine-cpu.yaml:
   its warm-up is built by each host for itself) trained by ``host-a`` until a checkpoint is in storage and the run
   is past its step 4, mid-run; then ``host-a`` is killed (``docker kill --signal KILL``: a machine lost, its
   engine with it);
4. ``host-b`` started with an empty volume: after the lease expires the run is re-queued, ``host-b`` fetches the
   newest checkpoint from storage (its log says which step) and resumes from it; the run succeeds on its compute
   budget with every step 0..N stored exactly once, an evaluation at its last step and its newest full fit covering
   the last evaluated point; ``host-b`` could not resolve ``host-a``.

Every stage is timed. Without a Docker engine this fails under CI (``CI`` set) and says why elsewhere. ``KEEP=1``
leaves the stack up. Run: ``.venv/bin/python -m tests.compose.two_hosts`` (from the repository root). It works with
docker-compose.yml whether the stack's tokens and passwords are made by hand (``scalerl token create``) or come from
the environment (``SCALERL_ADMIN_TOKEN``, ``SCALERL_WORKER_TOKEN``, ``POSTGRES_PASSWORD``, ``REDIS_PASSWORD``).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.compose.harness import JsonApi, StackError, Timeline, wait_for

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PORT = 8765
URL = f"http://127.0.0.1:{PORT}"
PROJECT = os.environ.get("COMPOSE_PROJECT_NAME", "scalerl-2h")
BASE_TOOL = Path(os.environ.get("SCALERL_BASE_IMAGES_TOOL", REPO.parent / "shared" / "tools" / "local-base-images"))
BASE_FILE = (REPO / "docker-compose.yml").read_text()
CHECKPOINT_EVERY = int(yaml.safe_load((REPO / "configs" / "engine-cpu.yaml").read_text())["checkpoint"]["every"])
TIMELINE = Timeline("two-hosts")
STARTED = TIMELINE.started
log = TIMELINE.log
stage = TIMELINE.stage
TIMINGS = TIMELINE.timings
WORK = Path(tempfile.mkdtemp(prefix="scalerl-2h-"))
ENV: dict[str, str] = {
    **os.environ,
    "COMPOSE_PROJECT_NAME": PROJECT,
    "COMPOSE_FILE": os.pathsep.join([str(REPO / "docker-compose.yml"), str(HERE / "two-hosts.yml")]),
    "PIP_EXTRA": "--no-index --find-links /wheels",
    "SCALERL_2H_KEYS": str(WORK / "keys"),
}
COMPOSE: list[str] = []


def sh(
    *args: str, check: bool = True, capture: bool = False, timeout: float = 1200
) -> subprocess.CompletedProcess[str]:
    log("$ " + " ".join(args))
    r = subprocess.run(args, cwd=REPO, env=ENV, text=True, capture_output=capture, timeout=timeout, check=False)
    if check and r.returncode != 0:
        detail = f"\n{r.stdout}\n{r.stderr}" if capture else ""
        raise StackError(f"exit {r.returncode}: {' '.join(args)}{detail}")
    return r


def compose(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return sh(*COMPOSE, *args, **kw)


def quiet(*args: str) -> bool:
    return shutil.which(args[0]) is not None and subprocess.run(args, capture_output=True, check=False).returncode == 0


def docker_ready() -> bool:
    return quiet("docker", "info") and (
        quiet("docker", "compose", "version") or shutil.which("docker-compose") is not None
    )


def logs(service: str = "", tail: int | None = 80) -> str:
    """The containers' logs (``tail`` lines each; None: all, not clipped)."""
    args = [*COMPOSE, "logs", "--no-color", "--tail", str(tail or "all"), *([service] if service else [])]
    r = subprocess.run(args, cwd=REPO, env=ENV, capture_output=True, text=True, check=False)
    return r.stdout if tail is None else r.stdout[-15000:]


class Api(JsonApi):
    def __init__(self, token: str) -> None:
        super().__init__(URL, token)

    def run(self, run_id: int) -> dict[str, Any]:
        return dict(self.get(f"/api/v1/runs/{run_id}"))

    def points(self, run_id: int) -> list[dict[str, Any]]:
        return list(self.get(f"/api/v1/runs/{run_id}/metrics"))

    def submit(self, doc: dict[str, Any]) -> int:
        r = self.http.post("/api/v1/experiments", json=doc)
        if r.status_code != 201:
            raise StackError(f"POST /api/v1/experiments: {r.status_code} {r.text[:300]}")
        (run,) = self.get("/api/v1/runs", experiment_id=r.json()["id"])
        return int(run["id"])


# ---- the stages --------------------------------------------------------------------------------------------------


def build() -> None:
    with stage("base images, wheelhouse, docker compose build (offline)"):
        missing = [
            i for i in ("python:3.11-slim", "postgres:15", "redis:7") if not quiet("docker", "image", "inspect", i)
        ]
        if missing:
            sh("bash", str(BASE_TOOL))
        sh("make", "-s", "wheelhouse")
        compose("build")


def free_api_port() -> None:
    """docker-compose.yml as written when its API port (8765) is free; else (another stack, or a program, on it) a
    copy of it that differs in that port alone, with relative paths still the repository's (--project-directory)."""
    global URL
    with socket.socket() as sock:
        if sock.connect_ex(("127.0.0.1", PORT)) != 0:
            return
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    published = f'"127.0.0.1:{PORT}:8765"'
    assert BASE_FILE.count(published) == 1, f"docker-compose.yml no longer publishes the API as {published}"
    copy = WORK / "docker-compose.yml"
    copy.write_text(BASE_FILE.replace(published, f'"127.0.0.1:{port}:8765"'))
    ENV["COMPOSE_FILE"] = os.pathsep.join([str(copy), str(HERE / "two-hosts.yml")])
    URL = f"http://127.0.0.1:{port}"
    log(f"port {PORT} is taken on this host: the API is published on {port} instead (a copy of docker-compose.yml)")


def make_keys() -> None:
    """The SFTP server's host key and the workers' key pair; the workers pin the host key (known_hosts)."""
    import asyncssh

    server, client = WORK / "keys" / "server", WORK / "keys" / "client"
    for folder in (server, client):
        folder.mkdir(parents=True)
        folder.chmod(0o755)  # traversed by sshd's and the workers' unprivileged users
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    user_key = asyncssh.generate_private_key("ssh-ed25519", comment="scalerl-workers")
    host_key.write_private_key(str(server / "host_key"))
    (server / "host_key").chmod(0o600)  # sshd refuses a host key others can read
    (server / "authorized_keys").write_bytes(user_key.export_public_key())
    (server / "authorized_keys").chmod(0o644)
    user_key.write_private_key(str(client / "client_key"))
    (client / "known_hosts").write_bytes(b"storage " + host_key.export_public_key())
    for path in (client / "client_key", client / "known_hosts"):
        if os.geteuid() == 0:
            os.chown(path, 1000, 1000)  # the image's user scalerl
            path.chmod(0o600 if path.name == "client_key" else 0o644)
        else:
            path.chmod(0o644)


def secrets_and_broker() -> None:
    """The stack's passwords and tokens in the environment compose reads, and the hosts' broker URL and token."""
    password = secrets.token_urlsafe(24)
    ENV.update(
        {
            "POSTGRES_PASSWORD": password,
            "REDIS_PASSWORD": secrets.token_urlsafe(24),
            "SCALERL_ADMIN_TOKEN": "srl_" + secrets.token_urlsafe(32),
            "SCALERL_WORKER_TOKEN": "srl_" + secrets.token_urlsafe(32),
        }
    )
    # Read by compose at every command; replaced by a token made with `scalerl token create` where the base file has
    # no SCALERL_WORKER_TOKEN (before any host starts).
    ENV["SCALERL_2H_WORKER_TOKEN"] = ENV["SCALERL_WORKER_TOKEN"]
    with_password = "${REDIS_PASSWORD" in BASE_FILE
    ENV["SCALERL_2H_BROKER_URL"] = (
        f"redis://:{ENV['REDIS_PASSWORD']}@redis:6379/0" if with_password else "redis://redis:6379/0"
    )


def start() -> Api:
    with stage("up: postgres, redis, migrations, api, storage; tokens; worker-cpu and host-a"):
        compose("down", "-v", "--remove-orphans")
        free_api_port()  # just before the API starts: another stack may have taken the port during the build
        compose("up", "-d", "postgres", "redis", "migrations", "api", "storage")
        wait_for(lambda: httpx.get(f"{URL}/healthz", timeout=5).status_code == 200, 300, "the API")
        if "SCALERL_ADMIN_TOKEN" in BASE_FILE:  # stored by the migrations service from the environment
            admin, workers = ENV["SCALERL_ADMIN_TOKEN"], ENV["SCALERL_WORKER_TOKEN"]
        else:
            made = {}
            for name, scope in (("workers", "write"), ("me", "admin")):
                r = compose("exec", "-T", "api", "scalerl", "token", "create", name, "--scope", scope, capture=True)
                made[name] = json.loads(r.stdout.strip().splitlines()[-1])["token"]
            admin, workers = made["me"], made["workers"]
        ENV["SCALERL_TOKEN"] = ENV["SCALERL_2H_WORKER_TOKEN"] = workers
        compose("up", "-d", "worker-cpu", "host-a")
        return Api(admin)


def container(service: str) -> str:
    (cid,) = compose("ps", "-q", service, capture=True).stdout.split()
    return cid


def stored_steps(run_id: int) -> list[int]:
    """The steps of the run's complete checkpoints in the SFTP server's folder (their manifests), newest first."""
    r = compose(
        "exec", "-T", "storage", "sh", "-c", f"ls /srv/runs/run-{run_id}/checkpoints 2>/dev/null || true", capture=True
    )
    return sorted({int(m.group(1)) for m in re.finditer(r"^step_(\d+)\.[\w-]+\.json$", r.stdout, re.M)}, reverse=True)


def two_hosts(api: Api) -> None:
    with stage("host-a trains past a checkpoint in storage, then is killed (SIGKILL)"):
        doc = yaml.safe_load((HERE / "grid.yaml").read_text())
        doc.pop("grid")
        doc["name"] = "two-hosts"
        run_id = api.submit(doc)

        def past_checkpoint() -> bool:
            points = api.points(run_id)
            return bool(points) and points[-1]["step"] >= CHECKPOINT_EVERY + 2 and bool(stored_steps(run_id))

        wait_for(past_checkpoint, 600, "host-a past its first checkpoint in storage", 2.0)
        run = api.run(run_id)
        assert run["status"] == "running" and run["compute_used"] < run["budget"], run
        assert (run["lease_owner"] or "").startswith("worker@host-a:"), run["lease_owner"]
        victim = container("host-a")
        sh("docker", "kill", "--signal", "KILL", victim)
        at_kill = stored_steps(run_id)
        served = api.run(run_id)["last_step"]
        log(f"run {run_id}: host-a killed at step {served} of the service; checkpoints in storage {at_kill}")

    with stage("host-b, an empty volume, resumes the run from storage"):
        compose("up", "-d", "--no-deps", "host-b")

        def resumed() -> dict[str, Any] | None:
            run = api.run(run_id)
            return run if (run["lease_owner"] or "").startswith("worker@host-b:") else None

        wait_for(resumed, 180, "host-b to hold the run", 1.0)
        final = {"succeeded", "failed", "stopped"}
        run = wait_for(lambda: (r := api.run(run_id))["status"] in final and r, 900, "the run to end", 2.0)
        assert run["status"] == "succeeded" and run["attempts"] >= 2, (run, logs())
        b_log = logs("host-b", None)
        m = re.search(rf"run {run_id}: fetched checkpoint step (\d+) from run storage", b_log)
        worker_lines = "\n".join(line for line in b_log.splitlines() if "scalerl.worker" in line)
        assert m and int(m.group(1)) == at_kill[0], (at_kill, worker_lines[-4000:])
        assert re.search(rf"run {run_id}: engine pid \d+ started \(resume\)", b_log), worker_lines[-4000:]
        points = api.points(run_id)
        steps = [p["step"] for p in points]
        assert steps == list(range(len(steps))), f"steps not 0..N once each: {steps}"
        last = points[-1]
        assert last["compute"] >= run["budget"] and last["pass_rate"] is not None, last
        last_eval = max(p["compute"] for p in points if p["pass_rate"] is not None)

        def covered() -> bool:
            full = [f for f in api.get(f"/api/v1/runs/{run_id}/fits", limit=10_000) if f["kind"] == "full"]
            return bool(full) and full[0]["compute_max"] == last_eval

        wait_for(covered, 120, "the newest full fit to cover the last evaluated point", 2.0)
        for line in worker_lines.splitlines():
            if re.search(r"run storage|started \(resume\)|sent .* higher|refused|resuming after", line):
                log("host-b: " + line.split("scalerl.worker: ", 1)[-1])
        isolated = compose(
            "exec", "-T", "host-b", "python", "-c", "import socket; socket.gethostbyname('host-a')", check=False
        )
        assert isolated.returncode != 0, "host-b can resolve host-a: the hosts share a network"
        log(
            f"run {run_id}: succeeded, {len(steps)} steps stored once, attempts {run['attempts']}; host-b fetched "
            f"step {m.group(1)} (service had step {served}), storage now {stored_steps(run_id)}"
        )


def main() -> int:
    ok = False
    try:
        if not docker_ready():
            if not BASE_TOOL.is_file():
                message = f"no Docker engine or compose, and no {BASE_TOOL} to install them"
                if os.environ.get("CI"):
                    raise StackError(message)
                print(f"two-hosts: skipped: {message}", file=sys.stderr)
                return 0
            sh("bash", str(BASE_TOOL))
        COMPOSE[:] = ["docker", "compose"] if quiet("docker", "compose", "version") else ["docker-compose"]
        COMPOSE.extend(["--project-directory", str(REPO)])
        make_keys()
        secrets_and_broker()
        build()
        api = start()
        two_hosts(api)
        ok = True
    except BaseException:
        if COMPOSE:
            print(logs(tail=150), file=sys.stderr)
        raise
    finally:
        if COMPOSE and not os.environ.get("KEEP"):
            compose("down", "-v", "--remove-orphans", check=False)
        if not os.environ.get("KEEP"):
            shutil.rmtree(WORK, ignore_errors=True)
        print("\ntwo-hosts stages:")
        for name, seconds, result in TIMINGS:
            print(f"  {seconds:7.1f} s  {result:6}  {name}")
        print(f"  {time.monotonic() - STARTED:7.1f} s  {'ok' if ok else 'FAILED':6}  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
