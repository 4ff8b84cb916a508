"""Running a config end to end: output directory, sinks, the engine, and a final status that is always written.

``run(cfg, out_dir, resume=...)`` returns a ``RunResult`` and writes ``<out>/status.json``
(``{"status", "reason", "step"}``) whatever happens. Failures become ``failed`` with a one-line reason:
non-finite loss or gradient, out of memory (host or device), a missing file, a generator crash, an invalid
config detected late. The sinks are closed with the same status (the HTTP reporter reports it to the service).

Invariants: a fresh run refuses an output directory that already holds a run (metrics or checkpoints) unless
``resume`` is set; ``resume`` needs a checkpoint there and the same config as the saved one, except the sections in
``RESUME_MUTABLE`` (budget, device, threads, sinks: a run can be extended or moved; the rule and the directory
layout are ``rl_core.contracts.run_dir``), so the curve continues with the
same recipe, model, task, evaluation and checkpointing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch
import yaml

from rl_core.contracts.run_config import ConfigError, RunConfig, parse_run_config
from rl_core.contracts.run_dir import CONFIG_FILE, RESUME_MUTABLE, RunDir, changed_on_resume
from rl_core.engine.pipeline import Engine, EngineError, RunResult
from rl_core.engine.sinks import ConsoleSink, CsvSink, HttpReporter, JsonlSink, MetricSink, MultiSink
from rl_core.engine.trainer import NonFiniteError


def build_sinks(cfg: RunConfig, out: Path) -> MultiSink:
    sinks: list[MetricSink] = []
    if cfg.sinks.jsonl:
        sinks.append(JsonlSink(RunDir(out).metrics))
    if cfg.sinks.csv:
        sinks.append(CsvSink(RunDir(out).metrics_csv))
    if cfg.sinks.console:
        sinks.append(ConsoleSink(cfg.budget.steps, every=cfg.sinks.console_every))
    http = cfg.sinks.http
    if http is not None:
        sinks.append(
            HttpReporter(
                http.url,
                http.run_id,
                os.environ.get(http.token_env),
                timeout=http.timeout,
                retries=http.retries,
                backoff=http.backoff,
                lease_id=http.lease_id,
            )
        )
    return MultiSink(sinks)


def prepare_out_dir(cfg: RunConfig, out: Path, *, resume: bool) -> RunConfig:
    """Create/check the output directory (see module doc); the config the run will use."""
    saved = RunDir(out).config
    if resume:
        if not saved.is_file():
            raise FileNotFoundError(f"--resume: {out} holds no run (no {CONFIG_FILE})")
        stored = parse_run_config(yaml.safe_load(saved.read_text(encoding="utf-8")), source=str(saved))
        old, new = stored.to_dict(), cfg.to_dict()
        changed = changed_on_resume(old, new)
        if changed:
            raise ConfigError(
                f"--resume: {', '.join(changed)} differ from the config saved in {saved}; only "
                f"{', '.join(RESUME_MUTABLE)} may change when a run is resumed"
            )
        saved.write_text(yaml.safe_dump(new, sort_keys=False), encoding="utf-8")
        return cfg
    if RunDir(out).holds_run():
        raise ConfigError(f"{out} already holds a run; pass --resume to continue it or choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    saved.write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
    return cfg


def _write_status(out: Path, result: RunResult) -> None:
    out.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"status": result.status, "reason": result.reason, "step": result.step}
    RunDir(out).status.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def describe_failure(exc: BaseException) -> str:
    """A clear one-line reason for a failed run."""
    if isinstance(exc, NonFiniteError):
        return f"training diverged: {exc}"
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return f"out of memory: {exc}".splitlines()[0]
    if isinstance(exc, FileNotFoundError):
        return f"missing file: {exc}"
    if isinstance(exc, ConfigError | EngineError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def run(cfg: RunConfig, out: Path, *, resume: bool = False, sinks: MultiSink | None = None) -> RunResult:
    """Run (or resume) ``cfg`` into ``out``; always writes ``status.json`` and closes the sinks."""
    cfg = prepare_out_dir(cfg, out, resume=resume)
    sink = sinks if sinks is not None else build_sinks(cfg, out)
    engine = Engine(cfg, out, sink, resume=resume)
    try:
        result = engine.run()
    except KeyboardInterrupt:
        result = RunResult("stopped", "interrupted; resume from the last checkpoint with --resume", engine.step)
    except Exception as exc:
        result = RunResult("failed", describe_failure(exc), engine.step)
        if os.environ.get("SCALERL_DEBUG"):
            import traceback

            traceback.print_exc(file=sys.stderr)
    _write_status(out, result)
    sink.close(result.status, result.reason)
    return result
