"""docs/algorithms.md documents every recipe key, preset and leave-one-out name."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel

from rl_core.recipe import LEAVE_ONE_OUT, PRESETS, Recipe

DOC = Path(__file__).resolve().parents[3] / "docs" / "algorithms.md"


def _leaf_keys(cls: type[BaseModel], prefix: str = "") -> list[str]:
    """Every dotted key; a tagged section (a union of models, ``loss``) contributes every variant's keys."""
    keys: list[str] = []
    for name, field in cls.model_fields.items():
        ann = field.annotation
        models = [a for a in typing.get_args(ann) if isinstance(a, type) and issubclass(a, BaseModel)]
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            models = [ann]
        for model in models:
            keys += [k for k in _leaf_keys(model, f"{prefix}{name}.") if k not in keys]
        if not models:
            keys.append(prefix + name)
    return keys


def test_every_recipe_key_preset_and_loo_name_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [k for k in _leaf_keys(Recipe) if f"`{k}`" not in text]
    missing += [p for p in PRESETS if f"`{p}`" not in text]
    missing += [i.name for i in LEAVE_ONE_OUT if f"`{i.name}`" not in text]
    assert not missing, f"undocumented in docs/algorithms.md: {missing}"
