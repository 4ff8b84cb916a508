"""``scalerl demo``: the main job of a fresh install.

It starts the embedded all-in-one (what ``scalerl up`` starts: the server, the workers, SQLite and a broker that
needs no server), builds the CPU base model if it is not cached yet, submits a small grid of the recipe of
``configs/demo.yaml`` (the engine's CPU demo: a ~0.1M-parameter model, short sequences, small batches, synthetic
addition) and prints the dashboard's URL. ``--grid lr`` (the default) varies the learning rate around the tuned
one with stops on: its arms differ at this scale, so the verdict is decided and the stops save compute;
``--grid leave-one-out`` is the paper's ablation (near-ties here: it answers what each removed component costs).
The grid takes the config's recipe, model and task; every other
setting of the config (base checkpoint, evaluation, checkpoints) becomes the workers' engine template; only the
budget per run is the demo's own. Ctrl-C stops everything; the next ``scalerl demo`` resumes unfinished runs and
does not submit the grid twice.

``scalerl demo --offline`` needs no service and no torch: it forecasts a recorded RL run (Qwen2.5-0.5B PPO on
GSM8K, bundled in ``scalerl/examples``) from its first third and checks the forecast against the rest.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import click

from scalerl.cli.errors import fail, write_output

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "qwen2p5_0p5b_gsm8k_ppo.csv"

#: The engine's CPU demo config (model, task, recipe sizes, base checkpoint, evaluation) in a source checkout.
DEMO_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
#: Keys of a run config that the grid document or the worker sets for each run, never the engine template.
PER_RUN_KEYS = ("name", "seed", "device", "recipe", "model", "task")
HEALTH_TIMEOUT = 180.0


class DemoConfigError(ValueError):
    """The engine config the demo starts from is missing or unusable."""


def load_config(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise DemoConfigError(
            f"{path} does not exist: `scalerl demo` runs from a source checkout (make demo), or pass --config "
            "with an engine run config; `scalerl demo --offline` needs none"
        )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DemoConfigError(f"{path} is not valid YAML: {exc}") from None
    from server.lifecycle.demo_grid import REQUIRED_KEYS

    missing = [k for k in REQUIRED_KEYS if not isinstance((data or {}).get(k), dict)]
    if missing:
        raise DemoConfigError(f"{path}: needs the mappings {missing}")
    return dict(data)


def demo_document(config: dict[str, Any], budget: float | None, grid: str = "lr") -> dict[str, Any]:
    """The grid the demo submits: preset ``grid`` of :data:`server.lifecycle.demo_grid.DEMO_GRIDS` on ``config``,
    ``budget`` device-hours a run (None: the preset's)."""
    from server.lifecycle.demo_grid import DEMO_GRIDS
    from server.lifecycle.demo_grid import demo_document as build

    preset = DEMO_GRIDS[grid]
    return build(config, preset.budget if budget is None else budget, preset.name, preset.description, preset)


def engine_template(config: dict[str, Any], home: Path) -> Path:
    """Write the engine settings every demo run shares under ``home`` (the workers read SCALERL_ENGINE_TEMPLATE)."""
    import yaml

    template = {k: v for k, v in config.items() if k not in PER_RUN_KEYS}
    template["budget"] = {k: v for k, v in (template.get("budget") or {}).items() if k != "max_device_hours"}
    path = home / "demo-engine.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(template, sort_keys=False), encoding="utf-8")
    return path


def build_base_model(config: dict[str, Any], echo: Any) -> Path | None:
    """The warmed-up base checkpoint the demo runs start from: built once, then found in the cache."""
    from rl_core.contracts.run_config import parse_run_config
    from rl_core.engine.models import resolve_model_config

    cfg = parse_run_config(config, source="demo config")
    if not cfg.base_checkpoint.enabled:
        return None
    path = resolve_model_config(cfg, log=lambda line: echo(f"  base model: {line}")).path
    return None if path is None else Path(path)


def submit_when_up(url: str, home: Path, document: dict[str, Any], echo: Any, stopped: threading.Event) -> None:
    """Wait for the server, submit the grid unless it exists, and print where to watch it."""
    from scalerl.client.api import Client, ScalerlError
    from server.runtime.bootstrap import read_credentials

    deadline = time.monotonic() + HEALTH_TIMEOUT
    while not stopped.is_set():
        try:
            with Client(url, None, timeout=2, from_environment=False) as probe:
                probe.health()
            break
        except ScalerlError:
            pass
        if time.monotonic() > deadline:
            echo(f"error: the server did not answer at {url} within {HEALTH_TIMEOUT:.0f} s; see {home / 'logs'}")
            return
        time.sleep(0.5)
    token = read_credentials(home).get("token", "")
    if not token:
        echo(f"error: no API token saved in {home / 'credentials.json'}; the demo grid was not submitted")
        return
    try:
        exp_id = _submit(url, token, home, document, echo)
    except ScalerlError as exc:  # unreachable, or the answer was not JSON
        echo(f"error: could not submit the demo grid to {url}: {exc}")
        return
    if exp_id is None:
        return
    echo("")
    echo(f"  dashboard: {url}/experiments/{exp_id}#token={token}")
    echo("  (the link signs this browser in with the local admin token, then drops it from the address bar)")
    echo("")


def _submit(url: str, token: str, home: Path, document: dict[str, Any], echo: Any) -> int | None:
    """The id of the demo's experiment: found, or submitted now; ``None`` (said why) when the server refused."""
    from scalerl.client.api import ApiError, Client, detail_text

    with Client(url, token, timeout=30, from_environment=False) as api:
        try:
            found = api.find_experiment(document["name"])
        except ApiError as exc:
            why = detail_text(exc.detail)
            echo(f"error: cannot list experiments ({exc.status_code}): {why}; is {home} this server's home?")
            return None
        if found is not None:
            exp_id = found["id"]
            echo(f"the demo grid exists (experiment {exp_id}); its unfinished runs continue")
        else:
            try:
                created = api.create_experiment(document)
            except ApiError as exc:
                echo(f"error: the server refused the demo grid ({exc.status_code}): {detail_text(exc.detail)}")
                return None
            exp_id = created["id"]
            runs, budget = created["n_runs"], document["budget"]
            echo(f"submitted {runs} runs of {budget:g} device-hours each (experiment {exp_id})")
    return int(exp_id)


@click.command("demo")
@click.option("--port", type=int, default=None, help="Port of the embedded server (default 8765, or SCALERL_PORT).")
@click.option(
    "--budget",
    type=click.FloatRange(min=1e-4, max=10.0),
    default=None,
    help="Compute per run, in device-hours (on the CPU: the generator's and the trainer's CPU time; the grid's "
    "default 0.05 is about 90 s of a 2-core machine).",
)
@click.option(
    "--grid",
    type=click.Choice(["lr", "leave-one-out"]),
    default="lr",
    show_default=True,
    help="lr: learning rates around the tuned one, stops on (the arms differ at this scale: a decided verdict); "
    "leave-one-out: ScaleRL with each component removed (what each costs; near-ties at this scale).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=DEMO_CONFIG,
    show_default="configs/demo.yaml",
    help="Engine run config whose recipe, model, task and settings the demo grid uses.",
)
@click.option("--offline", is_flag=True, help="No service: forecast a bundled, recorded RL run instead.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=Path("scalerl-demo.html"),
    show_default=True,
    help="--offline: where to write the HTML plot.",
)
@click.option(
    "--fraction",
    type=click.FloatRange(0.1, 0.9),
    default=0.33,
    show_default=True,
    help="--offline: share of the recorded run the forecaster may see.",
)
def demo_cmd(
    port: int | None, budget: float | None, grid: str, config_path: Path, offline: bool, out: Path, fraction: float
) -> None:
    """Start the service and workers, submit a grid of ScaleRL on a synthetic task (learning rates around the tuned
    one, or --grid leave-one-out), and print the dashboard's URL: watch each run's forecast move as it trains, and
    the runs that cannot win stopped. Ctrl-C stops everything."""
    if offline:
        offline_demo(out, fraction)
        return
    try:
        import torch  # noqa: F401

        from worker.embedded import UpError, hold_port, run_up, stop_on_signals
    except ImportError as exc:
        fail(f"the demo needs the train, server and worker extras ({exc}); or try `scalerl demo --offline`")
    from scalerl.cli.service_cmds import _settings
    from server.runtime.bootstrap import server_url

    stop_on_signals()  # SIGTERM and SIGHUP stop the demo as Ctrl-C does, from the first line on
    settings = _settings(port=port, host="127.0.0.1")
    try:
        config = load_config(config_path)  # a wrong config is named first, whatever holds the port
    except (DemoConfigError, ValueError) as exc:
        fail(str(exc))
    # Checked and held before minutes of building the base model (and before anything prints "up"): a program
    # that takes the port during the build would otherwise fail the first run at its end. run_up releases it just
    # before the server binds it.
    try:
        held = hold_port(settings.host, settings.port)
    except UpError as exc:
        fail(str(exc))
    try:
        return _run_demo(settings, config, demo_document(config, budget, grid), server_url, run_up, UpError, held)
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
        raise SystemExit(130) from None
    finally:
        held.release()


def _run_demo(
    settings: Any,
    config: dict[str, Any],
    document: dict[str, Any],
    server_url: Any,
    run_up: Any,
    up_error: Any,
    held: Any,
) -> None:
    try:
        click.echo("building the base model if it is not cached (the config's model warmed up on its task)…")
        started = time.monotonic()
        path = build_base_model(config, click.echo)
    except (DemoConfigError, ValueError) as exc:
        fail(str(exc))
    if path is not None:
        click.echo(f"base model ready in {time.monotonic() - started:.0f} s: {path}")
    os.environ["SCALERL_ENGINE_TEMPLATE"] = str(engine_template(config, settings.home))
    stopped = threading.Event()
    submitter = threading.Thread(
        target=submit_when_up,
        args=(server_url(settings), settings.home, document, click.echo, stopped),
        name="scalerl-demo-submit",
        daemon=True,
    )
    submitter.start()
    try:
        code = run_up(settings, click.echo, stop_grace=30.0, held=held)
    except up_error as exc:
        fail(str(exc))
    finally:
        stopped.set()
    raise SystemExit(code)


def offline_demo(out: Path, fraction: float) -> None:
    """Forecast a real RL run from its first ``fraction`` and check the forecast against the rest."""
    import numpy as np

    from rl_core.scaling import compute_to_reach, fit_curve, recommend_run
    from rl_core.scaling.decide.recommend import RunState
    from rl_core.scaling.fit.summary import summarize
    from rl_core.scaling.measure.curves_io import read_curve_table
    from scalerl.plotting import fit_figure_html

    table = read_curve_table(EXAMPLE, ("cum_response_tokens_est", "val_score"))
    x, y = table.column("cum_response_tokens_est"), table.column("val_score")
    cut = float(x.max()) * fraction
    fit = fit_curve(x, y, fit_until=cut)
    click.echo(
        f"Qwen2.5-0.5B PPO on GSM8K (compute = generated tokens); fitting the first {fraction:.0%}: "
        f"{fit.n_points} points up to {cut:.3g} tokens"
    )
    click.echo(f"  {fit.status}: {fit.message}")
    a = summarize(fit).estimates["A"]
    if a.value is not None and a.lo is not None and a.hi is not None:
        click.echo(f"  ceiling A = {a.value:.3f} ({fit.level:.0%} interval {a.lo:.3f}-{a.hi:.3f})")
    tail = x > cut
    preds = fit.predict_summary(x[tail])
    inside = np.mean([p.lo <= v <= p.hi for p, v in zip(preds, y[tail], strict=True)]) if preds else float("nan")
    mae = np.mean([abs(p.mean - v) for p, v in zip(preds, y[tail], strict=True)]) if preds else float("nan")
    last = preds[-1]
    click.echo(
        f"  forecast at the end ({last.compute:.3g} tokens): {last.mean:.3f} [{last.lo:.3f}, {last.hi:.3f}]; "
        f"actual {y[tail][-1]:.3f}"
    )
    click.echo(f"  on the {tail.sum()} held-out evaluations: mean abs error {mae:.3f}, {inside:.0%} inside the band")
    reach = compute_to_reach(fit, 0.5)
    if reach.compute is not None:
        click.echo(f"  compute to reach 0.50: {reach.compute:.3g} tokens")
    rec = recommend_run(RunState("demo", fit, compute_used=cut, budget=float(x.max())))
    click.echo(f"  recommendation at {fraction:.0%} of the budget: {rec.action.upper()} - {rec.reason}")
    html = fit_figure_html(
        x, y, fit, np.array([float(x.max())]), "demo: Qwen2.5-0.5B PPO", "generated tokens", "GSM8K pass rate"
    )
    click.echo(f"plot: {write_output(out, html, '--out').resolve()}")


def register(cli: click.Group) -> None:
    cli.add_command(demo_cmd)
