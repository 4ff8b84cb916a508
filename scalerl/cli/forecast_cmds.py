"""``scalerl fit`` and ``scalerl backtest``: the forecaster on CSV files."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from scalerl.cli.errors import fail, require_shipped_data, write_output
from scalerl.cli.exit_codes import EXIT_NO_FORECAST

if TYPE_CHECKING:
    from rl_core.scaling.fit.calibration import ForecastCalibration
from scalerl.cli.prior_cmds import load_prior_option


def _r0_choice(value: str | None) -> float | str:
    if value is None or value in ("observed", "fit", "auto"):
        return value or "observed"
    try:
        r0 = float(value)
    except ValueError:
        fail(f"--r0 must be a number in [0, 1], 'observed', 'fit' or 'auto', got {value!r}")
    if not 0.0 <= r0 <= 1.0:
        fail(f"--r0 must be in [0, 1], got {r0}")
    return r0


#: Column names that are a held-out pass rate (or a 0/1 reward's mean, an accuracy, a score), and names that are not.
_PASS_RATE_NAME = re.compile(r"pass|acc|reward|score|success|correct|solve|mean@|exact|match|win|pct|percent")
_NOT_PASS_RATE = re.compile(r"loss|entropy|kl|grad|learning_rate|\blr\b|length|norm|time|token|epoch|clip|std")


def looks_like_pass_rate(column: str) -> bool:
    """Whether a column chosen by default may be fitted as a pass rate: ``scalerl fit`` without ``--y`` refuses
    to fit e.g. ``loss`` (it used to, and exited 0)."""
    name = column.lower().rsplit(" - ", 1)[-1]
    return bool(_PASS_RATE_NAME.search(name)) and not _NOT_PASS_RATE.search(name)


def _finite(value: float | None, name: str) -> None:
    if value is not None and not math.isfinite(value):
        fail(f"{name} must be a finite number, got {value}")


def _fmt(v: float | None, spec: str = ".4g") -> str:
    """Format a number; ``None`` becomes '-' padded to the spec's width."""
    if v is None:
        width = spec.split(".")[0]
        return "-".rjust(int(width)) if width.isdigit() else "-"
    return format(v, spec)


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _safe_json(obj: Any) -> str:
    """JSON with NaN/inf written as null (strict JSON for other tools)."""

    def clean(v: Any) -> Any:
        if isinstance(v, float):
            return v if math.isfinite(v) else None
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(json.loads(json.dumps(obj, default=_json_default))), indent=2, allow_nan=False)


