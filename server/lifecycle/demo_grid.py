"""The grid document of the demo (the demo config's recipe and each leave-one-out variant of it, on its task and
model), built in one place for ``scalerl demo`` (which submits it) and the new-experiment form (which offers it)."""

from __future__ import annotations

from typing import Any

import yaml

#: The demo config's top-level mappings a grid document is built from.
REQUIRED_KEYS = ("recipe", "model", "task")


def flow(value: Any) -> str:
    """A mapping as the one-line YAML string that grid documents carry for task and model."""
    return str(yaml.safe_dump(value, default_flow_style=True, sort_keys=False)).strip()


def demo_document(config: dict[str, Any], budget: float, name: str, description: str) -> dict[str, Any]:
    """The demo's grid: ``config``'s recipe (``preset`` split out) and each leave-one-out variant, the config's seed,
    ``budget`` device-hours per run, on the config's task and model. ``config`` must hold :data:`REQUIRED_KEYS` as
    mappings."""
    recipe = {k: v for k, v in config["recipe"].items() if k != "preset"}
    return {
        "name": name,
        "description": description,
        "preset": config["recipe"].get("preset", "scalerl"),
        "recipe": recipe,
        "leave_one_out": True,
        "seeds": [int(config.get("seed", 0))],
        "task": flow(config["task"]),
        "model": flow(config["model"]),
        "budget": budget,
        "compute_unit": "gpu_hours",
    }
