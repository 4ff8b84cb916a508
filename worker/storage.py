"""Run storage: where a run's checkpoints live so that a worker on any host can resume it (``SCALERL_RUN_STORAGE``).

The storage is a URL that fsspec understands: a local or mounted (NFS) folder (``/mnt/scalerl``,
``file:///mnt/scalerl``), ``sftp://user@host:port/path`` (the ``sshfs`` package, asyncssh), ``s3://bucket/prefix``
(``s3fs``), ``gs://bucket/prefix`` (``gcsfs``), ``az://container/prefix`` (``adlfs``). The filesystem's own options
(a key file, ``known_hosts``, an endpoint, credentials) come from ``SCALERL_RUN_STORAGE_OPTIONS`` (JSON).

Layout under the storage root, per run::

    run-<id>/checkpoints/step_000040.<token>/       one upload of a checkpoint: its files (trainer.pt, engine.json,
                                                    rng.pt, a backend's folder), the run's config.yaml and its
                                                    metrics.jsonl (the points a resume must still deliver)
    run-<id>/checkpoints/step_000040.<token>.json   its manifest: step, every file's size and sha256; written last
    run-<id>/logs/attempt-<n>.engine.log            the engine's log of each attempt, at the attempt's end

Invariants:
- A checkpoint exists in storage exactly when its manifest does and every file the manifest lists has the size it
  gives. The files are written first, under a folder of their own (``<token>`` is unique per upload, so two
  uploaders never share a folder), and the manifest last (written as ``.part`` and renamed; one PUT on object
  stores). An upload interrupted at any point leaves files without a manifest: never read, deleted by a later prune.
- A download is checked against the manifest (size and sha256) before it is renamed into the run directory; a
  checkpoint that fails the check is skipped for the next older one.
- Nothing here is specific to the engine but the run directory contract (``rl_core.contracts.run_dir``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_core.contracts.points import parse_line
from rl_core.contracts.records import as_json
from rl_core.contracts.run_dir import CHECKPOINTS, CONFIG_FILE, LATEST, METRICS_FILE, SERVICE_RUN_DIR

log = logging.getLogger("scalerl.worker.storage")

MANIFEST_FORMAT = 1
_NAME = re.compile(r"^step_(\d{6,})\.([A-Za-z0-9-]+)$")
_CHUNK = 1 << 20

#: The packages that bring each protocol (what ``pip install 'scalerl[...]'`` adds).
EXTRAS = {
    "sftp": "storage",
    "ssh": "storage",
    "s3": "s3",
    "s3a": "s3",
    "gs": "gcs",
    "gcs": "gcs",
    "az": "azure",
    "abfs": "azure",
    "abfss": "azure",
}


class StorageError(RuntimeError):
    """The run storage could not be read or written (the message says what and why)."""


@dataclass(frozen=True)
class Manifest:
    """One complete checkpoint in storage (as its manifest says)."""

    step: int
    name: str
    """The upload's folder name, ``step_000040.<token>``."""
    files: dict[str, dict[str, Any]]
    """Relative path -> ``{"size": int, "sha256": str}``."""
    created: float
    origin: str

    def to_json(self) -> dict[str, Any]:
        return {"format": MANIFEST_FORMAT, **as_json(self)}

    @staticmethod
    def from_json(doc: Mapping[str, Any]) -> Manifest:
        if int(doc.get("format", 0)) != MANIFEST_FORMAT:
            raise ValueError(f"manifest format {doc.get('format')!r}")
        files = {str(k): {"size": int(v["size"]), "sha256": str(v["sha256"])} for k, v in dict(doc["files"]).items()}
        for rel in files:
            if rel.startswith("/") or ".." in Path(rel).parts:
                raise ValueError(f"manifest lists a path outside its folder: {rel!r}")
        return Manifest(int(doc["step"]), str(doc["name"]), files, float(doc["created"]), str(doc.get("origin", "")))


def check_url(url: str) -> None:
    """Raise ``ValueError`` when no installed fsspec implementation serves ``url`` (the message names the extra)."""
    try:
        import fsspec
    except ImportError:
        raise ValueError(f"run storage {url!r} needs fsspec: pip install 'scalerl[storage]'") from None
    protocol = url.split("://", 1)[0] if "://" in url else "file"
    try:
        fsspec.get_filesystem_class(protocol)
    except (ImportError, ValueError) as exc:
        extra = EXTRAS.get(protocol)
        hint = f": pip install 'scalerl[{extra}]'" if extra else ""
        raise ValueError(f"run storage {url!r}: {exc}{hint}") from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def local_files(root: Path) -> dict[str, Path]:
    """Every regular file under ``root`` by its relative POSIX path (symlinks are not followed)."""
    out: dict[str, Path] = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                out[path.relative_to(root).as_posix()] = path
    return dict(sorted(out.items()))


def _keep_steps_to(path: Path, step: int) -> None:
    """Keep the complete point lines of ``path`` up to ``step`` (what the engine keeps when it resumes from there)."""
    lines = path.read_bytes().split(b"\n")[:-1]  # the last element: an unterminated line, or b""
    kept = [line for line in lines if (p := parse_line(line)) is not None and p.step <= step]
    path.write_bytes(b"".join(line + b"\n" for line in kept))