@click.command("fit")
@click.argument("csv_paths", metavar="CSV...", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--x",
    "x_col",
    metavar="COL",
    help="Compute column, any case (default: the first of gpu_hours, compute, "
    "cum_time_s, cum_total_tokens, cum_response_tokens_est, step present).",
)
@click.option(
    "--y",
    "y_col",
    metavar="COL",
    help="Pass-rate column, any case (default: a pass_rate column, else the first metric column); "
    "percentages are divided by 100.",
)
@click.option("--burn-in", type=float, help="Leave out points below this compute (default: 20% of the window).")
@click.option(
    "--r0",
    "r0",
    metavar="V|observed|fit|auto",
    help="R0: a value, 'observed' (default: the first evaluation), 'fit', or 'auto' (observed when the first "
    "evaluation is at compute 0, else fitted).",
)
@click.option("--fit-until", type=float, help="Fit only the points up to this compute.")
@click.option("--predict-at", type=float, multiple=True, metavar="C", help="Forecast at this compute (repeatable).")
@click.option("--method", type=click.Choice(["fast", "paper"]), default="fast", show_default=True)
@click.option("--level", type=float, default=0.8, show_default=True, help="Interval level in (0, 1).")
@click.option(
    "--prior",
    "prior_arg",
    default="none",
    show_default=True,
    metavar="none|public|FILE",
    help="Shape prior: flat (none), the shipped one learned from public RL curves (public), or a file from "
    "`scalerl prior build` (learned from your own runs).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object (a list of them, in order, for several files)."
)
@click.option(
    "--plot", type=click.Path(dir_okay=False, path_type=Path), help="Write a self-contained HTML plot (one file only)."
)
def fit_cmd(
    csv_paths: tuple[Path, ...],
    x_col: str | None,
    y_col: str | None,
    burn_in: float | None,
    r0: str | None,
    fit_until: float | None,
    predict_at: tuple[float, ...],
    method: str,
    level: float,
    prior_arg: str,
    as_json: bool,
    plot: Path | None,
) -> None:
    """Fit the sigmoid R(C) = R0 + (A - R0) / (1 + (C_mid/C)^B) to a CSV curve and forecast it.

    Exit codes: 0 every forecast made, 1 a file's forecast could not be made (too few points, the fit failed),
    2 bad input (file, column, option). Columns: docs/forecasting.md ("Command line").

    Several CSV files are one grid (runs sharing a base checkpoint and an evaluation set): they are fitted jointly
    (shared R0, shapes shrunk toward each other) and reported one per file, in order.
    """
    import numpy as np

    from rl_core.scaling.fit.forecast import fit_curve
    from rl_core.scaling.fit.grid_fit import fit_grid
    from rl_core.scaling.measure.curves_io import CurveFileError, read_curve_table

    require_shipped_data()
    for name, v in (("--burn-in", burn_in), ("--fit-until", fit_until), *(("--predict-at", p) for p in predict_at)):
        _finite(v, name)
    if burn_in is not None and burn_in < 0:
        fail(f"--burn-in must be >= 0, got {burn_in}")
    if fit_until is not None and fit_until <= 0:
        fail(f"--fit-until must be a compute > 0, got {fit_until}")
    if any(p < 0 for p in predict_at):
        fail("--predict-at values must be >= 0")
    if not 0.0 < level < 1.0:
        fail(f"--level must be in (0, 1), got {level}")
    if plot is not None and len(csv_paths) > 1:
        fail("--plot takes one CSV file")
    r0_choice = _r0_choice(r0)
    prior = load_prior_option(prior_arg, "--prior")
    curves = []
    for csv_path in csv_paths:
        try:
            table = read_curve_table(csv_path, tuple(c for c in (x_col, y_col) if c))
            curve = table.curve(x_col, y_col)
        except CurveFileError as exc:
            fail(str(exc))
        if y_col is None and not looks_like_pass_rate(curve.y_column):
            fail(
                f"{csv_path.name}: no pass-rate column recognised (the first metric column is {curve.y_column!r}, "
                f"which is not one); name it with --y (columns: {', '.join(table.columns)})"
            )
        curves.append(curve)
    if fit_until is not None:
        for c, csv_path in zip(curves, csv_paths, strict=True):
            seen = c.x[np.isfinite(c.x) & np.isfinite(c.y) & (c.x > 0)]
            if seen.size and fit_until < seen.min():
                fail(
                    f"--fit-until {fit_until:g} is below the first point of {csv_path.name} (compute "
                    f"{seen.min():g}): nothing to fit; give a compute in [{seen.min():g}, {seen.max():g}]"
                )
    kwargs: dict[str, Any] = {
        "method": method,
        "r0": r0_choice,
        "burn_in": burn_in,
        "fit_until": fit_until,
        "level": level,
        "prior": prior,
    }
    if len(curves) == 1:
        fits = [fit_curve(curves[0].x, curves[0].y, **kwargs)]
    else:
        fits = fit_grid([(c.x, c.y) for c in curves], **kwargs)
    results = []
    for c, fit, csv_path in zip(curves, fits, csv_paths, strict=True):
        result = fit.to_dict(predict_at=list(predict_at))
        result.update(x_column=c.x_column, y_column=c.y_column, notes=[*c.notes, *result["notes"]])
        if len(curves) > 1:
            result["file"] = str(csv_path)
        if plot is not None:
            from scalerl.plotting import fit_figure_html

            xs, ys, predict = c.x, c.y, np.asarray(predict_at, dtype=float)
            html = fit_figure_html(xs, ys, fit, predict, csv_path.name, c.x_column, c.y_column)
            result["plot"] = str(write_output(plot, html, "--plot"))
        results.append(result)
    if as_json:
        click.echo(_safe_json(results[0] if len(results) == 1 else results))
    else:
        for i, result in enumerate(results):
            if len(results) > 1:
                click.echo(("\n" if i else "") + f"== {result['file']}")
            _print_fit(result)
    failed = [(path, fit) for path, fit in zip(csv_paths, fits, strict=True) if not fit.usable]
    for path, fit in failed:
        click.echo(f"error: {path}: no forecast: {fit.status}: {fit.message}", err=True)
    if failed:
        raise SystemExit(EXIT_NO_FORECAST)


