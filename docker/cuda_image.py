#!/usr/bin/env python3
"""The `cuda` image's Python layer: its lock, its offline wheels and the checks that it is what it says.

    python docker/cuda_image.py lock          # constraints/cuda.txt (make constraints-cuda)
    python docker/cuda_image.py wheelhouse    # docker/wheels-cuda (make wheelhouse-cuda; several GB)
    python docker/cuda_image.py check [--pypi]  # what tests/packaging/test_cuda_image.py asserts

The Dockerfile's CUDA_BASE is the one source of truth: its Ubuntu release says which Python the image runs (apt's
python3) and which glibc its wheels may need, its CUDA version which torch build fits (DeepSpeed compiles its ops with
the base's nvcc and refuses one whose CUDA major.minor differs from torch's). The lock, constraints/cuda.txt, pins
every package of `.[train,server,worker,deepspeed,storage]` plus pip, setuptools and wheel, resolved on PyPI's
metadata for that Python and platform (no wheel is downloaded), at the versions .venv runs where it has the package:
torch is PyPI's Linux build of .venv's version (a CUDA build, with NVIDIA's runtime wheels), never the CPU build.

Every pip run here ignores the machine's pip configuration (PIP_CONFIG_FILE=/dev/null, no PIP_* index variables) and
asks PyPI (CUDA_INDEX_URL to use a mirror): a local CPU wheel or a CPU index must never decide what the image holds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.tags import Tag
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pip's own copy of tomli
    from pip._vendor import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
LOCK = ROOT / "constraints" / "cuda.txt"
WHEELHOUSE = ROOT / "docker" / "wheels-cuda"
PYPROJECT = ROOT / "pyproject.toml"
INDEX_URL = os.environ.get("CUDA_INDEX_URL", "https://pypi.org/simple")

CUDA_STAGES = ("cuda-base", "deps-cuda", "cuda")
EXTRAS = ("train", "server", "worker", "deepspeed", "storage")
BUILD_TOOLS = ("pip", "setuptools>=68", "wheel")
# PyPI has DeepSpeed as an sdist only: its wheel (pure Python; the ops are compiled at run time) is built here.
SDIST_ONLY = ("deepspeed",)
# apt's python3 and glibc of each Ubuntu release an nvidia/cuda image is built on.
UBUNTU = {"22.04": ("3.10", 35), "24.04": ("3.12", 39)}
# The packages that carry the CUDA runtime torch links against: their version's major.minor is torch's CUDA.
CUDA_RUNTIME = ("nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12")
CPU_INDEX = re.compile(r"download\.pytorch\.org|/whl/cpu\b")
BASE_RE = re.compile(
    r"^nvidia/cuda:(?P<cuda>\d+\.\d+)\.\d+-(?:cudnn\d*-)?(?P<flavor>base|runtime|devel)-ubuntu(?P<ubuntu>\d+\.\d+)$"
)


# ---- the Dockerfile -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Instruction:
    stage: str  # "" before the first FROM
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with their continuation lines joined and comment lines dropped (as Docker reads them)."""
    out: list[Instruction] = []
    stage, buf = "", ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        line, buf = buf + line, ""
        keyword, _, args = line.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            m = re.search(r"\s+AS\s+(\S+)\s*$", args, re.IGNORECASE)
            stage = m.group(1) if m else args.strip()
        out.append(Instruction(stage, keyword, args.strip()))
    return out


def arg_default(instructions: Iterable[Instruction], name: str, stage: str = "") -> str | None:
    for ins in instructions:
        if ins.stage == stage and ins.keyword == "ARG":
            key, eq, value = ins.args.partition("=")
            if key.strip() == name:
                return value.strip().strip('"') if eq else ""
    return None


@dataclass(frozen=True)
class Base:
    image: str
    cuda: str  # major.minor
    flavor: str  # base, runtime or devel
    ubuntu: str
    python: str
    glibc_minor: int


