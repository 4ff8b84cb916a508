"""``scalerl replay --frontier``: scalerl's compute–regret frontier beside each Optuna pruner's, as a table and a
Plotly HTML (shared with ``bench/replay_frontier.py``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rl_core.scaling.measure.frontier import Match, Point


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


def losses(matches: Sequence[Match]) -> list[str]:
    """How many pruner settings scalerl matches at no more compute, and one line per setting it does not."""
    out = [f"scalerl at no more compute with no more mean regret: {sum(m.met for m in matches)} of {len(matches)} "]
    out[0] += "pruner settings"
    for m in matches:
        if m.met:
            continue
        p = m.pruner
        ours = (
            "no scalerl setting spends that little"
            if m.scalerl is None
            else f"scalerl {m.scalerl.setting.label}: {m.scalerl.compute:.3f} / {m.scalerl.regret:.4f}"
        )
        out.append(f"- lost to {p.setting.policy} {p.setting.label}: {p.compute:.3f} / {p.regret:.4f}; {ours}")
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