def _print_fit(r: dict[str, Any]) -> None:
    click.echo(f"{r['x_column']} -> {r['y_column']}: {r['status']} ({r['message']})")
    click.echo(
        f"method {r['method']}, {r['n_points']} points fitted, burn-in {_fmt(r['burn_in'])}, "
        f"fit window up to {_fmt(r['compute_max'])}"
    )
    if r["A"] is not None:
        ci = r["ci"] or {}
        lvl = f"{r['level']:.0%}"
        click.echo(f"  R0    = {r['R0']:.4f}" + (" (fitted)" if r["r0_fitted"] else ""))
        for k in ("A", "B", "C_mid"):
            band = ci.get(k)
            extra = f"   {lvl} interval [{_fmt(band[0])}, {_fmt(band[1])}]" if band else ""
            click.echo(f"  {k:5s} = {_fmt(r[k])}{extra}")
        click.echo(f"  SSE   = {_fmt(r['sse'])}")
    for p in r["predictions"] if r["A"] is not None else ():
        click.echo(
            f"  at C={_fmt(p['compute'])}: {_fmt(p['mean'], '.4f')} [{_fmt(p['lo'], '.4f')}, {_fmt(p['hi'], '.4f')}]"
        )
    pl = r["power_law"]
    if pl:
        click.echo(
            f"  power law: A={pl['A']:.4f} B={pl['B']:.4g} D={pl['D']:.4g} (C >= {pl['C0']:.4g}), SSE {_fmt(pl['sse'])}"
        )
    for note in r["notes"]:
        click.echo(f"  note: {note}")
    if r.get("plot"):
        click.echo(f"plot written to {r['plot']}")


