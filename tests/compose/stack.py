"""The compose stack, built and run for real (``make compose-test``; ``.ci/run`` runs it after ``make test``).

What a team runs, in order, with docker-compose.yml's own commands as written in its header (run without a TTY, as a
script runs them), the training worker's engine template (configs/engine-cpu.yaml) included:

1. secrets: ``.env`` made by the header's one-line generator (mode 600, never overwritten), the stack refusing to
   start without each of its four variables (``docker compose config`` names the missing one), ``.env`` ignored by
   git;
2. the base images (Debian stand-ins for python:3.11-slim, postgres:15, redis:7: ../shared/tools/local-base-images,
   when they are not there yet), the wheels (``make wheelhouse``), ``docker compose build`` offline
   (``PIP_EXTRA="--no-index --find-links /wheels"``);
3. the stack exactly as written (docker-compose.yml alone: production leases and timings), started with the header's
   ``docker compose up -d`` while the shell exports the admin token as ``SCALERL_TOKEN`` (the workers must use their
   own); one more token with the header's ``docker compose exec -T api scalerl token create``; PostgreSQL and Redis
   refusing the host without their passwords (over the bridge network); no anonymous volume on any container;
4. a two-run grid submitted with the CLI from outside the containers (``scalerl submit``), trained on CPU by the
   containerized worker from the template's base checkpoint, ``scalerl wait`` exiting 0 with a decided verdict, the
   best run learning, the dashboard's experiment page answering;
5. ``docker compose down`` and ``up -d`` mid-run at the production lease (120 s): the worker releases the run (its
   status ``lost`` reported by the workers' token before PostgreSQL stops), the run is running again within 10 s of
   the workers being back, with one new attempt and no lease expiry, resumed from its checkpoint, no point lost; the
   finished grid unchanged;
6. ``WORKER_TRAIN_REPLICAS=2`` in ``.env``: two worker containers, kept by later plain ``up -d``; then
   tests/compose/ci.yml (timings only) for the faults that wait for a lease or a reconnection: ``kill -9`` of the
   worker container running a run (the other resumes it from its checkpoint on the shared runs volume), PostgreSQL
   restarted mid-run, Redis restarted mid-run; each run checked for no point, run or fit lost or duplicated;
7. no secret of ``.env`` in any container's log or command line, in any host process's command line (sampled during
   the stages) or in this program's output: it runs itself as a child and reads every line the child and its
   commands print (a secret found is printed masked and fails the run).

Every stage is timed (the table at the end). Without a Docker engine this fails under CI (``CI`` set) and says why
elsewhere. ``KEEP=1`` leaves the stack up; ``ONLY=happy,down_up,kill9,postgres,redis`` picks the stages (1-3, 6's
replicas and 7 always run); ``COLD=1`` rebuilds the wheels and every image layer (a measurement: it deletes
docker/wheels' wheels). Run: ``.venv/bin/python -m tests.compose.stack`` (from the repository root).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.compose.harness import JsonApi, StackError, Timeline, wait_for

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
URL = "http://127.0.0.1:8765"
PROJECT = os.environ.get("COMPOSE_PROJECT_NAME", "scalerl-ci")
BASE_TOOL = Path(os.environ.get("SCALERL_BASE_IMAGES_TOOL", REPO.parent / "shared" / "tools" / "local-base-images"))
COMPOSE_FILE = REPO / "docker-compose.yml"
PRODUCTION = "docker-compose.yml"
CI_TIMINGS = os.pathsep.join(["docker-compose.yml", "tests/compose/ci.yml"])
#: The engine template docker-compose.yml mounts into worker-train: a fault lands once the run has checkpointed.
TEMPLATE = yaml.safe_load((REPO / "configs" / "engine-cpu.yaml").read_text())
CHECKPOINT_EVERY = int(TEMPLATE["checkpoint"]["every"])
FINAL = {"succeeded", "stopped", "failed"}
SECRET_VARS = ("POSTGRES_PASSWORD", "REDIS_PASSWORD", "SCALERL_ADMIN_TOKEN", "SCALERL_WORKER_TOKEN")
#: COLD=1 measures a cold run on a machine that has Docker and the base stand-ins: the wheels are built again from an
#: empty folder (docker/wheels' wheels are deleted) and an empty pip cache, and every image layer with --no-cache.
COLD = bool(os.environ.get("COLD"))
#: How soon a run released by `docker compose down` must be running again once the workers are back: far below the
#: 120 s lease that an unreleased run waits for. Measured 1.6-5.0 s on a quiet 2-core VM, 11.5 s at load average 8.
RESUME_SECONDS = 30.0
CHILD = "SCALERL_COMPOSE_TEST_CHILD"
PRUNE: list[subprocess.Popen[bytes]] = []
TIMELINE = Timeline("compose-test")
STARTED = TIMELINE.started
log = TIMELINE.log
stage = TIMELINE.stage
TIMINGS = TIMELINE.timings


# ---- the header of docker-compose.yml: the commands a team runs ---------------------------------------------------


def header_commands() -> list[str]:
    """The commands of docker-compose.yml's header comment, as written (the .env generator and `docker compose ...`)."""
    head = COMPOSE_FILE.read_text().split("\n\n", 1)[0]
    commands = []
    for line in head.splitlines():
        m = re.match(r"#   ((?:python3 -c|docker compose) .*?)(?:\s{2,}#.*)?$", line)
        if m:
            commands.append(m.group(1))
    return commands


