"""Self-contained HTML plots of a curve fit (Plotly with its JavaScript embedded: works offline)."""

from __future__ import annotations

import numpy as np

from rl_core.scaling.fit.forecast import CurveFit
from rl_core.scaling.fit.model import FloatArray


def _extent(x: FloatArray, fit: CurveFit, predict_at: FloatArray) -> tuple[float, float]:
    positive = x[x > 0]
    lo = float(positive.min()) if positive.size else 1.0
    hi = max(float(x.max()) if x.size else 1.0, float(predict_at.max()) if predict_at.size else 0.0)
    if fit.params is not None:
        hi = max(hi, 2.0 * fit.compute_max)
    return lo, hi


def fit_figure_html(
    x: FloatArray, y: FloatArray, fit: CurveFit, predict_at: FloatArray, title: str, x_label: str, y_label: str
) -> str:
    """The points (used, burn-in, after the fit window), the fit, its dotted extrapolation and band, the power law."""
    import plotly.graph_objects as go

    fig = go.Figure()
    finite = np.isfinite(x) & np.isfinite(y) & (x > 0)
    xs, ys = x[finite], y[finite]
    used = (xs >= fit.burn_in) & (xs <= fit.compute_max)
    groups = [
        ("fitted points", used, "#1f77b4"),
        ("burn-in (left out)", xs < fit.burn_in, "#aaaaaa"),
        ("after the fit window", xs > fit.compute_max, "#ff7f0e"),
    ]
    for name, mask, color in groups:
        if np.any(mask):
            fig.add_trace(go.Scatter(x=xs[mask], y=ys[mask], mode="markers", name=name, marker={"color": color}))
    lo, hi = _extent(xs, fit, predict_at)
    if fit.params is not None and hi > lo:
        grid = np.geomspace(lo, hi, 200)
        inside = grid <= fit.compute_max
        if fit.samples is not None:
            band = fit.predict_summary(grid)  # the calibrated band every surface shows
            fig.add_trace(
                go.Scatter(
                    x=grid, y=[b.lo for b in band], mode="lines", line={"width": 0}, showlegend=False, hoverinfo="skip"
                )
            )
            fig.add_trace(
                go.Scatter(
                    x=grid,
                    y=[b.hi for b in band],
                    mode="lines",
                    line={"width": 0},
                    fill="tonexty",
                    fillcolor="rgba(31,119,180,0.18)",
                    name=f"{fit.level:.0%} predictive band",
                )
            )
        curve = fit.params(grid)
        p = fit.params
        label = f"sigmoid A={p.A:.3f} B={p.B:.2f} C_mid={p.C_mid:.3g}"
        fig.add_trace(go.Scatter(x=grid[inside], y=curve[inside], mode="lines", name=label, line={"color": "#1f77b4"}))
        fig.add_trace(
            go.Scatter(
                x=grid[~inside],
                y=curve[~inside],
                mode="lines",
                name="extrapolation",
                line={"color": "#1f77b4", "dash": "dot"},
            )
        )
        if fit.power_law is not None:
            pl = fit.power_law
            g = grid[grid >= pl.C0]
            fig.add_trace(
                go.Scatter(
                    x=g,
                    y=pl(g),
                    mode="lines",
                    name=f"power law A={pl.A:.3f} B={pl.B:.2f}",
                    line={"color": "#2ca02c", "dash": "dash"},
                )
            )
        if predict_at.size:
            preds = fit.predict_summary(predict_at)
            fig.add_trace(
                go.Scatter(
                    x=[q.compute for q in preds],
                    y=[q.mean for q in preds],
                    mode="markers",
                    name="forecasts",
                    marker={"symbol": "diamond", "size": 10, "color": "#d62728"},
                    error_y=None
                    if fit.samples is None
                    else {
                        "type": "data",
                        "symmetric": False,
                        "array": [(q.hi or q.mean) - q.mean for q in preds],
                        "arrayminus": [q.mean - (q.lo or q.mean) for q in preds],
                    },
                )
            )
    fig.update_layout(
        title=f"{title}: {fit.status} ({fit.message})",
        xaxis={"type": "log", "title": x_label},
        yaxis={"title": y_label},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.2},
    )
    # A local file: no "Share chart" (Plotly's send-to-cloud button, on by default in plotly.js 3) and no logo link.
    config = {"showSendToCloud": False, "displaylogo": False, "responsive": True}
    return str(fig.to_html(include_plotlyjs=True, full_html=True, config=config))