def cuda_base(instructions: list[Instruction]) -> Base:
    image = arg_default(instructions, "CUDA_BASE")
    if image is None:
        raise ValueError("the Dockerfile declares no ARG CUDA_BASE before its first FROM")
    m = BASE_RE.match(image)
    if not m:
        raise ValueError(f"CUDA_BASE={image!r} is not an nvidia/cuda:X.Y.Z-[cudnn-]FLAVOR-ubuntuR.R image")
    if m["ubuntu"] not in UBUNTU:
        raise ValueError(f"CUDA_BASE={image!r}: Ubuntu {m['ubuntu']}'s Python is not in docker/cuda_image.py's UBUNTU")
    python, glibc = UBUNTU[m["ubuntu"]]
    return Base(image, m["cuda"], m["flavor"], m["ubuntu"], python, glibc)


def check_dockerfile(text: str) -> list[str]:
    """The cuda stages: a devel base, their own pip arguments (never the CPU images' PIP_EXTRA and its CPU index),
    every pip install under the lock, and the Python the wheels are for."""
    problems: list[str] = []
    ins = parse_dockerfile(text)
    try:
        base = cuda_base(ins)
    except ValueError as e:
        return [str(e)]
    if base.flavor != "devel":
        problems.append(f"CUDA_BASE={base.image}: a -{base.flavor} image has no nvcc, and DeepSpeed compiles its ops")
    stages = [i for i in ins if i.keyword == "FROM"]
    names = [i.stage for i in stages]
    missing = [f"no stage {s}" for s in CUDA_STAGES if s not in names]
    if missing:
        return problems + missing
    if names[-len(CUDA_STAGES) :] != list(CUDA_STAGES):
        problems.append(
            f"the cuda stages must be the Dockerfile's last ({names}): the legacy builder builds every earlier one"
        )
    if not next(i for i in stages if i.stage == "cuda-base").args.startswith("${CUDA_BASE}"):
        problems.append("cuda-base is not FROM ${CUDA_BASE}")
    cuda_ins = [i for i in ins if i.stage in CUDA_STAGES]
    for i in cuda_ins:
        if CPU_INDEX.search(i.args):
            problems.append(f"{i.stage}: {i.keyword} names PyTorch's CPU index: {i.args[:120]}")
        if re.search(r"(?<![A-Z_])PIP_EXTRA\b", i.args):
            problems.append(f"{i.stage}: {i.keyword} uses PIP_EXTRA, the CPU images' pip arguments: {i.args[:120]}")
    extra = arg_default(ins, "CUDA_PIP_EXTRA", "deps-cuda")
    if extra is None:
        problems.append("deps-cuda declares no ARG CUDA_PIP_EXTRA")
    elif CPU_INDEX.search(extra):
        problems.append(f"CUDA_PIP_EXTRA's default names PyTorch's CPU index: {extra}")
    python = arg_default(ins, "CUDA_PYTHON", "deps-cuda")
    if python != base.python:
        problems.append(
            f"deps-cuda's CUDA_PYTHON={python}, but {base.image} (Ubuntu {base.ubuntu}) has Python {base.python}"
        )
    deps = [i for i in ins if i.stage == "deps-cuda"]
    if not any(i.keyword == "COPY" and "constraints/cuda.txt" in i.args for i in deps):
        problems.append("deps-cuda does not copy constraints/cuda.txt")
    if not any(i.keyword == "COPY" and re.match(r"docker/wheels-cuda\s+/wheels$", i.args) for i in deps):
        problems.append("deps-cuda does not copy docker/wheels-cuda to /wheels")
    installs = [
        cmd.strip()
        for i in deps
        if i.keyword == "RUN"
        for cmd in re.split(r"&&|\|\||;", i.args)
        if re.search(r"\bpip\s+install\b", cmd)
    ]
    if not installs:
        problems.append("deps-cuda has no pip install")
    extras = [m[1] for cmd in installs for m in [re.search(r"/src\[([^\]]*)\]", cmd)] if m]
    if [sorted(e.replace(" ", "").split(",")) for e in extras] != [sorted(EXTRAS)]:
        problems.append(f"deps-cuda installs scalerl's extras {extras}; the lock is for [{','.join(EXTRAS)}]")
    for cmd in installs:
        if "-c /src/constraints/cuda.txt" not in cmd:
            problems.append(f"deps-cuda: a pip install without -c /src/constraints/cuda.txt: {cmd}")
        if "$CUDA_PIP_EXTRA" not in cmd and "${CUDA_PIP_EXTRA}" not in cmd:
            problems.append(f"deps-cuda: a pip install without $CUDA_PIP_EXTRA (it would need an index offline): {cmd}")
    return problems