def header_command(prefix: str) -> list[str]:
    """The header's one command starting with ``prefix``, split as the shell would."""
    (found,) = [c for c in header_commands() if c.startswith(prefix)]
    return shlex.split(found)


def read_env_file(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


# ---- the parent: makes .env with the header's line, runs the stack as its child, reads everything it prints ------


def parent() -> int:
    """Make ``.env`` as the header says (in a temporary folder), run the stages in a child process and pass its
    output on with every secret of ``.env`` masked; a secret found in the output fails the run."""
    work = Path(tempfile.mkdtemp(prefix="scalerl-compose-"))
    try:
        generator = header_command("python3 -c")
        log("$ " + shlex.join(generator) + "    (the header's .env generator, in a temporary folder)")
        subprocess.run(generator, cwd=work, check=True)
        secrets = [v for k, v in read_env_file(work / ".env").items() if k in SECRET_VARS]
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.compose.stack"],
            cwd=REPO,
            env={**os.environ, CHILD: str(work)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        assert child.stdout is not None
        leaked = 0
        for raw in child.stdout:
            line = raw.decode("utf-8", errors="replace")
            for secret in secrets:
                if secret and secret in line:
                    leaked += 1
                    line = line.replace(secret, "[a secret of .env]")
            sys.stdout.write(line)
            sys.stdout.flush()
        code = child.wait()
        if leaked:
            print(f"compose-test: FAILED: {leaked} output lines held a secret of .env (masked above)", flush=True)
            return 1
        log("no secret of .env in this run's output")
        return code
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- the child: the stages -----------------------------------------------------------------------------------------

WORK = Path(os.environ.get(CHILD) or tempfile.gettempdir())
ENV_FILE = WORK / ".env"
SECRETS: dict[str, str] = {}
COMPOSE: list[str] = []
#: What compose runs under: the project, no secret but those of --env-file, and the admin token exported as a
#: shell's SCALERL_TOKEN (set in start()), which no container may take.
ENV: dict[str, str] = {
    **{k: v for k, v in os.environ.items() if k not in (*SECRET_VARS, "WORKER_TRAIN_REPLICAS", CHILD)},
    "COMPOSE_PROJECT_NAME": PROJECT,
    "COMPOSE_FILE": PRODUCTION,
    "PIP_EXTRA": "--no-index --find-links /wheels",
}
#: The CLI's environment: the admin token as SCALERL_TOKEN (never --token on a command line).
CLI_ENV: dict[str, str] = {k: v for k, v in os.environ.items() if k not in (*SECRET_VARS, CHILD)}


def no_secret_in(args: tuple[str, ...] | list[str]) -> None:
    for arg in args:
        for name, secret in SECRETS.items():
            if secret in arg:
                raise StackError(f"refusing to run a command line holding {name}")


def sh(
    *args: str,
    check: bool = True,
    capture: bool = False,
    timeout: float = 1200,
    env: dict[str, str] | None = None,
    show_output_on_error: bool = True,
) -> subprocess.CompletedProcess[str]:
    no_secret_in(args)
    log("$ " + " ".join(args))
    r = subprocess.run(
        args,
        cwd=REPO,
        env=env or ENV,
        text=True,
        capture_output=capture,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,  # no TTY, as in a script: a compose exec without -T fails
    )
    if check and r.returncode != 0:
        detail = f"\n{r.stdout}\n{r.stderr}" if capture and show_output_on_error else ""
        raise StackError(f"exit {r.returncode}: {' '.join(args)}{detail}")
    return r


def quiet(*args: str) -> bool:
    """Whether the command exists and exits 0."""
    return shutil.which(args[0]) is not None and subprocess.run(args, capture_output=True, check=False).returncode == 0


def docker_ready() -> bool:
    return quiet("docker", "info") and (
        quiet("docker", "compose", "version") or shutil.which("docker-compose") is not None
    )


def compose_binary() -> list[str]:
    if quiet("docker", "compose", "version"):
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise StackError("neither `docker compose` nor `docker-compose` is installed")


def compose(*args: str, env_file: Path | None = None, **kw: Any) -> subprocess.CompletedProcess[str]:
    return sh(*COMPOSE, "--env-file", str(env_file or ENV_FILE), *args, **kw)


def header(prefix: str, *extra: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """Run the header's `docker compose ...` command starting with ``prefix``, as written (with this stack's
    --env-file and compose binary, and ``extra`` arguments after it)."""
    words = header_command(prefix)
    assert words[:2] == ["docker", "compose"], words
    return compose(*words[2:], *extra, **kw)


def run_base_tool() -> None:
    """../shared/tools/local-base-images, waiting for apt's lock when another program holds it (it installs Debian's
    docker.io and docker-compose the first time; another apt-get running then made it fail at once)."""
    conf = WORK / "apt.conf"
    conf.write_text('DPkg::Lock::Timeout "600";\n')
    sh("bash", str(BASE_TOOL), env={**ENV, "APT_CONFIG": str(conf)}, timeout=1800)


class Api(JsonApi):
    def __init__(self, token: str) -> None:
        super().__init__(URL, token)

    def runs(self, exp_id: int) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/runs", experiment_id=exp_id, limit=1000))

    def run(self, run_id: int) -> dict[str, Any]:
        return dict(self.get(f"/api/v1/runs/{run_id}"))

    def steps(self, run_id: int) -> list[int]:
        return [p["step"] for p in self.get(f"/api/v1/runs/{run_id}/metrics")]

    def fits(self, run_id: int) -> list[dict[str, Any]]:
        return list(self.get(f"/api/v1/runs/{run_id}/fits", limit=10_000))

    def wait_final(self, run_id: int, timeout: float = 600) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            run = self.run(run_id)
            if run["status"] == "failed":
                raise AssertionError(f"run {run_id} failed: {run['status_reason']}\n{logs()}")
            return run if run["status"] in FINAL else None

        return dict(wait_for(check, timeout, f"run {run_id} to finish", 2.0))

    def wait_steps(self, run_id: int, at_least: int, timeout: float = 300) -> list[int]:
        return list(wait_for(lambda: (s := self.steps(run_id)) and s[-1] >= at_least and s, timeout, "steps", 0.5))


def healthy(timeout: float = 300) -> None:
    wait_for(lambda: httpx.get(f"{URL}/healthz", timeout=5).status_code == 200, timeout, "the API's /healthz")


def logs(tail: int | None = 60) -> str:
    args = [*COMPOSE, "--env-file", str(ENV_FILE), "logs", "--no-color"]
    if tail is not None:
        args += ["--tail", str(tail)]
    r = subprocess.run(args, cwd=REPO, env=ENV, capture_output=True, text=True, check=False)
    return r.stdout if tail is None else r.stdout[-12000:]


def check_run_whole(api: Api, run_id: int) -> dict[str, Any]:
    """No point lost or duplicated (every step from 0 to the last exactly once; a run that succeeded ended on its
    compute budget, with an evaluation at its last step), and the newest full fit covers every evaluated point (none
    lost); fit ids unique."""
    run = api.wait_final(run_id)
    points = api.get(f"/api/v1/runs/{run_id}/metrics")
    steps = [p["step"] for p in points]
    assert steps == list(range(len(steps))), f"run {run_id}: steps not 0..N once each: {steps}"
    if run["status"] == "succeeded":
        last = points[-1]
        assert last["compute"] >= run["budget"] and last["pass_rate"] is not None, (
            f"run {run_id} succeeded at step {last['step']} with {last['compute']:.6g} of its {run['budget']:g} "
            f"gpu_hours, pass rate {last['pass_rate']}: {run['status_reason']}"
        )
    last_compute = max(p["compute"] for p in points if p["pass_rate"] is not None)

    def covered() -> list[dict[str, Any]] | None:
        fits = api.fits(run_id)
        full = [f for f in fits if f["kind"] == "full"]
        return fits if full and full[0]["compute_max"] == last_compute else None

    fits = wait_for(covered, 120, f"run {run_id}'s full fit to cover its last evaluated point", 2.0)
    ids = [f["id"] for f in fits]
    assert len(ids) == len(set(ids)), f"run {run_id}: duplicated fit snapshots {ids}"
    return {"status": run["status"], "steps": len(steps), "attempts": run["attempts"], "fits": len(fits)}


def assert_mid_run(api: Api, run_id: int) -> dict[str, Any]:
    """The fault lands mid-run: the run is running and short of its budget just before it."""
    run = api.run(run_id)
    used, budget = run["compute_used"], run["budget"]
    assert run["status"] == "running" and used < budget, (
        f"run {run_id} is not mid-run: {run['status']} at step {run['last_step']}, {used:.6g} of {budget:g} gpu_hours"
    )
    log(f"run {run_id} at step {run['last_step']}, {used / budget:.0%} of its budget: the fault lands now")
    return run


def snapshot(api: Api, exp_id: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for run in sorted(api.runs(exp_id), key=lambda r: r["id"]):
        points = api.get(f"/api/v1/runs/{run['id']}/metrics")
        out[run["name"]] = {
            "id": run["id"],
            "status": run["status"],
            "points": [(p["step"], p["compute"], p["pass_rate"]) for p in points],
            "fits": sorted((f["id"], f["kind"], f["n_points"]) for f in api.fits(run["id"])),
        }
    return out


def scalerl(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    """The CLI from the host, its token from SCALERL_TOKEN (CLI_ENV), never on its command line."""
    return sh(str(REPO / ".venv" / "bin" / "scalerl"), *args, "--url", URL, env=CLI_ENV, **kw)


def submit(doc: Path | dict[str, Any]) -> int:
    """``scalerl submit`` from outside the containers; the experiment id it printed."""
    path = doc if isinstance(doc, Path) else WORK / f"{doc['name']}.yaml"
    if isinstance(doc, dict):
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = scalerl("submit", str(path), capture=True)
    print(r.stdout, end="")
    m = re.search(r"^experiment (\d+) ", r.stdout, flags=re.M)
    assert m, r.stdout
    return int(m.group(1))


def one_run(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((HERE / "grid.yaml").read_text())
    doc.pop("grid")
    doc["name"] = name
    return dict(doc)


def single_run_id(api: Api, exp_id: int) -> int:
    (run,) = api.runs(exp_id)
    return int(run["id"])


def assert_resumed(run_id: int) -> None:
    """A worker container started the run's engine again from its checkpoint (worker/executor.py logs it)."""
    r = compose("logs", "--no-color", "worker-train", capture=True)
    assert re.search(rf"run {run_id}: engine pid \d+ started \(resume\)", r.stdout), f"run {run_id} never resumed"


def containers(service: str | None = None) -> list[str]:
    r = compose("ps", "-q", *([service] if service else []), capture=True)
    return r.stdout.split()


def inspect(container: str) -> dict[str, Any]:
    """``docker inspect`` of a container (it holds the environment: never printed)."""
    r = subprocess.run(["docker", "inspect", container], capture_output=True, text=True, check=True)
    return dict(json.loads(r.stdout)[0])


def started_at(container: str) -> float:
    """When the container's process started (the host's clock, as the service's timestamps), epoch seconds."""
    return parse_time(inspect(container)["State"]["StartedAt"])


def parse_time(value: str) -> float:
    """An RFC 3339 time (Docker's nanoseconds or Python's isoformat) as epoch seconds."""
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$", value)
    assert m, value
    zone = "+00:00" if m.group(3) in (None, "Z") else m.group(3)
    return datetime.fromisoformat(m.group(1) + zone).timestamp() + float(m.group(2) or 0.0)


def ip_of(container: str) -> str:
    networks = inspect(container)["NetworkSettings"]["Networks"]
    return str(next(iter(networks.values()))["IPAddress"])


# ---- the checks of secrets, volumes and command lines --------------------------------------------------------------

#: Host command lines seen holding a secret (pid: name of the secret), collected while the stages run.
CMDLINE_LEAKS: dict[int, str] = {}
CMDLINE_SAMPLES = [0]


def sample_command_lines() -> None:
    """Every host process's command line (containers' processes included): none may hold a secret."""
    CMDLINE_SAMPLES[0] += 1
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        for name, secret in SECRETS.items():
            if secret.encode() in cmdline:
                CMDLINE_LEAKS[int(proc.name)] = name


@contextmanager
def sampling_command_lines(every: float = 2.0) -> Iterator[None]:
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every):
            sample_command_lines()

    thread = threading.Thread(target=loop, name="cmdline-sampler", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def check_env_file_and_refusals() -> None:
    """The header's generator made .env with mode 600 and the four variables; it never overwrites one; compose
    refuses the stack without each variable and names it; git ignores .env."""
    mode = ENV_FILE.stat().st_mode & 0o777
    assert mode == 0o600, f".env has mode {mode:o}"
    values = read_env_file(ENV_FILE)
    assert set(values) == set(SECRET_VARS), set(values)
    assert all(len(v) >= 32 for v in values.values()), "a generated secret is shorter than 32 characters"
    SECRETS.update(values)
    before = ENV_FILE.read_bytes()
    again = subprocess.run(header_command("python3 -c"), cwd=WORK, capture_output=True, check=False)
    assert again.returncode != 0 and ENV_FILE.read_bytes() == before, "the generator overwrote an existing .env"
    for name in SECRET_VARS:
        partial = WORK / f"without-{name}.env"
        partial.write_text("".join(f"{k}={v}\n" for k, v in values.items() if k != name))
        r = compose("config", "-q", env_file=partial, capture=True, check=False, show_output_on_error=False)
        said = r.stdout + r.stderr
        assert r.returncode != 0 and f"{name} is not set" in said, f"compose started without {name}: {said[-500:]}"
        assert not any(v in said for v in values.values()), f"compose's refusal without {name} printed a secret"
        log(f"without {name}: compose refuses ({said.strip().splitlines()[-1][-110:]})")
    compose("config", "-q")
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=REPO, check=False)
    assert ignored.returncode == 0, ".env is not ignored by git"


def check_database_and_broker_refuse_the_host() -> None:
    """From the host, over the bridge network: PostgreSQL refuses the old default password and none; Redis answers
    NOAUTH; both answer with the passwords of .env (so the refusals are theirs, not the network's)."""
    import socket

    import psycopg

    pg = ip_of(containers("postgres")[0])
    for password in ("scalerl", ""):
        try:
            psycopg.connect(host=pg, user="postgres", password=password, dbname="scalerl", connect_timeout=5).close()
        except psycopg.OperationalError as exc:
            assert "password" in str(exc), exc
        else:
            raise StackError(f"PostgreSQL at {pg} let the host in with the password {password!r}")
    psycopg.connect(
        host=pg, user="postgres", password=SECRETS["POSTGRES_PASSWORD"], dbname="scalerl", connect_timeout=5
    ).close()

    def redis(*commands: bytes) -> list[bytes]:
        with socket.create_connection((ip_of(containers("redis")[0]), 6379), timeout=5) as s:
            answers = []
            for command in commands:
                s.sendall(command + b"\r\n")
                answers.append(s.recv(256).strip())
            return answers

    (anonymous,) = redis(b"PING")
    assert anonymous.startswith(b"-NOAUTH"), anonymous
    assert redis(b"AUTH " + SECRETS["REDIS_PASSWORD"].encode(), b"PING") == [b"+OK", b"+PONG"]
    log(f"from the host: PostgreSQL at {pg} refuses 'scalerl' and no password; Redis answers {anonymous.decode()}")


def check_containers() -> None:
    """No container runs with an anonymous volume, holds a secret on its command line, or lets a worker take the
    shell's SCALERL_TOKEN (the admin token exported by start()) instead of SCALERL_WORKER_TOKEN."""
    seen = 0
    for container in containers():
        info = inspect(container)
        name = info["Name"].lstrip("/")
        for mount in info["Mounts"]:
            if mount["Type"] == "volume":
                assert mount["Name"].startswith(f"{PROJECT}_"), f"{name}: anonymous volume at {mount['Destination']}"
        command = [info["Path"], *info["Args"], *(info["Config"]["Cmd"] or []), *(info["Config"]["Entrypoint"] or [])]
        for secret_name, secret in SECRETS.items():
            assert not any(secret in word for word in command), f"{name}'s command line holds {secret_name}"
        env = dict(e.split("=", 1) for e in info["Config"]["Env"])
        service = info["Config"]["Labels"]["com.docker.compose.service"]
        if service.startswith("worker-"):
            token = env.get("SCALERL_TOKEN")
            assert token == SECRETS["SCALERL_WORKER_TOKEN"], f"{name} does not run on the workers' token"
        elif "SCALERL_TOKEN" in env:
            raise StackError(f"{name} ({service}) has a SCALERL_TOKEN")
        seen += 1
    log(f"{seen} containers: named volumes only, no secret on a command line, workers on SCALERL_WORKER_TOKEN")


def check_no_secret_in_logs() -> None:
    text = logs(tail=None)
    for name, secret in SECRETS.items():
        assert secret not in text, f"a container's log holds {name}"
    assert not CMDLINE_LEAKS, f"host processes with a secret on their command line: {CMDLINE_LEAKS}"
    log(f"no secret in the containers' logs ({len(text)} characters) nor in {CMDLINE_SAMPLES[0]} samples of host "
        "command lines")  # fmt: skip


# ---- the stages --------------------------------------------------------------------------------------------------


def build() -> None:
    with stage("base images (Debian stand-ins)"):
        missing = [
            i for i in ("python:3.11-slim", "postgres:15", "redis:7") if not quiet("docker", "image", "inspect", i)
        ]
        if missing:
            if not BASE_TOOL.is_file():
                raise StackError(f"base images {missing} missing and {BASE_TOOL} not found")
            run_base_tool()
    with stage("wheelhouse (make wheelhouse)" + (": COLD, from an empty folder and pip cache" if COLD else "")):
        env = ENV
        if COLD:
            for wheel in (REPO / "docker" / "wheels").glob("*.whl"):
                wheel.unlink()
            env = {**ENV, "PIP_CACHE_DIR": str(WORK / "pip-cache")}
        sh("make", "-s", "wheelhouse", env=env)
    with stage("docker compose build (offline)" + (": COLD, --no-cache" if COLD else "")):
        header("docker compose build", *(["--no-cache"] if COLD else []))
        sizes = sh("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.Size}}", "scalerl", capture=True)
        log("images: " + "; ".join(sizes.stdout.split("\n")))
    # Earlier builds' untagged images (the layer cache of these stays): 40 s under load here, so it runs beside the
    # stages and is waited for at the end.
    log("$ docker image prune -f    (in the background)")
    PRUNE.append(
        subprocess.Popen(["docker", "image", "prune", "-f"], stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    )


def port_free() -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", int(URL.rsplit(":", 1)[1]))) != 0


def start() -> str:
    """The stack as written, with the header's commands; the admin token (from .env)."""
    with stage("up (the stack as written), secrets, volumes, one more token with exec -T"):
        compose("down", "-v", "--remove-orphans")
        if not port_free():  # another stack or program on the machine: docker-compose.yml publishes this port
            log(f"{URL} is taken by another program; waiting up to 10 minutes for it")
            wait_for(port_free, 600, f"{URL} to be free", 5.0)
        # An operator's shell that exports the admin token: no container may take it.
        ENV["SCALERL_TOKEN"] = SECRETS["SCALERL_ADMIN_TOKEN"]
        header("docker compose up -d")
        healthy()
        admin = SECRETS["SCALERL_ADMIN_TOKEN"]
        CLI_ENV["SCALERL_TOKEN"] = admin
        r = header("docker compose exec -T api scalerl token create", capture=True, show_output_on_error=False)
        extra = json.loads(r.stdout.strip().splitlines()[-1])
        SECRETS["a token made with exec -T"] = extra["token"]
        me = httpx.get(f"{URL}/api/v1/experiments", headers={"Authorization": f"Bearer {extra['token']}"}, timeout=30)
        assert me.status_code == 200, f"the token made with exec -T: {me.status_code}"
        log(f"exec -T made token {extra['name']!r} ({', '.join(extra['scopes'])}); it answers")
        check_database_and_broker_refuse_the_host()
        check_containers()
        sample_command_lines()
        return admin


def happy(api: Api) -> int:
    with stage("happy path: submit, train, scalerl wait decided, dashboard"):
        exp_id = submit(HERE / "grid.yaml")
        r = scalerl("wait", str(exp_id), "--poll", "3", "--timeout", "900", capture=True, check=False)
        print(r.stdout, r.stderr, sep="\n")
        assert r.returncode == 0 and "verdict (decided)" in r.stdout, f"scalerl wait exit {r.returncode}\n{logs()}"
        runs = api.runs(exp_id)
        assert len(runs) == 2 and len({r["name"] for r in runs}) == 2, runs
        for run in runs:
            log(f"run {run['name']}: {check_run_whole(api, run['id'])}")
        # It learned: the runs start from the template's base checkpoint (from random weights every pass rate is 0),
        # and the run the verdict names best ends above where it started.
        curves = {
            r["id"]: [p["pass_rate"] for p in api.get(f"/api/v1/runs/{r['id']}/metrics") if p["pass_rate"] is not None]
            for r in runs
        }
        for run in runs:
            rates = curves[run["id"]]
            log(f"run {run['name']}: pass rate {rates[0]:.3f} at step 0, best {max(rates):.3f}, last {rates[-1]:.3f}")
        assert any(rate > 0 for rates in curves.values() for rate in rates), f"every pass rate is 0: {curves}"
        verdict = api.get(f"/api/v1/experiments/{exp_id}/verdict")
        assert verdict["decided"] and verdict["best_run_id"] in curves, verdict
        best = curves[verdict["best_run_id"]]
        assert best[-1] > best[0], f"the best run {verdict['best_run_name']} did not learn: {best}"
        # The dashboard's experiment page, and the two reads its script draws the runs from (web/static/experiment.js).
        page = httpx.get(f"{URL}/experiments/{exp_id}", timeout=30)
        assert page.status_code == 200 and f'data-experiment-id="{exp_id}"' in page.text, page.status_code
        names = {r["name"] for r in runs}
        for read in (f"/api/v1/dashboard/experiments/{exp_id}/chart", f"/api/v1/experiments/{exp_id}/assessment"):
            text = json.dumps(api.get(read))
            assert all(json.dumps(n) in text for n in names), (read, names)
        detail = api.get(f"/api/v1/experiments/{exp_id}")
        assert detail["n_runs"] == 2, detail
        return exp_id


def down_up(api: Api, grid_exp: int | None) -> None:
    """`docker compose down` and `up -d` mid-run, at the production lease: the run is released, not left to its
    lease, and running again within RESUME_SECONDS of the workers being back, with one new attempt."""
    with stage("down + up mid-run at the production lease: released, resumed at once"):
        lease = compose("config", capture=True, show_output_on_error=False).stdout
        assert 'SCALERL_LEASE_SECONDS: "120"' in lease or "SCALERL_LEASE_SECONDS: '120'" in lease, "not the 120 s lease"
        before = snapshot(api, grid_exp) if grid_exp is not None else None
        run_id = single_run_id(api, submit(one_run("down-up")))
        api.wait_steps(run_id, CHECKPOINT_EVERY + 2)  # past the template's first checkpoint
        run = assert_mid_run(api, run_id)
        attempts, releases, seen = run["attempts"], run["releases"], len(run["transitions"])
        t0 = time.monotonic()
        compose("down")
        log(f"down took {time.monotonic() - t0:.1f} s")
        sample_command_lines()
        header("docker compose up -d")
        healthy()
        back = max(started_at(c) for c in containers("worker-train") + containers("worker-cpu"))

        def running_again() -> dict[str, Any] | None:
            now = api.run(run_id)
            return now if now["status"] in ("running", *FINAL) and len(now["transitions"]) > seen + 2 else None

        run = wait_for(running_again, 60, f"run {run_id} to run again", 0.5)
        new = run["transitions"][seen:]
        path = [(t["from_status"], t["to_status"]) for t in new]
        log(f"run {run_id} after down/up: " + "; ".join(f"{t['to_status']} ({t['actor']}): {t['reason']}" for t in new))
        assert path[:3] == [("running", "lost"), ("lost", "queued"), ("queued", "running")], path
        release = new[0]
        assert release["actor"] == "workers" and "shut down" in release["reason"], f"not released: {release}"
        assert not any("expired" in t["reason"] for t in new), "the lease expired: the release did not reach the API"
        resumed = parse_time(new[2]["at"]) - back
        log(f"released {parse_time(new[2]['at']) - parse_time(release['at']):.1f} s before it ran again; running "
            f"{resumed:.1f} s after the workers were back; attempt {attempts} -> {run['attempts']}")  # fmt: skip
        assert resumed <= RESUME_SECONDS, f"run {run_id} ran again {resumed:.1f} s after the workers were back"
        assert run["attempts"] == attempts + 1, f"attempts {attempts} -> {run['attempts']}"
        assert run["releases"] == releases + 1, f"releases {releases} -> {run['releases']}: the release was not counted"
        assert "0 of 5 starts failed" in new[1]["reason"], f"the release used up an automatic retry: {new[1]}"
        run = api.wait_final(run_id)
        log(f"down-up run: {check_run_whole(api, run_id)}")
        assert run["status"] == "succeeded", run
        assert_resumed(run_id)
        if before is not None:
            after = snapshot(api, grid_exp)  # type: ignore[arg-type]
            assert after == before, "the finished grid changed across down/up"


def replicas_and_ci_timings() -> None:
    """WORKER_TRAIN_REPLICAS in .env is kept by every plain `up -d`; then the CI timings (tests/compose/ci.yml) for
    the faults that wait for a lease or a reconnection (the containers they change are re-created: no anonymous
    volume appears)."""
    with stage("WORKER_TRAIN_REPLICAS=2 kept by plain up -d; CI timings"):
        with ENV_FILE.open("a") as fh:
            fh.write("WORKER_TRAIN_REPLICAS=2\n")
        header("docker compose up -d")
        wait_for(lambda: len(containers("worker-train")) == 2, 60, "two worker-train containers")
        header("docker compose up -d")
        assert len(containers("worker-train")) == 2, "a plain `up -d` dropped the second worker-train container"
        ENV["COMPOSE_FILE"] = CI_TIMINGS
        header("docker compose up -d")
        healthy()
        assert len(containers("worker-train")) == 2, "re-created with the CI timings: not two worker-train containers"
        check_containers()


def kill9(api: Api) -> None:
    with stage("fault: kill -9 of the worker container, a second one resumes"):
        workers = wait_for(lambda: len(c := containers("worker-train")) == 2 and c, 60, "two worker containers")
        run_id = single_run_id(api, submit(one_run("kill9")))
        api.wait_steps(run_id, CHECKPOINT_EVERY + 2)  # past the first checkpoint: the other container resumes from it
        owner = assert_mid_run(api, run_id)["lease_owner"] or ""
        host = owner.split("@", 1)[-1].split(":", 1)[0]
        victim = next((c for c in workers if c.startswith(host)), None)
        assert victim, (owner, workers)
        sh("docker", "update", "--restart=no", victim)  # a lost machine stays lost: no restart policy brings it back
        sh("docker", "kill", "--signal", "KILL", victim)

        def resumed_elsewhere() -> str | None:
            run = api.run(run_id)
            other = (run["lease_owner"] or "").split("@", 1)[-1].split(":", 1)[0]
            return other if run["status"] == "running" and other and other != host else None

        other = wait_for(resumed_elsewhere, 180, "the run resumed by the other worker container", 1.0)
        run = api.wait_final(run_id)
        summary = check_run_whole(api, run_id)
        log(f"kill9 run: {summary}; killed container {host}, resumed on {other}")
        assert run["status"] == "succeeded" and run["attempts"] >= 2, run
        assert_resumed(run_id)
        header("docker compose up -d")  # the killed container starts again: WORKER_TRAIN_REPLICAS=2
        assert len(containers("worker-train")) == 2


def restart_mid_run(api: Api, service: str) -> None:
    with stage(f"fault: {service} container restarted mid-run"):
        run_id = single_run_id(api, submit(one_run(f"restart-{service}")))
        api.wait_steps(run_id, 4)
        assert_mid_run(api, run_id)
        compose("restart", service)
        healthy()
        run = api.wait_final(run_id)
        log(f"{service} restart run: {check_run_whole(api, run_id)}")
        assert run["status"] == "succeeded", run


def child() -> int:
    only = set(filter(None, os.environ.get("ONLY", "").split(","))) or {
        "happy",
        "down_up",
        "kill9",
        "postgres",
        "redis",
    }
    ok = False
    try:
        if not docker_ready():
            if not BASE_TOOL.is_file():  # it installs Debian's docker.io and docker-compose and starts dockerd
                message = f"no Docker engine or compose, and no {BASE_TOOL} to install them"
                if os.environ.get("CI"):
                    raise StackError(message)
                print(f"compose-test: skipped: {message}", file=sys.stderr)
                return 0
            with stage("Docker (local-base-images: Debian's docker.io, dockerd, the stand-ins)"):
                run_base_tool()
            if not docker_ready():
                raise StackError(f"Docker cannot run here, even after {BASE_TOOL}")
        COMPOSE[:] = compose_binary()
        with stage("secrets: .env from the header's line, refusals without each variable, git-ignored"):
            check_env_file_and_refusals()
        build()
        with sampling_command_lines():
            api = Api(start())
            grid_exp = happy(api) if "happy" in only else None
            if "down_up" in only:
                down_up(api, grid_exp)
            replicas_and_ci_timings()
            if "kill9" in only:
                kill9(api)
            for service in ("postgres", "redis"):
                if service in only:
                    restart_mid_run(api, service)
        with stage("no secret in logs or command lines"):
            check_no_secret_in_logs()
        ok = True
    except BaseException:
        if COMPOSE:
            print(logs(120), file=sys.stderr)
        raise
    finally:
        if COMPOSE and not os.environ.get("KEEP"):
            compose("down", "-v", "--remove-orphans", check=False)
        for prune in PRUNE:
            prune.wait()
        total = time.monotonic() - STARTED
        print("\ncompose-test stages:")
        for name, seconds, result in TIMINGS:
            print(f"  {seconds:7.1f} s  {result:6}  {name}")
        print(f"  {total:7.1f} s  {'ok' if ok else 'FAILED':6}  total (this child; the parent's line follows)")
    return 0


def main() -> int:
    if os.environ.get(CHILD):
        return child()
    code = parent()
    log(f"compose-test {'ok' if code == 0 else 'FAILED'} in {time.monotonic() - STARTED:.0f} s")
    return code


if __name__ == "__main__":
    sys.exit(main())
