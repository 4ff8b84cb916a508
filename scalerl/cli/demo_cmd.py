"""``scalerl demo``: the main job of a fresh install.

Until the service and the dashboard exist, the demo is the forecaster on a bundled real curve: fit the first
third of a recorded PPO run (Qwen2.5-0.5B on GSM8K, see scalerl/examples/README.md) and compare the forecast of
the rest with what actually happened.
"""

from __future__ import annotations

from pathlib import Path

import click

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "qwen2p5_0p5b_gsm8k_ppo.csv"


@click.command("demo")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("scalerl-demo.html"),
    show_default=True,
    help="Where to write the HTML plot.",
)
@click.option(
    "--fraction",
    type=click.FloatRange(0.1, 0.9),
    default=0.33,
    show_default=True,
    help="Share of the run's compute the forecaster may see.",
)
def demo_cmd(out: Path, fraction: float) -> None:
    """Forecast a real RL run from its first third and check the forecast against the rest."""
    import numpy as np

    from rl_core.scaling import compute_to_reach, fit_curve, recommend_run
    from rl_core.scaling.curves_io import read_curve_table
    from rl_core.scaling.recommend import RunState
    from scalerl.plotting import fit_figure_html, write_fit_html

    table = read_curve_table(EXAMPLE, ("cum_response_tokens_est", "val_score"))
    x, y = table.column("cum_response_tokens_est"), table.column("val_score")
    cut = float(x.max()) * fraction
    fit = fit_curve(x, y, fit_until=cut)
    click.echo(
        f"Qwen2.5-0.5B PPO on GSM8K (compute = generated tokens); fitting the first {fraction:.0%}: "
        f"{fit.n_points} points up to {cut:.3g} tokens"
    )
    click.echo(f"  {fit.status}: {fit.message}")
    if fit.intervals:
        lo, hi = fit.intervals["A"]
        click.echo(
            f"  ceiling A = {fit.params.A:.3f} ({fit.level:.0%} interval {lo:.3f}-{hi:.3f})" if fit.params else ""
        )
    tail = x > cut
    preds = fit.predict(x[tail])
    inside = np.mean([p.lo <= v <= p.hi for p, v in zip(preds, y[tail], strict=True)]) if preds else float("nan")
    mae = np.mean([abs(p.mean - v) for p, v in zip(preds, y[tail], strict=True)]) if preds else float("nan")
    last = preds[-1]
    click.echo(
        f"  forecast at the end ({last.compute:.3g} tokens): {last.mean:.3f} [{last.lo:.3f}, {last.hi:.3f}]; "
        f"actual {y[tail][-1]:.3f}"
    )
    click.echo(f"  on the {tail.sum()} held-out evaluations: mean abs error {mae:.3f}, {inside:.0%} inside the band")
    reach = compute_to_reach(fit, 0.5)
    click.echo(f"  compute to reach 0.50: {reach.compute:.3g} tokens" if reach.compute is not None else "")
    rec = recommend_run(RunState("demo", fit, compute_used=cut, budget=float(x.max())))
    click.echo(f"  recommendation at {fraction:.0%} of the budget: {rec.action.upper()} - {rec.reason}")
    html = fit_figure_html(
        x, y, fit, np.array([float(x.max())]), "demo: Qwen2.5-0.5B PPO", "generated tokens", "GSM8K pass rate"
    )
    click.echo(f"plot: {write_fit_html(out, html).resolve()}")


def register(cli: click.Group) -> None:
    cli.add_command(demo_cmd)