class RunStorage:
    """The run storage at ``url`` (see module doc). Each call opens the filesystem when it is not open; any error
    of the filesystem closes it (the next call reconnects) and is raised as :class:`StorageError`."""

    def __init__(self, url: str, options: Mapping[str, Any] | None = None) -> None:
        check_url(url)
        self.url = url
        self.options = dict(options or {})
        # asyncssh logs each connection and each file it puts at INFO (about 10 lines per checkpoint); a level set
        # for it elsewhere is kept.
        if logging.getLogger("asyncssh").level == logging.NOTSET:
            logging.getLogger("asyncssh").setLevel(logging.WARNING)
        if url.startswith(("sftp://", "ssh://")) and "known_hosts" not in self.options:
            # sshfs passes known_hosts=None to asyncssh unless told otherwise: the server's key is then not checked.
            log.warning("run storage %s: no known_hosts in the options, the server's host key is not verified", url)
        self._fs: Any = None
        self._root = ""

    def __repr__(self) -> str:
        return f"RunStorage({self.url!r})"

    # ---- the filesystem ---------------------------------------------------------------------------------------

    def _open(self) -> tuple[Any, str]:
        if self._fs is None:
            from fsspec.core import url_to_fs

            # A fresh instance: fsspec's instance cache would hand back a connection that a server restart broke.
            fs, root = url_to_fs(self.url, skip_instance_cache=True, **self.options)
            self._fs, self._root = fs, str(root).rstrip("/")
        return self._fs, self._root

    def close(self) -> None:
        self._fs = None

    def _call(self, what: str, fn: Any) -> Any:
        try:
            fs, root = self._open()
            return fn(fs, root)
        except StorageError:
            raise
        except Exception as exc:  # every backend raises its own errors (OSError, asyncssh, botocore, ...)
            self.close()
            raise StorageError(f"{what} ({self.url}): {type(exc).__name__}: {exc}") from exc

    def run_path(self, root: str, run_id: int) -> str:
        return f"{root}/{SERVICE_RUN_DIR.format(id=int(run_id))}"

    # ---- checkpoints ------------------------------------------------------------------------------------------

    def upload_checkpoint(
        self, run_id: int, step: int, folder: Path, *, origin: str = "", fail_after: int | None = None
    ) -> Manifest:
        """Upload every file under ``folder`` as checkpoint ``step`` of run ``run_id``: the files under a new folder,
        then the manifest (module doc). ``fail_after`` (tests) raises after that many files, as an interrupted
        upload would end."""
        files = local_files(folder)
        if not files:
            raise StorageError(f"checkpoint {folder} holds no file")
        name = f"step_{int(step):06d}.{int(time.time())}-{uuid.uuid4().hex[:10]}"
        meta = {rel: {"size": path.stat().st_size, "sha256": sha256_of(path)} for rel, path in files.items()}
        manifest = Manifest(int(step), name, meta, time.time(), origin or socket.gethostname())

        def upload(fs: Any, root: str) -> Manifest:
            base = f"{self.run_path(root, run_id)}/{CHECKPOINTS}"
            target = f"{base}/{name}"
            made: set[str] = set()
            for n, (rel, path) in enumerate(files.items()):
                if fail_after is not None and n >= fail_after:
                    raise OSError(f"upload interrupted after {n} files (test)")
                parent = f"{target}/{rel}".rsplit("/", 1)[0]
                if parent not in made:
                    fs.makedirs(parent, exist_ok=True)
                    made.add(parent)
                fs.put_file(str(path), f"{target}/{rel}")
            body = json.dumps(manifest.to_json(), indent=1).encode()
            part = f"{base}/{name}.json.part"
            fs.pipe_file(part, body)
            fs.mv(part, f"{base}/{name}.json")
            return manifest

        return self._call(f"upload of checkpoint step {step} of run {run_id}", upload)  # type: ignore[no-any-return]

    def manifests(self, run_id: int) -> list[Manifest]:
        """The run's manifests, newest step first (ties: newest upload first); unreadable ones are left out."""

        def read(fs: Any, root: str) -> list[Manifest]:
            base = f"{self.run_path(root, run_id)}/{CHECKPOINTS}"
            if not fs.exists(base):
                return []
            found: list[Manifest] = []
            for entry in fs.ls(base, detail=False):
                leaf = str(entry).rstrip("/").rsplit("/", 1)[-1]
                if not leaf.endswith(".json") or not _NAME.match(leaf[: -len(".json")]):
                    continue
                try:
                    found.append(Manifest.from_json(json.loads(fs.cat_file(f"{base}/{leaf}"))))
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("run storage: manifest %s/%s unreadable (%s); ignored", base, leaf, exc)
            return sorted(found, key=lambda m: (m.step, m.created), reverse=True)

        return self._call(f"listing the checkpoints of run {run_id}", read)  # type: ignore[no-any-return]

    def newest_step(self, run_id: int) -> int | None:
        found = self.manifests(run_id)
        return found[0].step if found else None

    def fetch_checkpoint(self, run_id: int, run_dir: Path) -> Manifest | None:
        """Download the newest complete checkpoint of run ``run_id`` into ``run_dir`` (``checkpoints/step_N``, the
        ``latest`` pointer, ``config.yaml``); None when storage holds none. A checkpoint whose files are missing or
        differ from its manifest is skipped for the next older one; :class:`StorageError` when storage holds
        checkpoints and none could be fetched (starting from scratch would not be this run's curve)."""
        found = self.manifests(run_id)
        errors: list[str] = []
        for manifest in found:
            try:
                self._fetch(run_id, manifest, run_dir)
            except StorageError as exc:
                errors.append(str(exc))
                log.warning("run storage: checkpoint %s of run %s skipped: %s", manifest.name, run_id, exc)
                continue
            return manifest
        if found:
            raise StorageError(f"no checkpoint of run {run_id} could be fetched: {'; '.join(errors)[-1500:]}")
        return None

    def _fetch(self, run_id: int, manifest: Manifest, run_dir: Path) -> None:
        checkpoints = run_dir / CHECKPOINTS
        checkpoints.mkdir(parents=True, exist_ok=True)
        local_name = f"step_{manifest.step:06d}"
        tmp = checkpoints / f".fetch-{manifest.name}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()

        def download(fs: Any, root: str) -> None:
            source = f"{self.run_path(root, run_id)}/{CHECKPOINTS}/{manifest.name}"
            for rel, meta in manifest.files.items():
                dest = tmp / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                try:
                    fs.get_file(f"{source}/{rel}", str(dest))
                except FileNotFoundError:
                    raise StorageError(f"{manifest.name}: {rel} is missing") from None
                size = dest.stat().st_size
                if size != meta["size"] or sha256_of(dest) != meta["sha256"]:
                    raise StorageError(f"{manifest.name}: {rel} differs from its manifest ({size} bytes)")

        try:
            self._call(f"download of checkpoint {manifest.name} of run {run_id}", download)
            config = tmp / CONFIG_FILE
            if config.is_file():
                os.replace(config, run_dir / CONFIG_FILE)
            metrics = tmp / METRICS_FILE
            if metrics.is_file():
                _keep_steps_to(metrics, manifest.step)
                os.replace(metrics, run_dir / METRICS_FILE)
            final = checkpoints / local_name
            if final.exists():
                shutil.rmtree(final)
            tmp.rename(final)
            pointer = checkpoints / ".latest.tmp"
            pointer.write_text(local_name, encoding="utf-8")
            os.replace(pointer, checkpoints / LATEST)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def prune(self, run_id: int, keep: int) -> int:
        """Keep the newest ``keep`` checkpoints of the run: older manifests are deleted first, then their folders,
        then folders without a manifest older than the newest kept step (interrupted uploads); how many went."""
        keep = max(1, keep)

        def prune(fs: Any, root: str) -> int:
            base = f"{self.run_path(root, run_id)}/{CHECKPOINTS}"
            if not fs.exists(base):
                return 0
            manifests: dict[str, int] = {}  # upload name -> step
            others: list[tuple[int, str]] = []  # upload folders and .part manifests
            for entry in fs.ls(base, detail=False):
                leaf = str(entry).rstrip("/").rsplit("/", 1)[-1]
                stem = leaf.removesuffix(".json.part").removesuffix(".json")
                if not (m := _NAME.match(stem)):
                    continue
                if leaf.endswith(".json"):
                    manifests[stem] = int(m.group(1))
                else:
                    others.append((int(m.group(1)), leaf))
            if not manifests:
                return 0
            kept_steps = set(sorted(set(manifests.values()), reverse=True)[:keep])
            oldest_kept = min(kept_steps)
            dropped = {name for name, step in manifests.items() if step not in kept_steps}
            for name in sorted(dropped):
                fs.rm_file(f"{base}/{name}.json")
            removed = 0
            for step, leaf in others:
                # An interrupted upload (no manifest) older than every kept checkpoint can no longer be completed
                # into the newest one; a newer one may be another uploader's, still under way.
                if leaf in dropped or (leaf not in manifests and step < oldest_kept):
                    if leaf.endswith(".part"):
                        fs.rm_file(f"{base}/{leaf}")
                    else:
                        fs.rm(f"{base}/{leaf}", recursive=True)
                    removed += 1
            return removed

        return self._call(f"pruning the checkpoints of run {run_id}", prune)  # type: ignore[no-any-return]

    # ---- other files ------------------------------------------------------------------------------------------

    def upload_file(self, run_id: int, rel: str, path: Path) -> None:
        def put(fs: Any, root: str) -> None:
            target = f"{self.run_path(root, run_id)}/{rel}"
            fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
            fs.put_file(str(path), target)

        self._call(f"upload of {rel} of run {run_id}", put)

    def read_file(self, run_id: int, rel: str) -> bytes:
        return self._call(  # type: ignore[no-any-return]
            f"reading {rel} of run {run_id}", lambda fs, root: fs.cat_file(f"{self.run_path(root, run_id)}/{rel}")
        )
