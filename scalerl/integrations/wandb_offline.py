"""Read the history of a wandb offline run (``wandb/offline-run-*/run-*.wandb``) without wandb or a network.

The file is W&B's record log: a 7-byte header (``:W&B``, magic 0xBEE1, version 0), then LevelDB-style records in
32 KiB blocks (a 7-byte header each: CRC-32 of the type byte and the data, length, type full/first/middle/last),
each a protobuf ``wandb.internal.Record``. Only the fields read here are decoded, by their field numbers (stable by
protobuf's rules): ``Record.history`` (2) -> ``HistoryRecord.item`` (1: ``key`` 1, ``nested_key`` 2, ``value_json``
16, ``number`` 6, ``integer`` 5) and ``step`` (2: ``num`` 1); ``Record.run`` (17) -> ``run_id`` (1),
``display_name`` (8), ``notes`` (9), ``tags`` (10) and ``config`` (4, a ``ConfigRecord``); ``Record.config`` (5: the
config changed after ``wandb.init``) -> ``ConfigRecord.update`` (1) and ``remove`` (2), each a ``ConfigItem``
(``key`` 1, ``nested_key`` 2, ``value_json`` 16).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IDENT = b":W&B"
MAGIC = 0xBEE1
BLOCK = 32768
HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


class WandbFileError(ValueError):
    """A file that is not a readable wandb run log; the message says why."""


@dataclass
class WandbRun:
    """What was read: the run's name (display name, else id), its history rows ``{name: value}`` in order (with
    W&B's ``_step``), how many records were cut off or failed their checksum at the end, and the run's description:
    its config as ``wandb.config`` held it last (nested values nested, W&B's own ``_wandb`` key included), its
    tags and its notes."""

    name: str | None = None
    rows: list[dict[str, float]] = field(default_factory=list)
    damaged: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    notes: str = ""


def records(data: bytes) -> Iterator[bytes | None]:
    """The records of a run log, joined across blocks; ``None`` for a damaged one (then reading stops)."""
    if data[:4] != IDENT or len(data) < HEADER or struct.unpack("<H", data[4:6])[0] != MAGIC:
        raise WandbFileError("not a wandb run log (no ':W&B' header): expected wandb/offline-run-*/run-*.wandb")
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # the block's tail is padding
            pos += BLOCK - pos % BLOCK
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if crc == 0 and length == 0 and kind == 0:
            return  # zero padding: the end of what was written
        chunk = data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if len(chunk) < length or zlib.crc32(chunk, zlib.crc32(bytes([kind]))) & 0xFFFFFFFF != crc:
            yield None
            return
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk
            pending = b""
        else:
            yield None
            return


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise WandbFileError("a record is cut off inside a number")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of a protobuf message: an int (varint, fixed64 as raw bits) or bytes."""
    pos = 0
    while pos < len(buf):
        tag, pos = _varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, value
        elif wire == 1:
            yield number, struct.unpack("<Q", buf[pos : pos + 8])[0]
            pos += 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            yield number, buf[pos : pos + length]
            pos += length
        elif wire == 5:
            yield number, struct.unpack("<I", buf[pos : pos + 4])[0]
            pos += 4
        else:
            raise WandbFileError(f"unexpected protobuf wire type {wire}")


def _item_fields(buf: bytes) -> tuple[str, list[str], list[tuple[int, int | bytes]]]:
    """An item's ``key`` (field 1), its ``nested_key`` parts (field 2) and its other fields in order (its value):
    the shape a history item and a config item share."""
    key, nested, rest = "", [], []
    for number, v in fields(buf):
        if number == 1 and isinstance(v, bytes):
            key = v.decode("utf-8", "replace")
        elif number == 2 and isinstance(v, bytes):
            nested.append(v.decode("utf-8", "replace"))
        else:
            rest.append((number, v))
    return key, nested, rest


def _item(buf: bytes) -> tuple[str, float | None]:
    key, nested, rest = _item_fields(buf)
    value = None
    for number, v in rest:
        if number == 16 and isinstance(v, bytes):
            try:
                parsed = json.loads(v)
            except ValueError:
                parsed = None
            value = float(parsed) if isinstance(parsed, int | float) and not isinstance(parsed, bool) else None
        elif number == 6 and isinstance(v, int):
            value = struct.unpack("<d", struct.pack("<Q", v))[0]
        elif number == 5 and isinstance(v, int):
            value = float(v - (1 << 64) if v >= 1 << 63 else v)
    return key or ".".join(nested), value


def _history(buf: bytes) -> dict[str, float]:
    row: dict[str, float] = {}
    for number, v in fields(buf):
        if number == 1 and isinstance(v, bytes):
            name, value = _item(v)
            if name and value is not None:
                row[name] = value
        elif number == 2 and isinstance(v, bytes):
            step = dict(fields(v)).get(1, 0)
            if isinstance(step, int):
                row.setdefault("_step", float(step))
    return row


def _config_record(config: dict[str, Any], buf: bytes) -> None:
    """Apply a ``ConfigRecord`` to ``config``: its updates (field 1), then its removals (field 2)."""
    for number, v in fields(buf):
        if number not in (1, 2) or not isinstance(v, bytes):
            continue
        path, value = _config_item(v)
        if not path:
            continue
        parent = config
        for part in path[:-1]:
            child = parent.get(part)
            if not isinstance(child, dict):
                if number == 2:
                    break
                child = parent[part] = {}
            parent = child
        else:
            if number == 1:
                parent[path[-1]] = value
            else:
                parent.pop(path[-1], None)


def _config_item(buf: bytes) -> tuple[list[str], Any]:
    """``(key path, value)`` of a ``ConfigItem``: ``nested_key`` when given, else ``key``; the value as JSON (older
    wandb versions wrap it as ``{"desc": ..., "value": ...}``: unwrapped)."""
    key, nested, rest = _item_fields(buf)
    value: Any = None
    for number, v in rest:
        if number == 16 and isinstance(v, bytes):
            try:
                value = json.loads(v)
            except ValueError:
                value = v.decode("utf-8", "replace")
    if isinstance(value, dict) and "value" in value and set(value) <= {"desc", "value"}:
        value = value["value"]
    return (nested or ([key] if key else [])), value


def read_run(path: Path) -> WandbRun:
    """The history of one ``run-*.wandb`` file."""
    run = WandbRun()
    for rec in records(path.read_bytes()):
        if rec is None:
            run.damaged += 1
            break
        for number, v in fields(rec):
            if number == 2 and isinstance(v, bytes):
                run.rows.append(_history(v))
            elif number == 17 and isinstance(v, bytes):
                _run_record(run, v)
            elif number == 5 and isinstance(v, bytes):
                _config_record(run.config, v)
    return run


def _run_record(run: WandbRun, buf: bytes) -> None:
    info: dict[int, bytes] = {}
    tags: list[str] = []
    for n, x in fields(buf):
        if not isinstance(x, bytes):
            continue
        if n in (1, 8, 9):
            info[n] = x
        elif n == 10:
            tags.append(x.decode("utf-8", "replace"))
        elif n == 4:
            _config_record(run.config, x)
    name = info.get(8) or info.get(1)
    run.name = name.decode("utf-8", "replace") if name else run.name
    if 9 in info:
        run.notes = info[9].decode("utf-8", "replace")
    if tags:
        run.tags = tags


def run_files(path: Path) -> list[Path]:
    """The run logs under ``path``: a ``.wandb`` file itself, a run directory (``offline-run-*``), or a ``wandb``
    directory holding run directories."""
    if path.is_file():
        return [path]
    found = sorted(path.glob("run-*.wandb")) or sorted(path.glob("*/run-*.wandb"))
    real: dict[Path, Path] = {}
    for f in sorted(found, key=lambda f: f.parent.is_symlink()):  # wandb/latest-run links to a run directory
        real.setdefault(f.resolve(), f)
    return sorted(real.values())


def is_wandb_source(path: Path) -> bool:
    """A ``.wandb`` file, an ``offline-run-*``/``run-*`` directory holding one, or a ``wandb`` directory of them."""
    if path.suffix == ".wandb":
        return True
    return path.is_dir() and bool(run_files(path))