# ---- the lock -------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Lock:
    python: str
    platform: str
    pins: dict[str, Version]  # canonical name -> version


def read_lock(path: Path = LOCK) -> Lock:
    python = platform = ""
    pins: dict[str, Version] = {}
    for line in path.read_text().splitlines():
        head = re.match(r"#\s*(python|platform):\s*(\S+)", line)
        if head:
            if head[1] == "python":
                python = head[2]
            else:
                platform = head[2]
            continue
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if not m:
            raise ValueError(f"{path.name}: not a name==version pin: {line!r}")
        pins[canonicalize_name(m[1])] = Version(m[2])
    return Lock(python, platform, pins)


def target_environment(python: str) -> dict[str, str]:
    """Marker values of the image: CPython `python` on Linux x86_64."""
    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    env.update(
        python_version=python,
        python_full_version=python + ".0",
        implementation_name="cpython",
        platform_python_implementation="CPython",
        sys_platform="linux",
        platform_system="Linux",
        platform_machine="x86_64",
        os_name="posix",
    )
    return env


def roots(pyproject: Path = PYPROJECT) -> list[Requirement]:
    """What deps-cuda installs: scalerl's dependencies with the EXTRAS (their own references to scalerl expanded),
    plus pip's build tools."""
    project = tomllib.loads(pyproject.read_text())["project"]
    name = canonicalize_name(project["name"])
    optional = project.get("optional-dependencies", {})
    reqs: list[Requirement] = [Requirement(r) for r in BUILD_TOOLS]
    seen: set[str] = set()

    def add(specs: list[str]) -> None:
        for spec in specs:
            req = Requirement(spec)
            if canonicalize_name(req.name) == name:
                for extra in sorted(req.extras - seen):
                    seen.add(extra)
                    add(optional[extra])
            else:
                reqs.append(req)

    add(project.get("dependencies", []))
    for extra in EXTRAS:
        if extra not in seen:
            seen.add(extra)
            add(optional[extra])
    return reqs


def check_lock(lock: Lock, base: Base, pyproject: Path = PYPROJECT) -> list[str]:
    """Every root pinned within pyproject's range, no local version (+cpu), torch's CUDA is the base's."""
    problems: list[str] = []
    if lock.python != base.python:
        problems.append(f"{LOCK.name} is for Python {lock.python or '?'}, {base.image} has {base.python}")
    if lock.platform != platform_tag(base):
        problems.append(f"{LOCK.name} is for {lock.platform or '?'}, {base.image} is {platform_tag(base)}")
    for name, version in lock.pins.items():
        if version.local:
            problems.append(f"{name}=={version}: a local version (a build from another index, e.g. +cpu)")
    env = target_environment(base.python)
    for req in roots(pyproject):
        if req.marker and not req.marker.evaluate(env):
            continue
        pinned = lock.pins.get(canonicalize_name(req.name))
        if pinned is None:
            problems.append(f"{req} (pyproject) is not pinned in {LOCK.name}")
        elif not req.specifier.contains(pinned, prereleases=True):
            problems.append(f"{req.name}=={pinned} ({LOCK.name}) is outside pyproject's {req}")
    if "torch" not in lock.pins:
        problems.append(f"torch is not pinned in {LOCK.name}")
    runtime = [(n, lock.pins[n]) for n in CUDA_RUNTIME if n in lock.pins]
    if not runtime:
        problems.append(f"{LOCK.name} pins no CUDA runtime ({', '.join(CUDA_RUNTIME)}): torch would be a CPU build")
    for name, version in runtime:
        if f"{version.major}.{version.minor}" != base.cuda:
            problems.append(f"{name}=={version}: torch's CUDA {version.major}.{version.minor}, the base's {base.cuda}")
    return problems