def _parse_cutoffs(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        fail(f"--cutoffs must be comma-separated numbers in (0, 1), got {text!r}")
    if not values or any(not 0.0 < v < 1.0 for v in values):
        fail(f"--cutoffs must be comma-separated numbers in (0, 1), got {text!r}")
    return values


@click.command("backtest")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--cutoffs", default="0.3,0.5", show_default=True, help="Fractions of each curve's x range to fit on.")
@click.option(
    "--methods",
    default="fast,paper,power_law,last_value",
    show_default=True,
    help="Comma-separated subset of fast, paper, power_law, last_value, grid.",
)
@click.option("--x", "x_col", metavar="COL", help="Compute column for every file (default: per file, as in fit).")
@click.option("--y", "y_col", metavar="COL", help="Pass-rate column for every file (default: per file).")
@click.option("--level", type=float, default=0.8, show_default=True)
@click.option(
    "--grids",
    is_flag=True,
    help="Grid mode: also fit each grid family jointly (method 'grid'; families from DIRECTORY/grids.json or the "
    "rule in docs/forecasting.md) and report it beside the per-run forecast.",
)
@click.option(
    "--prior",
    "prior_arg",
    default="loso",
    show_default=True,
    metavar="loso|public|none|FILE",
    help="Shape prior of fast/grid: learned leave-one-source-out from the other curves in DIRECTORY (loso), the "
    "shipped one (public), flat (none) or a prior file; a given prior that learned from a scored source is flagged.",
)
@click.option(
    "--calibration",
    "calibration_arg",
    default="shipped",
    show_default=True,
    metavar="shipped|raw|FILE",
    help="How fast/grid forecasts are read: the shipped calibration (docs/forecasting.md, 'Calibrated forecasts'), "
    "the sigmoid's raw posterior (raw), or a calibration file from bench/build_forecast_calibration.py.",
)
@click.option("--per-curve", is_flag=True, help="Also print every (curve, cut-off, method) case.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (curves, cases, summary).")
def backtest_cmd(
    directory: Path,
    cutoffs: str,
    methods: str,
    x_col: str | None,
    y_col: str | None,
    level: float,
    grids: bool,
    prior_arg: str,
    calibration_arg: str,
    per_curve: bool,
    as_json: bool,
) -> None:
    """Fit every CSV in DIRECTORY (and its sub-directories) on its first part and score the forecast of the rest.

    By default the shape prior is learned leave-one-source-out: no curve is scored with a prior that saw its source
    (each sub-directory of runs is a source of its own, so a directory of grids is scored leave-one-grid-out)."""
    from rl_core.scaling.fit.forecast import FitOptions
    from rl_core.scaling.measure.backtest import METHODS, run_backtest, summarize
    from rl_core.scaling.measure.corpus import load_curves

    require_shipped_data()
    if not directory.is_dir():
        fail(f"{directory}: no such directory")
    cuts = _parse_cutoffs(cutoffs)
    chosen = tuple(m.strip() for m in methods.split(",") if m.strip())
    unknown = [m for m in chosen if m not in METHODS]
    if unknown or not chosen:
        fail(f"unknown method(s) {', '.join(unknown) or '(none)'}; allowed: {', '.join(METHODS)}")
    if grids and "grid" not in chosen:
        chosen = (*chosen, "grid")
    if not 0.0 < level < 1.0:
        fail(f"--level must be in (0, 1), got {level}")
    # "loso": the shipped prior's recipe, which run_backtest relearns leave-one-source-out for every source
    options = FitOptions(level=level, prior="public")
    if prior_arg != "loso":
        options = FitOptions(level=level, prior=load_prior_option(prior_arg, "--prior"))
    calibration = _calibration_option(calibration_arg)
    curves, skipped = load_curves(directory, x_col, y_col)
    if not curves:
        fail(f"{directory}: no usable CSV curves" + (f" ({'; '.join(skipped)})" if skipped else ""))
    report = run_backtest(curves, cuts, chosen, options, directory=directory, calibration=calibration)
    n_families = sum(1 for f in set(report.families.values()) if list(report.families.values()).count(f) > 1)
    summary = summarize(report)
    if as_json:
        click.echo(
            _safe_json(
                {
                    "curves": [
                        {
                            "name": c.name,
                            "x_column": c.x_column,
                            "y_column": c.y_column,
                            "n_points": int(c.x.size),
                            "frac90": c.frac90,
                            "group": report.groups[c.name],
                            "grid": report.families[c.name],
                            "saturated": report.saturated[c.name],
                        }
                        for c in curves
                    ],
                    "cases": [dataclasses.asdict(c) for c in report.cases],
                    "summary": [dataclasses.asdict(r) for r in summary],
                    "skipped": skipped,
                    "prior_notes": report.prior_notes,
                    "calibration": calibration.to_json(),
                    "level": level,
                }
            )
        )
        return
    click.echo(
        f"{len(curves)} curves, {len(set(report.groups.values()))} near-duplicate groups, "
        f"{sum(report.saturated.values())} saturating almost at once; level {level:.0%}"
    )
    if "grid" in chosen:
        click.echo(f"grid mode: {n_families} grid families of 2 or more runs (the rest are fitted on their own)")
    for s in skipped:
        click.echo(f"skipped: {s}")
    for note in report.prior_notes:
        click.echo(f"prior: {note}")
    learned_from = f" (learned from: {', '.join(calibration.sources)})" if calibration.sources else ""
    click.echo(f"calibration: {calibration.version}{learned_from}")
    if per_curve:
        for c in report.cases:
            click.echo(
                f"{c.curve:55s} {c.cutoff:4.2f} {c.method:10s} fit={c.n_fit:4d} tail={c.n_tail:4d} "
                f"mae={_fmt(c.tail_mae, '.4f')} last={_fmt(c.last_error, '.4f')} "
                f"cov={_fmt(c.coverage, '.2f')} {c.status}"
            )
    click.echo(
        f"{'subset':12s} {'cutoff':>6s} {'method':10s} {'cases':>5s} {'groups':>6s} {'failed':>6s} "
        f"{'tail MAE':>9s} {'last err':>9s} {'coverage':>8s}"
    )
    for r in summary:
        click.echo(
            f"{r.subset:12s} {r.cutoff:6.2f} {r.method:10s} {r.n_curves:5d} {r.n_groups:6d} {r.n_failed:6d} "
            f"{_fmt(r.median_tail_mae, '9.4f')} {_fmt(r.median_last_error, '9.4f')} "
            f"{_fmt(r.coverage, '8.2f')}"
        )


def _calibration_option(value: str) -> ForecastCalibration:
    """``shipped``, ``raw`` or a calibration file, or a CLI error that says what is allowed."""
    from rl_core.scaling.fit.calibration import RAW, load_calibration

    if value == "raw":
        return RAW
    try:
        return load_calibration(None if value == "shipped" else str(Path(value).resolve()))
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        fail(f"--calibration {value!r}: not 'shipped', 'raw' or a readable calibration file ({exc})")


def register(cli: click.Group) -> None:
    cli.add_command(fit_cmd)
    cli.add_command(backtest_cmd)
