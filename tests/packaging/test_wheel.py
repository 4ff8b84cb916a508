"""What a team installs: the wheel, built from this checkout and installed into a clean virtualenv.

One module-scoped wheel and one virtualenv (its dependencies pinned to this environment's versions, so "the same
numbers" means the same code, not a newer scipy). Every command runs from a temporary directory with no
``PYTHONPATH``, so the checkout is never on ``sys.path``; each check asserts the modules came from the virtualenv.

1. The wheel holds every non-``.py`` file git tracks inside a package (data files, templates, migrations' ini).
2. With no extras (numpy, scipy, ...): ``fit_curve`` and ``value_at`` on the bundled curve give the checkout's
   numbers to the last digit, the shipped prior and calibration are read from the wheel, and the forecasting
   commands (``scalerl fit``, ``scalerl backtest``, ``scalerl demo --offline``) answer as the checkout's do, with no
   ``httpx`` installed.
3. With the server extras: ``scalerl db upgrade`` and ``scalerl server`` run (``/healthz`` answers).
4. A shipped data file removed from the install: a clear error naming it at start, never other numbers.

Needs PyPI (or pip's cache) for the dependencies; about 1-2 minutes with a warm cache.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.process, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("scalerl", "rl_core", "server", "worker", "web")
EXAMPLE = REPO / "scalerl" / "examples" / "qwen2p5_0p5b_gsm8k_ppo.csv"

#: What the check script prints: where the modules came from, whether httpx is importable, and the numbers.
CHECK = r"""
import importlib.util, json, sys
from pathlib import Path
import numpy as np
import rl_core
from rl_core.scaling import fit_curve
from rl_core.scaling.fit.calibration import load_calibration
from rl_core.scaling.fit.prior import load_prior
from rl_core.scaling.fit.questions import value_at
from rl_core.scaling.fit import shipped

rows = [l.split(",") for l in Path(sys.argv[1]).read_text().splitlines()[1:]]
x = np.array([float(r[3]) for r in rows]); y = np.array([float(r[1]) for r in rows])
keep = x > 0
cut = int(keep.sum() * 0.4)
fit = fit_curve(x[keep][:cut], y[keep][:cut])
far = float(x[keep][-1])
v = value_at(fit, far)
p = fit.params
print(json.dumps({
    "rl_core": str(Path(rl_core.__file__).resolve()),
    "prior_file": str(shipped.PRIOR_FILE), "calibration_file": str(shipped.CALIBRATION_FILE),
    "httpx": importlib.util.find_spec("httpx") is not None,
    "status": str(fit.status),
    "params": None if p is None else [p.R0, p.A, p.B, p.C_mid],
    "intervals": {k: list(map(float, val)) for k, val in sorted(fit.intervals.items())},
    "value_at": [v.compute, v.mean, v.lo, v.hi],
    "prior": repr(load_prior()), "calibration": repr(load_calibration()),
}))
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SCALERL_", "VIRTUAL_ENV"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    return {**env, **extra}


def run(cmd: list[str], cwd: Path, timeout: float = 600, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=clean_env(**env), capture_output=True, text=True, timeout=timeout)


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"{r.args}\nstdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-4000:]}"
    return r.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    ok(run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)], out))
    (path,) = out.glob("scalerl-*.whl")
    return path


