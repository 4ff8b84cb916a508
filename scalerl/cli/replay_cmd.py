"""``scalerl replay``: replay a recorded grid under stop policies (scalerl's, none, Optuna's pruners)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import click

from scalerl.cli.errors import fail

#: ``scalerl`` enacts its stops (``auto_stop``); ``scalerl-advice`` is the default ``recommend`` mode: every run goes
#: to the budget, and the advice and verdict it would have shown are scored.
POLICIES = ("scalerl", "scalerl-advice", "none", "optuna-median", "optuna-asha", "optuna-hyperband")
DEFAULT_ORDERS = 20


def run_policies(
    files: tuple[Path, ...],
    x_col: str | None,
    y_col: str | None,
    until: float | None,
    policies: tuple[str, ...],
    orders: int,
    replicates: bool = True,
    compute_target: float | None = None,
) -> dict[str, Any]:
    """Every requested policy on the grid; scalerl's result at the top level, the others under their names."""
    from rl_core.scaling.decide.policy import Policy
    from rl_core.scaling.measure.curves_io import CurveFileError
    from rl_core.scaling.measure.frontier import near_best_stopped
    from rl_core.scaling.measure.replay import ReplayError, load_grid, never_stop, replay, scalerl_policy
    from rl_core.scaling.measure.verdict_score import score_verdicts

    try:
        runs = load_grid(list(files), x_col, y_col)
        results = []
        for name in policies:
            if name in ("scalerl", "scalerl-advice"):
                policy = Policy(compute_target=compute_target)
                factory = scalerl_policy(policy, replicates=replicates, enact=name == "scalerl")
                results.append(replay(name, runs, factory, until))
            elif name == "none":
                results.append(replay("none", runs, never_stop, until))
            else:
                try:
                    from rl_core.scaling.measure.replay_optuna import replay_pruner
                except ImportError as exc:  # pragma: no cover - the extra is installed in CI
                    fail(str(exc))
                kind = name.removeprefix("optuna-")
                try:
                    for mode in ("parallel", "sequential"):
                        results.append(replay_pruner(kind, runs, until, mode=mode, orders=orders))
                except ImportError as exc:
                    fail(str(exc))
    except (CurveFileError, ReplayError) as exc:
        fail(str(exc))
    main = next((r for r in results if r.policy == "scalerl"), results[0])

    def with_verdict(r: Any) -> dict[str, Any]:
        score = score_verdicts(r, runs)
        near = [{"run": n, "rule": rule} for n, rule in near_best_stopped(r, runs)]
        return {
            **r.to_dict(),
            "near_best_stopped": near,
            **({} if score is None else {"verdict": dataclasses.asdict(score)}),
        }

    out: dict[str, Any] = with_verdict(main)
    for r in results:
        if r is not main:
            out[r.policy] = with_verdict(r)
    return out


def run_frontier(
    files: tuple[Path, ...], x_col: str | None, y_col: str | None, until: float | None, orders: int, plot: Path | None
) -> dict[str, Any]:
    """scalerl at every ``compute_target`` of the frontier and every Optuna pruner setting on the grid; the points
    (one grid: mean = the grid's number), the pruner settings scalerl loses to, and the plot if asked."""
    from rl_core.scaling.measure.curves_io import CurveFileError
    from rl_core.scaling.measure.frontier import (
        FLOOR_STARTS,
        oracle_floor,
        points,
        pruner_frontier,
        scalerl_frontier,
    )
    from rl_core.scaling.measure.frontier_report import match_pruners, monotonicity
    from rl_core.scaling.measure.replay import ReplayError, load_grid
    from scalerl.cli.replay_frontier import floor_line, frontier_table, match_lines, monotone_lines, write_plot

    try:
        runs = load_grid(list(files), x_col, y_col)
        rows = scalerl_frontier("grid", runs, budget=until)
        try:
            rows += pruner_frontier("grid", runs, orders, budget=until)
        except ImportError as exc:
            fail(str(exc))
    except (CurveFileError, ReplayError) as exc:
        fail(str(exc))
    pts = points({s: [g] for s, g in rows}, lambda g: True)
    floors = {start: oracle_floor(runs, start, until) for start in FLOOR_STARTS}
    ours = [p for p in pts if p.setting.policy == "scalerl"]
    matches = match_pruners(ours, [p for p in pts if p.setting.policy != "scalerl"])
    mono = monotonicity({s: [g] for s, g in rows}, lambda g: True)
    if plot is not None:
        write_plot(pts, plot, f"Compute–regret frontier: {len(runs)} runs")
    return {
        "points": [
            {
                **dataclasses.asdict(p.setting),
                "compute": p.compute,
                "regret": p.regret,
                "regret_worst": p.regret_worst,
                "near_best_stops": p.near_best_stops,
                "near_best_rules": dict(p.near_best_rules),
            }
            for p in pts
        ],
        "lost_to": [f"{m.pruner.setting.policy} {m.pruner.setting.label}" for m in matches if not m.met],
        "monotone": mono.passed,
        "monotone_violations": [str(v) for v in mono.violations],
        "oracle_floor": [{"start": k, "compute": v} for k, v in floors.items()],
        "table": [*frontier_table(pts), "", monotone_lines(mono)[0], "", *match_lines(matches), "", floor_line(floors)],
    }


