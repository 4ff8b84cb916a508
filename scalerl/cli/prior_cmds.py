"""``scalerl prior build|show``: shape priors for the forecaster, the shipped one or one learned from your runs."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from scalerl.cli.errors import fail, write_output

if TYPE_CHECKING:
    from rl_core.scaling.fit.prior import ShapePrior


def load_prior_option(value: str, option: str) -> ShapePrior | None:
    """A ``--prior`` value: ``public`` (the shipped prior), ``none`` (flat, None) or a prior file; bad files fail."""
    from rl_core.scaling.fit.prior import load_prior

    if value == "public":
        return load_prior()
    if value == "none":
        return None
    path = Path(value)
    if value == "default" and not path.is_file():
        fail(
            f"{option}: 'default' was renamed 'public' (the shipped prior learned from public RL curves); flat priors "
            "('none') are what a fit uses when no prior is given"
        )
    if not path.is_file():
        fail(f"{option}: {value!r} is neither 'public', 'none' nor a prior file (scalerl prior build writes one)")
    return _read_prior_file(path, option)


def _read_prior_file(path: Path, option: str) -> ShapePrior:
    """A prior file (UTF-8 JSON holding an object that ``ShapePrior.from_json`` accepts; the prior checks its own
    fields): a bad file is one ``error:`` line, never a traceback."""
    from rl_core.scaling.fit.prior import ShapePrior

    def bad(why: str) -> NoReturn:
        fail(f"{option}: {path}: not a shape prior file ({why}); `scalerl prior build` writes one")

    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        bad(f"cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError:
        bad("not UTF-8 text")
    except (json.JSONDecodeError, RecursionError) as exc:
        bad(f"not JSON: {exc}" if isinstance(exc, json.JSONDecodeError) else "not JSON: nested too deeply")
    if not isinstance(doc, dict):
        kind = {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(doc), "null")
        bad(f"a JSON {kind}, not an object")
    try:
        prior = ShapePrior.from_json(doc)
    except KeyError as exc:
        bad(f"no {exc.args[0]!r} field")
    except (ValueError, TypeError, IndexError) as exc:
        bad(str(exc))
    return prior


def _describe(prior: ShapePrior) -> list[str]:
    import numpy as np

    sd = np.sqrt(np.diag(np.asarray(prior.cov)))
    return [
        f"version            {prior.version}",
        f"C_mid / compute    {np.exp(prior.mean[0]):.3g}  (log: {prior.mean[0]:.3f} ± {sd[0]:.3f})",
        f"B                  {np.exp(prior.mean[1]):.3g}  (log: {prior.mean[1]:.3f} ± {sd[1]:.3f})",
        f"extrapolation sd   {prior.extrapolation_sd:.4f} per e-fold of compute past the data",
        f"learned from       {prior.n_cases} oracle fits; sources: {', '.join(prior.sources) or '-'}",
    ]


@click.group("prior")
def prior_group() -> None:
    """Shape priors for the forecaster: show one, or build one from your own finished runs."""


@prior_group.command("build")
@click.argument("directories", metavar="[DIR]...", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--experiment",
    "experiments",
    multiple=True,
    metavar="ID|NAME",
    help="Also learn from this experiment's finished runs on the service (repeatable; each is one grid).",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Prior file to write.")
@click.option("--x", "x_col", metavar="COL", help="Compute column for every file (default: per file).")
@click.option("--y", "y_col", metavar="COL", help="Pass-rate column for every file (default: per file).")
@click.option("--version", "version", help="Version string stored in the file (default: today's date).")
@click.option("--scale", type=float, default=None, help="Covariance inflation (default: the shipped prior's, 0.5).")
@click.option("--url", default=None, help="Server URL for --experiment (default: SCALERL_URL or saved credentials).")
@click.option("--token", default=None, help="API token for --experiment (default: SCALERL_TOKEN or saved credentials).")
def build_cmd(
    directories: tuple[Path, ...],
    experiments: tuple[str, ...],
    out: Path,
    x_col: str | None,
    y_col: str | None,
    version: str | None,
    scale: float | None,
    url: str | None,
    token: str | None,
) -> None:
    """Learn a shape prior from finished runs: the CSVs in DIR... (one per run; a sub-directory per grid) and/or the
    runs of an experiment on the service that succeeded (--experiment; each experiment is one grid).

    Use it with `scalerl fit --prior FILE`, `scalerl backtest --prior FILE`, or inline as `fit: {prior: {...}}`
    in a grid document. Score it first: `scalerl backtest DIR` learns and scores priors leave-one-grid-out."""
    from rl_core.scaling.fit.prior_learn import DEFAULT_SCALE
    from rl_core.scaling.measure.corpus import load_curves
    from rl_core.scaling.measure.prior_build import build_prior, write_prior

    if not directories and not experiments:
        fail("give a directory of CSV runs, or --experiment ID|NAME to learn from runs on the service")
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        fail(f"--scale must be a finite number > 0, got {scale}")
    curves, skipped = [], []
    for d in directories:
        if not d.is_dir():
            fail(f"{d}: " + ("not a directory (give folders of CSV files)" if d.exists() else "no such directory"))
        found, why = load_curves(d, x_col, y_col)
        curves += found
        skipped += why
    if experiments:
        found, why = _service_curves(experiments, url, token)
        curves += found
        skipped += why
    if not curves:
        fail("no usable curves" + (f" ({'; '.join(skipped)})" if skipped else ""))
    try:
        prior = build_prior(
            curves,
            version=version or dt.date.today().isoformat(),
            scale=DEFAULT_SCALE if scale is None else scale,
            extra={"directories": [str(d) for d in directories], "experiments": list(experiments)},
        )
    except ValueError as exc:
        fail(str(exc))
    write_output(out, lambda tmp: write_prior(prior, tmp), "--out")
    for s in skipped:
        click.echo(f"skipped: {s}")
    click.echo(f"wrote {out} from {len(curves)} curves")
    for line in _describe(prior):
        click.echo(line)


def _service_curves(experiments: tuple[str, ...], url: str | None, token: str | None) -> tuple[list[Any], list[str]]:
    """The finished runs of each experiment, read over the REST API; a missing experiment, an unreachable server or a
    refused token is a clear error (exit 2, 5 or 6), never a traceback."""
    from scalerl.cli.errors import connect, refused
    from scalerl.cli.exit_codes import EXIT_UNREACHABLE
    from scalerl.cli.service_curves import experiment_curves
    from scalerl.client.api import ApiError, ServiceUnavailable

    curves: list[Any] = []
    skipped: list[str] = []
    with connect(url, token) as client:
        for experiment in experiments:
            try:
                found, why = experiment_curves(client, experiment)
            except LookupError as exc:
                fail(str(exc))
            except ApiError as exc:
                refused(exc, client, f"--experiment {experiment}: ")
            except ServiceUnavailable as exc:
                fail(f"cannot reach the server at {client.url}: {exc}", EXIT_UNREACHABLE)
            curves += found
            skipped += why
    return curves, skipped


@prior_group.command("show")
@click.argument("path", required=False, type=click.Path(dir_okay=False, path_type=Path))
def show_cmd(path: Path | None) -> None:
    """Describe a prior file (default: the shipped prior)."""
    prior = load_prior_option(str(path) if path is not None else "public", "PATH")
    if prior is None:
        fail("PATH: 'none' means flat priors, which have nothing to show; give a prior file")
    for line in _describe(prior):
        click.echo(line)


def register(cli: click.Group) -> None:
    cli.add_command(prior_group)