@pytest.fixture(scope="module")
def pins(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This environment's versions as pip constraints (the same numpy and scipy give the same digits).

    One pin per name: the first distribution on sys.path is the one Python imports. CI's venv once listed packaging
    twice (26.3 vendored beside 26.4), and two pins for one name are a ResolutionImpossible.
    """
    first: dict[str, str] = {}
    for d in metadata.distributions():
        name = d.metadata["Name"]
        if name and name.lower() != "scalerl" and "+" not in d.version:
            first.setdefault(name.lower(), f"{name}=={d.version}")
    lines = sorted(first.values())
    path = tmp_path_factory.mktemp("pins") / "pins.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path, pins: Path) -> Iterator[Path]:
    """A clean virtualenv holding the wheel with no extras."""
    root = tmp_path_factory.mktemp("venv")
    ok(run([sys.executable, "-m", "venv", str(root)], root))
    install = [str(root / "bin" / "python"), "-m", "pip", "install", "-c", str(pins), str(wheel)]
    # Without -q: when pip refuses, its message names the conflicting requirement.
    ok(run(install, root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_the_wheel_holds_every_tracked_data_file_of_its_packages(wheel: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", *PACKAGES], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    data = {p for p in tracked if not p.endswith(".py")}
    assert "rl_core/scaling/fit/shape_prior.json" in data and "rl_core/scaling/fit/forecast_calibration.json" in data
    names = set(zipfile.ZipFile(wheel).namelist())
    assert data - names == set(), "tracked files missing from the wheel: fix [tool.setuptools.package-data]"
    sources = {p for p in tracked if p.endswith(".py")}
    assert sources - names == set()


def test_no_extras_forecast_equals_the_checkout_to_the_digit(venv: Path, tmp_path: Path) -> None:
    script = tmp_path / "check.py"
    script.write_text(CHECK)
    installed = json.loads(ok(run([str(venv / "bin" / "python"), str(script), str(EXAMPLE)], tmp_path)))
    here = json.loads(ok(run([sys.executable, str(script), str(EXAMPLE)], tmp_path, PYTHONPATH=str(REPO))))
    assert Path(installed["rl_core"]).is_relative_to(venv), installed["rl_core"]  # not the checkout
    assert Path(installed["calibration_file"]).is_relative_to(venv)
    assert Path(installed["prior_file"]).is_file() and Path(installed["calibration_file"]).is_file()
    assert not installed["httpx"]  # the base install: numpy/scipy, no REST client
    assert installed["status"] == "ok", installed
    for key in ("status", "params", "intervals", "value_at", "prior", "calibration"):
        assert installed[key] == here[key], key


def test_no_extras_forecasting_commands_answer_as_the_checkout(venv: Path, tmp_path: Path) -> None:
    scalerl = str(venv / "bin" / "scalerl")
    curves = tmp_path / "curves"
    curves.mkdir()
    shutil.copy(EXAMPLE, curves / EXAMPLE.name)
    fit = ["fit", str(EXAMPLE), "--x", "cum_response_tokens_est", "--y", "val_score", "--predict-at", "4e7"]
    commands = [fit, ["demo", "--offline"]]
    checkout = [sys.executable, "-m", "scalerl.cli"]
    for args in commands:
        installed = ok(run([scalerl, *args], tmp_path))
        here = ok(run([*checkout, *args], tmp_path, PYTHONPATH=str(REPO)))  # same folder: same output paths
        assert installed == here, args
    assert "predicted" in ok(run([scalerl, *fit], tmp_path)).lower() or "4e+07" in ok(run([scalerl, *fit], tmp_path))
    columns = ["--x", "cum_response_tokens_est", "--y", "val_score"]
    backtest = ok(run([scalerl, "backtest", str(curves), *columns], tmp_path))
    assert backtest.strip()


def test_no_extras_service_commands_name_the_extra_to_install(venv: Path, tmp_path: Path) -> None:
    """Before the server extra is installed (the next test installs it into this module's venv): a command that
    needs an extra says which, in one line, instead of a traceback."""
    scalerl = str(venv / "bin" / "scalerl")
    for args, extra in ((["db", "upgrade"], "server"), (["runs", "--token", "t"], "client")):
        r = run([scalerl, *args], tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert f"pip install 'scalerl[{extra}]'" in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_extras_db_upgrade_and_server_start_from_the_wheel(
    venv: Path, wheel: Path, pins: Path, tmp_path: Path
) -> None:
    python = str(venv / "bin" / "python")
    ok(run([python, "-m", "pip", "install", "-q", "-c", str(pins), f"scalerl[server] @ {wheel.as_uri()}"], tmp_path))
    home = tmp_path / "home"
    db = f"sqlite:///{tmp_path / 'scalerl.db'}"
    env = {"SCALERL_HOME": str(home), "SCALERL_DATABASE_URL": db}
    scalerl = str(venv / "bin" / "scalerl")
    assert "database at revision" in ok(run([scalerl, "db", "upgrade"], tmp_path, **env))
    where = ok(
        run(
            [
                python,
                "-c",
                "from server.store import migrations; import server; print(migrations.__file__, server.__file__)",
            ],
            tmp_path,
        )
    )
    assert all(Path(p).is_relative_to(venv) for p in where.split()), where
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [scalerl, "server", "--port", str(port)], cwd=tmp_path, env=clean_env(**env), stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
                    assert r.status == 200
                    break
            except OSError:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


def test_a_missing_shipped_data_file_is_a_clear_error_at_start(venv: Path, tmp_path: Path) -> None:
    python = str(venv / "bin" / "python")
    show = "from rl_core.scaling.fit import shipped; print(shipped.CALIBRATION_FILE)"
    where = ok(run([python, "-c", show], tmp_path))
    path = Path(where.strip())
    saved = path.read_bytes()
    path.unlink()
    try:
        scalerl = str(venv / "bin" / "scalerl")
        r = run([scalerl, "fit", str(EXAMPLE), "--x", "cum_response_tokens_est", "--y", "val_score"], tmp_path)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "forecast_calibration.json" in r.stderr and "reinstall" in r.stderr and "Traceback" not in r.stderr
        has_server = run([python, "-c", "import fastapi"], tmp_path).returncode == 0  # the test above installed it
        env = {"SCALERL_HOME": str(tmp_path / "home"), "SCALERL_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"}
        if not has_server:
            return
        r = run([scalerl, "server", "--port", str(free_port())], tmp_path, timeout=120, **env)
        assert r.returncode == 2 and "forecast_calibration.json" in r.stderr, r.stdout + r.stderr
    finally:
        path.write_bytes(saved)
