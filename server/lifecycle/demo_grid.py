"""The demo's grids (the demo config's recipe on its task and model), built in one place for ``scalerl demo`` (which
submits one) and the new-experiment form (which offers them).

Two presets, chosen by measurement (``bench/demo_grid.py``; docs/benchmarks.md, "The demo's grid"):

- ``lr``: the default. The recipe at learning rates around the tuned one (10x lower, 3x and 10x higher). At this
  scale the arms differ for real (every arm run to its full budget on three seeds), so the demo reaches a decided
  verdict and its stops save compute: it shows what scalerl is for.
- ``leave-one-out``: ScaleRL and each variant with one component removed (the paper's ablation). At the demo's scale
  most arms tie with the base recipe; the verdict answers what each removed component costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

#: The demo config's top-level mappings a grid document is built from.
REQUIRED_KEYS = ("recipe", "model", "task")


@dataclass(frozen=True)
class DemoGrid:
    """One demo preset: its experiment name, what it shows, its budget per run (device-hours), and either grid axes
    (dotted recipe keys → values) or a leave-one-out of the recipe; ``policy`` is the grid document's."""

    key: str
    name: str
    description: str
    budget: float
    axes: Mapping[str, list[Any]] = field(default_factory=dict)
    leave_one_out: bool = False
    policy: Mapping[str, Any] = field(default_factory=lambda: {"mode": "auto_stop"})


DEMO_GRIDS: dict[str, DemoGrid] = {
    "lr": DemoGrid(
        key="lr",
        name="demo-learning-rate",
        description=(
            "scalerl demo: ScaleRL on a synthetic task with a tiny model on CPU at four learning rates (the tuned "
            "one first, then 10x lower, 3x and 10x higher); auto_stop stops the runs that cannot win"
        ),
        budget=0.05,
        # The tuned rate first: the runs train one after another, and the incumbent is what the others are
        # stopped against (with it last, every earlier run trains to its budget with nothing to compare to).
        axes={"optimizer.lr": [1.0e-4, 1.0e-5, 3.0e-4, 1.0e-3]},
    ),
    "leave-one-out": DemoGrid(
        key="leave-one-out",
        name="demo-leave-one-out",
        description="scalerl demo: ScaleRL leave-one-out on a synthetic task with a tiny model on CPU",
        budget=0.05,
        leave_one_out=True,
        policy={"mode": "recommend"},
    ),
}
DEFAULT_DEMO = "lr"


def flow(value: Any) -> str:
    """A mapping as the one-line YAML string that grid documents carry for task and model."""
    return str(yaml.safe_dump(value, default_flow_style=True, sort_keys=False)).strip()


def demo_document(
    config: dict[str, Any],
    budget: float,
    name: str,
    description: str,
    grid: DemoGrid | None = None,
) -> dict[str, Any]:
    """The grid document of ``grid`` (default: the leave-one-out preset's shape): ``config``'s recipe (``preset``
    split out), the config's seed, ``budget`` device-hours per run, on the config's task and model. ``config`` must
    hold :data:`REQUIRED_KEYS` as mappings."""
    grid = grid or DEMO_GRIDS["leave-one-out"]
    recipe = {k: v for k, v in config["recipe"].items() if k != "preset"}
    doc: dict[str, Any] = {
        "name": name,
        "description": description,
        "preset": config["recipe"].get("preset", "scalerl"),
        "recipe": recipe,
        "seeds": [int(config.get("seed", 0))],
        "task": flow(config["task"]),
        "model": flow(config["model"]),
        "budget": budget,
        "compute_unit": "gpu_hours",
        "policy": dict(grid.policy),
    }
    if grid.leave_one_out:
        doc["leave_one_out"] = True
    else:
        doc["grid"] = {k: list(v) for k, v in grid.axes.items()}
    return doc


def grid_arms(config: dict[str, Any], key: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, full recipe) of every arm of preset ``key`` on ``config`` (one seed), as the service expands them."""
    from server.lifecycle.grid import expand, parse_document

    grid = DEMO_GRIDS[key]
    doc = parse_document(demo_document(config, grid.budget, grid.name, grid.description, grid))
    return [(run.name.rsplit(",seed=", 1)[0], run.recipe) for run in expand(doc)]