def _fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def _print(out: dict[str, Any]) -> None:
    rows = [out] + [v for v in out.values() if isinstance(v, dict) and "policy" in v]
    click.echo(f"budget {out['budget']:.4g}; best run {out['best']}")
    seeds = out.get("recipe_regret") is not None  # a grid with seeds of one recipe: regret by recipe too
    extra = f" {'recipe':>8s}" if seeds else ""
    click.echo(f"{'policy':30s} {'compute':>8s} {'regret':>8s} {'worst':>8s}{extra} {'orders':>6s}  pick")
    for r in rows:
        worst = r.get("regret_worst")
        by_recipe = f" {r['recipe_regret']:8.4f}" if seeds else ""
        click.echo(
            f"{r['policy']:30s} {r['compute']:8.3f} {r['regret']:8.4f} "
            f"{'-' if worst is None else format(worst, '.4f'):>8s}{by_recipe} {r['orders']:6d}  {r['pick']}"
        )
    if seeds:
        click.echo("recipe: regret by recipe (the best recipe's mean final over its seeds minus that of the recipe")
        click.echo("        whose seeds stand best, as the policy left them, among those with a completed seed)")
    for r in rows:
        if r.get("verdict"):
            click.echo(_verdict_line(r["policy"], r["verdict"]))
    for r in rows:
        near = r.get("near_best_stopped") or []
        if r["policy"] != "scalerl-advice":
            rules: dict[str, int] = {}
            for e in near:
                rules[e["rule"]] = rules.get(e["rule"], 0) + 1
            by = ", ".join(f"{k} {v}" for k, v in sorted(rules.items(), key=lambda kv: (-kv[1], kv[0])))
            click.echo(
                f"near-best runs stopped ({r['policy']}, runs whose recipe ends within the tolerance of the best): "
                f"{len(near)}" + (f" ({by}: {', '.join(e['run'] for e in near)})" if near else "")
            )
    click.echo("")
    click.echo(f"{out['policy']}: where each run stopped")
    for name, run in out["runs"].items():
        reason = run["reason"] or "ran to the budget"
        click.echo(f"  {name:40s} stopped at {_fmt_x(run['stopped_at']):>8s}  final {run['final']:.3f}  {reason}")


def _verdict_line(policy: str, v: dict[str, Any]) -> str:
    """What the verdict users read did over the replay (:mod:`rl_core.scaling.measure.verdict_score`)."""
    when = "never decided" if v["decided_at"] is None else f"decided at {v['decided_at']:.0%} of the budget"
    first = v["named_regret_first"]
    named = "" if first is None else f", named best within {first:.4f} of the best final"
    wrong = "" if v["wrong_once_decided"] is None else f", wrong once decided {v['wrong_once_decided']:.0%}"
    end = "decided" if v["decided_at_end"] else "undecided"
    should = " (the finals differ by more than the noise)" if v["separated"] else ""
    return (
        f"verdict ({policy}): {when}{named}{wrong}; at the end {end} by {v['end_basis']}{should}; "
        f"stop advice to near-best runs: {v['near_best_stopped']}, to the leader: {v['leader_stops']} "
        f"(tolerance {v['tolerance']:.4f})"
    )


@click.command("replay")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--x", "x_col", metavar="COL", help="Compute column (default: as `scalerl fit` picks it).")
@click.option("--y", "y_col", metavar="COL", help="Pass-rate column (default: the first non-compute column).")
@click.option("--until", type=float, help="Common budget in x units (default: the last x common to all files).")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Choice(POLICIES),
    help="Policy to replay (repeatable; default: all; Optuna's need `pip install optuna`).",
)
@click.option("--orders", type=int, default=DEFAULT_ORDERS, show_default=True, help="Random orders for Optuna.")
@click.option(
    "--replicates/--no-replicates",
    default=True,
    show_default=True,
    help="Files whose names agree up to a seed suffix (_s0, -seed1, ,seed=2) are seeds of one recipe: scalerl "
    "never stops a run because one of its own replicates is ahead.",
)
@click.option(
    "--compute-target",
    type=click.FloatRange(0.0, 1.0, min_open=True),
    help="scalerl's one knob: spend about this fraction of the grid's compute (default: off, the rules alone, the "
    "same as 0.5). Lower spends less at more risk of losing the best run; higher holds every stop back longer.",
)
@click.option(
    "--frontier",
    is_flag=True,
    help="Replay scalerl at several compute targets and each Optuna pruner at several settings; print both "
    "frontiers (compute, regret, near-best runs stopped) and the pruner settings scalerl loses to.",
)
@click.option(
    "--plot", type=click.Path(dir_okay=False, path_type=Path), help="With --frontier: write a Plotly HTML here."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (scalerl's result, others by name).")
def replay_cmd(
    files: tuple[Path, ...],
    x_col: str | None,
    y_col: str | None,
    until: float | None,
    policies: tuple[str, ...],
    orders: int,
    replicates: bool,
    compute_target: float | None,
    frontier: bool,
    plot: Path | None,
    as_json: bool,
) -> None:
    """Replay the runs of one grid (one CSV per run) evaluation by evaluation under stop policies, and report
    compute used (fraction of running everything), the pick and its regret."""
    from scalerl.cli.forecast_cmds import _safe_json

    if until is not None and not (math.isfinite(until) and until > 0):
        fail(f"--until must be a positive finite number, got {until}")
    if orders < 1 or orders > 1000:
        fail(f"--orders must be in [1, 1000], got {orders}")
    if plot is not None and not frontier:
        fail("--plot draws the frontier: add --frontier")
    if frontier:
        front = run_frontier(files, x_col, y_col, until, orders, plot)
        click.echo(
            _safe_json({k: v for k, v in front.items() if k != "table"}) if as_json else "\n".join(front["table"])
        )
        return
    chosen = policies or POLICIES
    out = run_policies(files, x_col, y_col, until, tuple(dict.fromkeys(chosen)), orders, replicates, compute_target)
    if as_json:
        click.echo(_safe_json(out))
    else:
        _print(out)


def register(cli: click.Group) -> None:
    cli.add_command(replay_cmd)