def platform_tag(base: Base) -> str:
    return f"manylinux_2_{base.glibc_minor}_x86_64"


def platforms(base: Base) -> list[str]:
    """pip's --platform values for the base: every manylinux tag its glibc runs (pip does not expand one itself)."""
    tags = [f"manylinux_2_{m}_x86_64" for m in range(base.glibc_minor, 4, -1)]
    return [*tags, "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]


def supported_tags(base: Base) -> set[Tag]:
    py = "cp" + base.python.replace(".", "")
    plats = [*platforms(base), "any"]
    out = {Tag(py, py, p) for p in plats}
    for minor in range(2, int(base.python.split(".")[1]) + 1):
        out |= {Tag(f"cp3{minor}", "abi3", p) for p in plats}
    for interp in (py, "py3", "py" + base.python.replace(".", "")):
        out |= {Tag(interp, "none", p) for p in plats}
    return out


def check_wheelhouse(directory: Path, lock: Lock, base: Base) -> list[str]:
    """Exactly one wheel per pin, of the pinned version, installable on the base's Python and glibc."""
    problems: list[str] = []
    wheels = sorted(directory.glob("*.whl"))
    tags = supported_tags(base)
    found: dict[str, list[Version]] = {}
    for wheel in wheels:
        name, version, _, wheel_tags = parse_wheel_filename(wheel.name)
        found.setdefault(name, []).append(version)
        if not wheel_tags & tags:
            problems.append(f"{wheel.name} does not install on Python {base.python} ({platform_tag(base)})")
        if version.local:
            problems.append(f"{wheel.name}: a local version (+cpu or another index's build)")
        if name not in lock.pins:
            problems.append(f"{wheel.name} is not in {LOCK.name} (stale: run make wheelhouse-cuda)")
        elif version != lock.pins[name]:
            problems.append(f"{wheel.name}: {LOCK.name} pins {name}=={lock.pins[name]}")
    for pinned, version in lock.pins.items():
        if pinned not in found:
            problems.append(f"{pinned}=={version} has no wheel in {directory}")
        elif len(found[pinned]) > 1:
            problems.append(f"{pinned} has {len(found[pinned])} wheels in {directory}")
    return problems


# ---- pip, isolated from the machine's configuration ------------------------------------------------------------------
KEEP_PIP_ENV = {"PIP_CERT", "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_CACHE_DIR", "PIP_PROXY"}


def pip_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k in KEEP_PIP_ENV}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def pip(*args: str, quiet: bool = True) -> None:
    cmd = [sys.executable, "-m", "pip", *args, *(["-q"] if quiet else [])]
    subprocess.run(cmd, check=True, env=pip_env())


def target_args(base: Base) -> list[str]:
    out = ["--python-version", base.python, "--implementation", "cp", "--only-binary=:all:", "--index-url", INDEX_URL]
    for p in platforms(base):
        out += ["--platform", p]
    return out


def build_sdist_wheels(pins: dict[str, Version], into: Path) -> None:
    """DeepSpeed's wheel from its sdist (pure Python: its ops are compiled at run time, not at build)."""
    for name in SDIST_ONLY:
        if name in pins and not list(into.glob(f"{name}-{pins[name]}-*.whl")):
            pip("wheel", "--no-deps", "--index-url", INDEX_URL, "-w", str(into), f"{name}=={pins[name]}")


