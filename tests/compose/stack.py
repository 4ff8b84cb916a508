"""The compose stack, built and run for real (``make compose-test``; ``.ci/run`` runs it after ``make test``).

What a team runs, in order, with docker-compose.yml's own commands as written, the training worker's engine template
(configs/engine-cpu.yaml, mounted by docker-compose.yml) included; tests/compose/ci.yml only shortens leases,
heartbeats, polling and the stop grace:

1. the base images (Debian stand-ins for python:3.11-slim, postgres:15, redis:7: ../shared/tools/local-base-images,
   when they are not there yet), the wheels (``make wheelhouse``), ``docker compose build`` offline
   (``PIP_EXTRA="--no-index --find-links /wheels"``);
2. ``docker compose up -d postgres redis migrations api``, two tokens with ``docker compose exec api scalerl token
   create``, ``docker compose up -d``;
3. a two-run grid submitted with the CLI from outside the containers (``scalerl submit``), trained on CPU by the
   containerized worker from the template's base checkpoint (built once on the runs volume), ``scalerl wait``
   exiting 0 with a decided verdict, a pass rate above 0 (the runs learn), the dashboard's experiment page answering;
4. the faults, each on a one-run experiment and each checked for no point, run or fit lost or duplicated:
   ``docker compose down`` + ``up`` with the volumes kept (mid-run, and the finished grid unchanged); ``kill -9`` of
   the worker container mid-run, after the run's first checkpoint, with a second worker container resuming from it on
   the shared runs volume; the PostgreSQL container restarted mid-run; the Redis container restarted mid-run.

Every stage is timed (the table at the end). Without a Docker engine this fails under CI (``CI`` set) and says why
elsewhere. ``KEEP=1`` leaves the stack up; ``ONLY=happy,down_up,kill9,postgres,redis`` picks the stages.
Run: ``.venv/bin/python -m tests.compose.stack`` (from the repository root).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
URL = "http://127.0.0.1:8765"
PROJECT = os.environ.get("COMPOSE_PROJECT_NAME", "scalerl-ci")
BASE_TOOL = Path(os.environ.get("SCALERL_BASE_IMAGES_TOOL", REPO.parent / "shared" / "tools" / "local-base-images"))
#: The engine template docker-compose.yml mounts into worker-train: a fault lands once the run has checkpointed.
TEMPLATE = yaml.safe_load((REPO / "configs" / "engine-cpu.yaml").read_text())
CHECKPOINT_EVERY = int(TEMPLATE["checkpoint"]["every"])
FINAL = {"succeeded", "stopped", "failed"}
TIMINGS: list[tuple[str, float, str]] = []
WORK = Path(tempfile.mkdtemp(prefix="scalerl-compose-"))  # the one-run grid documents the faults submit
STARTED = time.monotonic()


class StackError(AssertionError):
    pass


def log(message: str) -> None:
    print(f"[compose-test {time.monotonic() - STARTED:7.1f}s] {message}", flush=True)


def sh(
    *args: str, check: bool = True, capture: bool = False, timeout: float = 1200, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    log("$ " + " ".join(args))
    r = subprocess.run(args, cwd=REPO, env=env or ENV, text=True, capture_output=capture, timeout=timeout, check=False)
    if check and r.returncode != 0:
        detail = f"\n{r.stdout}\n{r.stderr}" if capture else ""
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


ENV: dict[str, str] = {
    **os.environ,
    "COMPOSE_PROJECT_NAME": PROJECT,
    "COMPOSE_FILE": os.pathsep.join(["docker-compose.yml", "tests/compose/ci.yml"]),
    "PIP_EXTRA": "--no-index --find-links /wheels",
}
COMPOSE: list[str] = []


def compose(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    return sh(*COMPOSE, *args, **kw)


@contextmanager
def stage(name: str) -> Iterator[None]:
    log(f"=== {name}")
    t0 = time.monotonic()
    try:
        yield
    except BaseException:
        TIMINGS.append((name, time.monotonic() - t0, "FAILED"))
        raise
    TIMINGS.append((name, time.monotonic() - t0, "ok"))


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except (httpx.HTTPError, StackError) as exc:
            value, last = None, exc
        if value:
            return value
        time.sleep(interval)
    raise StackError(f"timed out after {timeout:g} s waiting for {what} (last error: {last})")


class Api:
    def __init__(self, token: str) -> None:
        self.http = httpx.Client(base_url=URL, headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def get(self, path: str, **params: Any) -> Any:
        r = self.http.get(path, params=params or None)
        if r.status_code >= 400:
            raise StackError(f"GET {path}: {r.status_code} {r.text[:300]}")
        return r.json()

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


def logs(tail: int = 60) -> str:
    r = subprocess.run(
        [*COMPOSE, "logs", "--no-color", "--tail", str(tail)],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    return r.stdout[-12000:]


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


def submit(admin: str, doc: Path | dict[str, Any]) -> int:
    """``scalerl submit`` from outside the containers; the experiment id it printed."""
    path = doc if isinstance(doc, Path) else WORK / f"{doc['name']}.yaml"
    if isinstance(doc, dict):
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = sh(str(REPO / ".venv" / "bin" / "scalerl"), "submit", str(path), "--url", URL, "--token", admin, capture=True)
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


def worker_containers() -> list[str]:
    r = compose("ps", "-q", "worker-train", capture=True)
    return r.stdout.split()


# ---- the stages --------------------------------------------------------------------------------------------------


def build() -> None:
    with stage("base images (Debian stand-ins)"):
        missing = [
            i for i in ("python:3.11-slim", "postgres:15", "redis:7") if not quiet("docker", "image", "inspect", i)
        ]
        if missing:
            if not BASE_TOOL.is_file():
                raise StackError(f"base images {missing} missing and {BASE_TOOL} not found")
            sh("bash", str(BASE_TOOL))
    with stage("wheelhouse (make wheelhouse)"):
        sh("make", "-s", "wheelhouse")
    with stage("docker compose build (offline)"):
        compose("build")
        sh("docker", "image", "prune", "-f")  # earlier builds' untagged images; the layer cache of these stays
        sizes = sh("docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.Size}}", "scalerl", capture=True)
        log("images: " + "; ".join(sizes.stdout.split("\n")))


def start() -> tuple[str, str]:
    with stage("up: postgres redis migrations api; tokens; up -d"):
        compose("down", "-v", "--remove-orphans")
        compose("up", "-d", "postgres", "redis", "migrations", "api")
        healthy()
        tokens = {}
        for name, scope in (("workers", "write"), ("me", "admin")):
            r = compose("exec", "-T", "api", "scalerl", "token", "create", name, "--scope", scope, capture=True)
            tokens[name] = json.loads(r.stdout.strip().splitlines()[-1])["token"]
        ENV["SCALERL_TOKEN"] = tokens["workers"]
        compose("up", "-d")
        return tokens["workers"], tokens["me"]


def happy(api: Api, admin: str) -> int:
    with stage("happy path: submit, train, scalerl wait decided, dashboard"):
        exp_id = submit(admin, HERE / "grid.yaml")
        r = sh(
            str(REPO / ".venv" / "bin" / "scalerl"), "wait", str(exp_id), "--url", URL, "--token", admin,
            "--poll", "3", "--timeout", "900", capture=True, check=False,
        )  # fmt: skip
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


def down_up(api: Api, admin: str, grid_exp: int | None) -> None:
    with stage("fault: docker compose down + up, volumes kept (mid-run)"):
        before = snapshot(api, grid_exp) if grid_exp is not None else None
        run_id = single_run_id(api, submit(admin, one_run("down-up")))
        api.wait_steps(run_id, CHECKPOINT_EVERY + 2)  # past the template's first checkpoint
        assert_mid_run(api, run_id)
        compose("down")
        compose("up", "-d")
        healthy()
        run = api.wait_final(run_id)
        log(f"down-up run: {check_run_whole(api, run_id)}")
        assert run["status"] == "succeeded", run
        assert_resumed(run_id)
        if before is not None:
            after = snapshot(api, grid_exp)  # type: ignore[arg-type]
            assert after == before, "the finished grid changed across down/up"


def kill9(api: Api, admin: str) -> None:
    with stage("fault: kill -9 of the worker container, a second one resumes"):
        compose("up", "-d", "--scale", "worker-train=2")
        containers = wait_for(lambda: len(c := worker_containers()) == 2 and c, 60, "two worker containers")
        run_id = single_run_id(api, submit(admin, one_run("kill9")))
        api.wait_steps(run_id, CHECKPOINT_EVERY + 2)  # past the first checkpoint: the other container resumes from it
        owner = assert_mid_run(api, run_id)["lease_owner"] or ""
        host = owner.split("@", 1)[-1].split(":", 1)[0]
        victim = next((c for c in containers if c.startswith(host)), None)
        assert victim, (owner, containers)
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
        compose("up", "-d", "--scale", "worker-train=1")


def restart_mid_run(api: Api, admin: str, service: str) -> None:
    with stage(f"fault: {service} container restarted mid-run"):
        run_id = single_run_id(api, submit(admin, one_run(f"restart-{service}")))
        api.wait_steps(run_id, 4)
        assert_mid_run(api, run_id)
        compose("restart", service)
        healthy()
        run = api.wait_final(run_id)
        log(f"{service} restart run: {check_run_whole(api, run_id)}")
        assert run["status"] == "succeeded", run


def main() -> int:
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
            sh("bash", str(BASE_TOOL))
            if not docker_ready():
                raise StackError(f"Docker cannot run here, even after {BASE_TOOL}")
        COMPOSE[:] = compose_binary()
        build()
        _, admin = start()
        api = Api(admin)
        grid_exp = happy(api, admin) if "happy" in only else None
        if "down_up" in only:
            down_up(api, admin, grid_exp)
        if "kill9" in only:
            kill9(api, admin)
        for service in ("postgres", "redis"):
            if service in only:
                restart_mid_run(api, admin, service)
        ok = True
    except BaseException:
        if COMPOSE:
            print(logs(120), file=sys.stderr)
        raise
    finally:
        if COMPOSE and not os.environ.get("KEEP"):
            compose("down", "-v", "--remove-orphans", check=False)
        shutil.rmtree(WORK, ignore_errors=True)
        total = time.monotonic() - STARTED
        print("\ncompose-test stages:")
        for name, seconds, result in TIMINGS:
            print(f"  {seconds:7.1f} s  {result:6}  {name}")
        print(f"  {total:7.1f} s  {'ok' if ok else 'FAILED':6}  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
