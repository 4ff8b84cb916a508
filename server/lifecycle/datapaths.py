"""Filesystem paths in runs (a model directory, a task file) are allowed only under configured roots.

A grid's ``task``/``model`` may name local files that a worker opens. Without a limit any client with the write
scope could make a worker open ``/etc/passwd`` or ``../../..``, and the failure text (readable with a read-only
token) would tell whether it exists. ``allowed_data_roots`` (server and worker setting, ``SCALERL_ALLOWED_DATA_ROOTS``
as a JSON list) lists the folders such paths must lie under; by default none, so no path is accepted. The server
checks at submit, the worker again before it opens anything; neither says whether a refused path exists.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from rl_core.contracts.data_roots import names_path, outside_roots
from server.base.safeinput import UnsafeInput, clip
from server.base.yamlsafe import load_yaml

_PATH_KEYS = ("path", "file", "dir", "data_path")


def _candidates(value: str | None, *, model: bool) -> tuple[list[str], list[str]]:
    """The strings of a run's task/model that the worker would open as paths (the worker's own reading), and what
    makes the value unusable: a ``{...}`` spec that is not one YAML mapping, or whose path keys are not strings
    (the worker refuses such runs; the edge refuses them first)."""
    if not value:
        return [], []
    text = value.strip()
    if text.startswith("{"):
        try:
            data = load_yaml(text)
        except (UnsafeInput, yaml.YAMLError, ValueError) as exc:
            return [], [f"is not a valid YAML mapping: {clip(str(exc), 200)}"]
        if not isinstance(data, dict):
            return [], ["must be a YAML mapping such as {path: /data/model}"]
        out: list[str] = []
        bad: list[str] = []
        for key in _PATH_KEYS:
            if key in data and not isinstance(data[key], str):
                bad.append(f"{key} must be a string path, not {type(data[key]).__name__} {clip(data[key], 60)}")
            elif key in data:
                out.append(data[key])
        return out, bad
    if model and names_path(text):  # the worker's rule too (rl_core.contracts.data_roots)
        return [text], []
    return [], []


def path_problems(task: str | None, model: str | None, roots: Sequence[str]) -> list[str]:
    """One line per task/model path outside ``roots`` (never whether it exists), and per unusable spec."""
    problems: list[str] = []
    for key, value in (("task", task), ("model", model)):
        paths, bad = _candidates(value, model=key == "model")
        problems += [f"{key}: {why}" for why in bad]
        for path in paths:
            if outside_roots(path, roots):
                where = f"the allowed roots {list(roots)}" if roots else "an allowed root (none is configured)"
                problems.append(
                    f"{key}: the path {clip(path, 100)!r} is not under {where}; "
                    "set allowed_data_roots (SCALERL_ALLOWED_DATA_ROOTS) to allow local files"
                )
    return problems
