"""From a run stored by the service to the engine's run config, and the run directory's resume decision.

This is the one place that knows the engine's config contract (``rl_core.contracts.run_config.RunConfig``):
- ``recipe`` is the run's full recipe; ``seed`` its seed; ``name`` ``run-<id>``.
- ``task`` and ``model`` are the experiment's strings: a YAML mapping (``{kind: synthetic-addition,
  digits_max: 2}``), or a bare task kind / model preset, or for models a local directory.
- ``budget.max_device_hours`` is the run's budget (the engine measures training device-hours, i.e. the
  ``gpu_hours`` compute unit); ``budget.steps`` caps it (``engine_steps`` or the template's).
- Everything else (device, eval, checkpoint, trainer, generator, base checkpoint) comes from the worker's
  ``engine_template`` YAML, the device from ``engine_device``. Metrics go to the run directory's JSONL, which the
  worker streams to the service (it holds the lease).

Invariant of :func:`prepare_run_dir`: the resume rule of ``rl_core.contracts.run_dir`` (a run directory with a
checkpoint is resumed only with the same config apart from ``RESUME_MUTABLE`` sections: the budget grows when a run
is extended); without a checkpoint the directory is moved aside and the run starts fresh.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from rl_core.contracts.data_roots import is_hub_id, names_path, outside_roots
from rl_core.contracts.run_config import ConfigError, parse_run_config
from rl_core.contracts.run_dir import SERVICE_RUN_DIR, RunDir, changed_on_resume, latest_checkpoint

SUPPORTED_UNITS = ("gpu_hours",)


class EngineConfigError(ValueError):
    """The run cannot be turned into a valid engine config (the message says why)."""


def _spec(value: str | None, bare_key: str, what: str, *, paths: bool = False) -> dict[str, Any]:
    if not value:
        raise EngineConfigError(f"the run has no {what}")
    text = value.strip()
    if text.startswith("{"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise EngineConfigError(f"{what} {value!r} is not a valid YAML mapping: {exc}") from None
        if not isinstance(data, dict):
            raise EngineConfigError(f"{what} {value!r} must be a mapping")
        return data
    if paths and names_path(text):  # the service's rule too (rl_core.contracts.data_roots)
        return {"path": text}
    if paths and is_hub_id(text):
        raise EngineConfigError(
            f"{what} {_clip(text)!r} is a Hugging Face hub id: the engine loads local directories only (give the "
            "model's absolute path, under allowed_data_roots) or a preset (tiny, small, qwen2-0.5b, qwen2-1.5b)"
        )
    return {bare_key: text}


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_template(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise EngineConfigError(f"engine template {path}: {exc}") from None
    if not isinstance(data, dict):
        raise EngineConfigError(f"engine template {path} must be a mapping")
    return data


def engine_config(
    run: dict[str, Any],
    compute_unit: str,
    template: dict[str, Any],
    *,
    device: str,
    steps: int,
    roots: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The validated engine config of ``run`` (a ``RunOut`` as JSON), as a plain mapping. With ``roots``, a
    task/model path of the run outside them is refused before anything is opened (the message does not say
    whether it exists)."""
    if compute_unit not in SUPPORTED_UNITS:
        raise EngineConfigError(
            f"compute_unit {compute_unit!r}: the engine measures {SUPPORTED_UNITS[0]}; use that unit for the budget"
        )
    cfg = _merge({"device": device, "budget": {"steps": steps}}, template)
    cfg["name"] = SERVICE_RUN_DIR.format(id=int(run["id"]))
    cfg["seed"] = int(run.get("seed") or 0)
    cfg["recipe"] = run.get("recipe") or {"preset": "scalerl"}
    cfg["task"] = _spec(run.get("task"), "kind", "task")
    cfg["model"] = _spec(run.get("model"), "preset", "model", paths=True)
    budget = dict(cfg.get("budget") or {})
    if run.get("budget") is not None:
        budget["max_device_hours"] = float(run["budget"])
    cfg["budget"] = budget
    cfg["sinks"] = {**(cfg.get("sinks") or {}), "jsonl": True, "http": None}
    if roots is not None:
        problems = [
            f"{key}.path {_clip(str(spec['path']))!r} is not under the allowed roots {list(roots)} "
            "(worker setting allowed_data_roots)"
            for key in ("task", "model")
            if isinstance(spec := cfg[key], dict) and spec.get("path") and outside_roots(str(spec["path"]), roots)
        ]
        if problems:
            raise EngineConfigError("; ".join(problems))
    return normalise(cfg)


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def normalise(data: dict[str, Any]) -> dict[str, Any]:
    """Validate with the engine's own (torch-free) parser and return its canonical mapping."""
    try:
        return parse_run_config(data).to_dict()
    except ConfigError as exc:
        raise EngineConfigError(str(exc)) from None


def prepare_run_dir(run_dir: Path, cfg: dict[str, Any]) -> bool:
    """Make ``run_dir`` ready for ``cfg``; True when the engine must ``--resume`` (see module invariant)."""
    if latest_checkpoint(RunDir(run_dir).checkpoints) is not None:
        saved_path = RunDir(run_dir).config
        try:
            saved = normalise(yaml.safe_load(saved_path.read_text(encoding="utf-8")))
        except (OSError, yaml.YAMLError) as exc:
            raise EngineConfigError(f"cannot read the saved config of {run_dir}: {exc}") from None
        if changed := changed_on_resume(saved, cfg):
            raise EngineConfigError(f"{run_dir} holds this run with a different config (changed: {changed})")
        if saved != cfg:
            tmp = saved_path.with_suffix(".tmp")
            tmp.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
            tmp.replace(saved_path)
        return True
    if run_dir.exists() and any(run_dir.iterdir()):
        n = 1
        while (aside := run_dir.with_name(f"{run_dir.name}.abandoned-{n}")).exists():
            n += 1
        run_dir.rename(aside)
    run_dir.mkdir(parents=True, exist_ok=True)
    return False