def resolve(base: Base, constraints: list[Path], find_links: Path) -> dict[str, dict[str, Any]]:
    """pip's resolution of roots() for the base, on PyPI's metadata (PEP 658: no wheel is downloaded)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        args = ["install", "--dry-run", "--ignore-installed", "--target", str(Path(tmp) / "t"), "--report", str(report)]
        args += [*target_args(base), "--find-links", str(find_links)]
        for c in constraints:
            args += ["-c", str(c)]
        pip(*args, *[str(r) for r in roots()])
        items: list[dict[str, Any]] = json.loads(report.read_text())["install"]
    return {canonicalize_name(i["metadata"]["name"]): i for i in items}


def venv_pins() -> dict[str, Version]:
    """.venv's versions (this interpreter's), the tested ones; torch's local label (+cpu) dropped."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"],
        check=True,
        capture_output=True,
        text=True,
        env=pip_env(),
    ).stdout
    pins: dict[str, Version] = {}
    for line in out.splitlines():
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line.strip())
        if m and canonicalize_name(m[1]) != "scalerl":
            pins[canonicalize_name(m[1])] = Version(Version(m[2]).public)
    return pins


def write_lock(base: Base) -> Lock:
    pins = venv_pins()
    with tempfile.TemporaryDirectory() as tmp:
        venv_constraints = Path(tmp) / "venv.txt"
        venv_constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())))
        build_sdist_wheels(pins, Path(tmp))
        items = resolve(base, [venv_constraints], Path(tmp))
    resolved = {n: Version(i["metadata"]["version"]) for n, i in items.items()}
    other = sorted(n for n in resolved if n in pins and pins[n] != resolved[n])
    new = sorted(n for n in resolved if n not in pins)
    lines = [
        "# The cuda image's Python layer (Dockerfile, deps-cuda): every package pinned, for the CUDA_BASE's Python",
        "# and glibc. Written by `make constraints-cuda` (docker/cuda_image.py lock) from .venv's versions, resolved",
        "# on PyPI's metadata; torch is PyPI's Linux build (CUDA, its runtime from NVIDIA's wheels), never the +cpu",
        "# one. Not by hand.",
        f"# base: {base.image}",
        f"# python: {base.python}",
        f"# platform: {platform_tag(base)}",
        f"# not in .venv (CUDA builds' dependencies): {', '.join(new) or 'none'}",
        f"# another version than .venv's: {', '.join(other) or 'none'}",
    ]
    lines += [f"{n}=={v}" for n, v in sorted(resolved.items())]
    LOCK.write_text("\n".join(lines) + "\n")
    return read_lock()


def fetch_wheelhouse(base: Base, lock: Lock, directory: Path = WHEELHOUSE) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    binary = {n: v for n, v in lock.pins.items() if n not in SDIST_ONLY}
    with tempfile.TemporaryDirectory() as tmp:
        req = Path(tmp) / "pins.txt"
        req.write_text("".join(f"{n}=={v}\n" for n, v in sorted(binary.items())))
        pip("download", "--no-deps", "-d", str(directory), *target_args(base), "-r", str(req), quiet=False)
    build_sdist_wheels(lock.pins, directory)
    for wheel in directory.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(wheel.name)
        if lock.pins.get(name) != version:
            print(f"removed {wheel.name} (not in {LOCK.name})")
            wheel.unlink()


