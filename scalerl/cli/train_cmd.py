"""``scalerl train CONFIG.yaml [--out DIR] [--resume]``: run the PipelineRL engine on a run config.

Exit codes: 0 when the run succeeded or was stopped on request, 1 when it failed (the reason is printed and
written to ``<out>/status.json``), 2 for a bad config or a missing file (one ``error: ...`` line).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scalerl.cli.errors import fail


@click.command("train")
@click.argument("config", type=click.Path(path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run directory (default: runs/<name>).",
)
@click.option("--resume", is_flag=True, help="Continue the run in --out from its latest checkpoint.")
def train_cmd(config: Path, out: Path | None, resume: bool) -> None:
    """Train with the config's recipe, model and task; metrics go to OUT/metrics.jsonl, .csv and the console."""
    from rl_core.contracts.run_config import ConfigError, load_run_config

    try:
        cfg = load_run_config(config)
    except ConfigError as exc:
        fail(str(exc))
    except UnicodeDecodeError as exc:
        fail(f"{config}: not UTF-8 text (byte {exc.start}); a run config is a YAML file")
    except OSError as exc:
        fail(f"{config}: cannot read: {exc.strerror or exc}")
    directory = out if out is not None else Path("runs") / cfg.name
    from rl_core.engine.runner import run

    try:
        result = run(cfg, directory, resume=resume)
    except (ConfigError, FileNotFoundError) as exc:
        fail(str(exc))
    if result.status == "failed":
        click.echo(f"error: run failed at step {result.step}: {result.reason}", err=True)
        sys.exit(1)
    click.echo(f"run {result.status} at step {result.step}: {result.reason} ({directory})")


def register(cli: click.Group) -> None:
    cli.add_command(train_cmd)
