"""``scalerl replay --frontier``: scalerl's compute–regret frontier beside each Optuna pruner's, as a table and a
Plotly HTML (shared with ``bench/replay_frontier.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rl_core.scaling.measure.frontier import Point
from rl_core.scaling.measure.frontier_report import FloorGap, Monotonicity, PrunerMatch, near_floor, nearest_floor


def point_row(p: Point) -> str:
    """One markdown row: policy, setting, mode, mean compute, mean regret, worst regret (grid), near-best stops."""
    return (
        f"| {p.setting.policy} | {p.setting.label} | {p.setting.mode} | {p.compute:.3f} | {p.regret:.4f} | "
        f"{p.regret_worst:.4f} ({p.worst_grid}) | {p.near_best_stops} ({p.near_best_grids} grids) | "
        f"{rules_cell(p.near_best_rules)} |"
    )


def rules_cell(rules: Mapping[str, int]) -> str:
    """Near-best stops by rule, most first (``rung 3, dominated 1``; ``-`` for none)."""
    return ", ".join(f"{r} {k}" for r, k in sorted(rules.items(), key=lambda rk: (-rk[1], rk[0]))) or "-"


def frontier_table(pts: Sequence[Point]) -> list[str]:
    """Every point as a markdown table, scalerl first, each policy by compute."""
    return [
        "| policy | setting | mode | mean compute | mean regret | worst regret (grid) | near-best runs stopped | "
        "by rule |",
        "|---|---|---|---|---|---|---|---|",
        *(
            point_row(p)
            for p in sorted(pts, key=lambda p: (p.setting.policy != "scalerl", p.setting.policy, p.compute))
        ),
    ]


def _start_name(start: float) -> str:
    """0: "first evaluation"; 1/n: "from 1/n"; any other fraction as a number."""
    if start == 0.0:
        return "first evaluation"
    n = round(1 / start)
    return f"from 1/{n}" if abs(n * start - 1) < 1e-9 else f"from {start:.3g}"


def floor_line(floors: Mapping[float, float]) -> str:
    """The oracle's floor (:func:`~rl_core.scaling.measure.frontier.oracle_floor`) at each start, in one line."""
    cells = ", ".join(f"{_start_name(k)} {v:.3f}" for k, v in floors.items())
    return (
        f"Oracle floor (the best run kept to the end, every other stopped at once; regret 0): {cells}. "
        "No rule that finishes a run spends less."
    )


def monotone_lines(m: Monotonicity) -> list[str]:
    """``monotone: PASS`` or ``monotone: FAIL (...)`` naming each violating pair of the means, then how many grids
    fail on their own numbers (with their violating pairs counted)."""
    head = "monotone: PASS" if m.passed else f"monotone: FAIL ({'; '.join(str(v) for v in m.violations)})"
    grids = f"per grid: not monotone on {len(m.failing)} of {m.grids} grids"
    if m.failing:
        grids += ": " + ", ".join(f"{g} ({len(v)} {'pair' if len(v) == 1 else 'pairs'})" for g, v in m.failing.items())
    return [head, grids]


def _at(p: Point) -> str:
    return f"{p.setting.label} ({p.compute:.3f} / {p.regret:.4f})"


def _pruner(p: Point) -> str:
    return f"{p.setting.policy} {p.setting.label} ({p.setting.mode}) {p.compute:.3f} / {p.regret:.4f}"


def match_lines(matches: Sequence[PrunerMatch]) -> list[str]:
    """``matched k of n`` pruner settings (some knob point at no more mean compute and no more mean regret), one
    line per setting naming the knob point that matches it or, lost, scalerl's nearest points, then the lost
    ones."""
    lost = [m for m in matches if not m.met]
    out = [
        f"pruner settings (a knob point at no more mean compute and no more mean regret): matched "
        f"{len(matches) - len(lost)} of {len(matches)}"
    ]
    for m in matches:
        if m.met:
            assert m.by_compute is not None
            out.append(f"- {_pruner(m.pruner)}: matched by {_at(m.by_compute)}")
            continue
        by_c = "none (every knob point spends more)" if m.by_compute is None else _at(m.by_compute)
        by_r = "none (every knob point has more regret)" if m.by_regret is None else _at(m.by_regret)
        out.append(
            f"- {_pruner(m.pruner)}: LOST; scalerl's nearest: least regret at no more compute: {by_c}; least compute "
            f"at no more regret: {by_r}"
        )
    out.append("lost: " + ("; ".join(_pruner(m.pruner) for m in lost) or "none"))
    return out


def floor_table(gaps: Sequence[FloorGap]) -> list[str]:
    """Each knob point's mean compute above the mean oracle floor of its grids, beside its mean and worst regret."""
    return [
        "| knob point | mean compute | mean floor | compute − floor | mean regret | worst grid regret (grid) |",
        "|---|---|---|---|---|---|",
        *(
            f"| {g.point.setting.label} | {g.point.compute:.3f} | {g.floor:.3f} | {g.gap:.3f} | {g.point.regret:.4f} "
            f"| {g.point.regret_worst:.4f} ({g.point.worst_grid}) |"
            for g in gaps
        ),
    ]


def _gap(g: FloorGap) -> str:
    return f"{g.point.setting.label}: {g.gap:.3f} above the floor {g.floor:.3f}, mean regret {g.point.regret:.4f}"


def floor_goal_lines(
    gaps: Sequence[FloorGap], near: tuple[float, float], default: tuple[float, float], default_label: str = "default"
) -> list[str]:
    """The two goals on the distance to the floor: some knob point within ``near`` = (distance, mean regret) of it,
    and the default within ``default`` = (distance, mean regret)."""
    dist, reg = near
    best = nearest_floor(gaps, reg)
    ok = best is not None and near_floor(best, dist, reg)
    why = f"no setting has mean regret ≤ {reg:g}" if best is None else _gap(best)
    out = [
        f"some setting within {dist:.2f} of the floor at mean regret ≤ {reg:g}: {'MET' if ok else 'NOT MET'} "
        f"(best: {why})"
    ]
    dist, reg = default
    mine = next((g for g in gaps if g.point.setting.label == default_label), None)
    ok = mine is not None and near_floor(mine, dist, reg)
    why = "not replayed" if mine is None else _gap(mine)
    out.append(f"default within {dist:.2f} of the floor at regret ≤ {reg:g}: {'MET' if ok else 'NOT MET'} ({why})")
    return out


def write_plot(pts: Sequence[Point], path: Path, title: str) -> None:
    """The points as a Plotly HTML (plotly.js inlined, so it opens offline): scalerl's frontier as a line, each
    pruner's settings as markers, the setting and the worst grid on hover."""
    import plotly.graph_objects as go

    fig: Any = go.Figure()
    for policy in sorted({p.setting.policy for p in pts}):
        mine = sorted((p for p in pts if p.setting.policy == policy), key=lambda p: p.compute)
        fig.add_trace(
            go.Scatter(
                x=[p.compute for p in mine],
                y=[p.regret for p in mine],
                mode="lines+markers" if policy == "scalerl" else "markers",
                name=policy,
                text=[f"{p.setting.label} ({p.setting.mode}); worst {p.regret_worst:.4f}" for p in mine],
            )
        )
    fig.update_layout(
        title=title, xaxis_title="mean compute (fraction of running every run)", yaxis_title="mean regret (pass rate)"
    )
    fig.write_html(str(path), include_plotlyjs=True)