# ---- the check against PyPI -----------------------------------------------------------------------------------------
def check_pypi(lock: Lock, base: Base) -> list[str]:
    """pip resolves deps-cuda's install from PyPI's metadata under the lock, for the base's Python and platform:
    the result is the lock exactly (every pin used, nothing unpinned), and torch is a CUDA build of the base's CUDA."""
    problems: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        lock_file = Path(tmp) / "lock.txt"
        lock_file.write_text("".join(f"{n}=={v}\n" for n, v in lock.pins.items()))
        build_sdist_wheels(lock.pins, Path(tmp))
        try:
            resolved = resolve(base, [lock_file], Path(tmp))
        except subprocess.CalledProcessError as e:
            return [f"pip could not resolve deps-cuda's install under {LOCK.name} for Python {base.python}: {e}"]

    for name in sorted(set(lock.pins) - set(resolved)):
        problems.append(f"{name}=={lock.pins[name]} is pinned but not installed (remove it: make constraints-cuda)")
    for name in sorted(set(resolved) - set(lock.pins)):
        problems.append(f"{name} is installed but not pinned in {LOCK.name} (make constraints-cuda)")
    torch = resolved.get("torch")
    if torch is None:
        return [*problems, "torch is not installed"]
    meta: dict[str, Any] = torch["metadata"]
    version = Version(str(meta["version"]))
    url = str(torch["download_info"]["url"])
    if version.local:
        problems.append(f"torch {version}: a local build (+cpu?), from {url}")
    if "download.pytorch.org" in url:
        problems.append(f"torch comes from PyTorch's own index: {url}")
    env = target_environment(base.python)
    requires = [Requirement(r) for r in meta.get("requires_dist", [])]
    linux = [r for r in requires if not r.marker or r.marker.evaluate({**env, "extra": ""})]
    names = [canonicalize_name(r.name) for r in linux]
    cuda = [n for n in names if n == "cuda-toolkit" or n.startswith("nvidia-")]
    if not cuda:
        problems.append(f"torch {version} for Python {base.python} on Linux requires no NVIDIA package: a CPU build")
    runtime = [(n, resolved[n]) for n in CUDA_RUNTIME if n in resolved]
    if not runtime:
        problems.append(f"no CUDA runtime is installed ({', '.join(CUDA_RUNTIME)})")
    for name, item in runtime:
        v = Version(item["metadata"]["version"])
        if f"{v.major}.{v.minor}" != base.cuda:
            problems.append(
                f"torch brings {name} {v} (CUDA {v.major}.{v.minor}); CUDA_BASE {base.image} has {base.cuda}"
            )
    return problems


def static_problems() -> list[str]:
    text = DOCKERFILE.read_text()
    problems = check_dockerfile(text)
    base = cuda_base(parse_dockerfile(text))
    lock = read_lock()
    problems += check_lock(lock, base)
    if any(WHEELHOUSE.glob("*.whl")):
        problems += check_wheelhouse(WHEELHOUSE, lock, base)
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("lock", help="rewrite constraints/cuda.txt from .venv's versions (PyPI metadata only)")
    sub.add_parser("wheelhouse", help="download every pinned wheel into docker/wheels-cuda")
    check = sub.add_parser("check", help="the Dockerfile's cuda stages, the lock and (if filled) the wheelhouse")
    check.add_argument("--pypi", action="store_true", help="also resolve the install on PyPI's metadata")
    args = parser.parse_args()
    base = cuda_base(parse_dockerfile(DOCKERFILE.read_text()))
    if args.cmd == "lock":
        lock = write_lock(base)
        print(f"{LOCK.relative_to(ROOT)}: {len(lock.pins)} pins, torch=={lock.pins['torch']}, Python {base.python}")
        return 0
    if args.cmd == "wheelhouse":
        lock = read_lock()
        fetch_wheelhouse(base, lock)
        problems = check_wheelhouse(WHEELHOUSE, lock, base)
        print(
            "\n".join(problems) or f"{WHEELHOUSE.relative_to(ROOT)}: {len(lock.pins)} wheels for Python {base.python}"
        )
        return 1 if problems else 0
    problems = static_problems()
    if args.pypi:
        problems += check_pypi(read_lock(), base)
    print("\n".join(problems) or "cuda image: OK")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
