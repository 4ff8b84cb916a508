"""Named presets and leave-one-out variants."""

from __future__ import annotations

import pytest

from rl_core.recipe import (
    PRESETS,
    DapoLoss,
    Recipe,
    RecipeError,
    get_preset,
    leave_one_out,
    leave_one_out_overrides,
    recipe_digest,
    recipe_to_dict,
)


def test_preset_names_and_scalerl_is_the_default() -> None:
    assert PRESETS == ("scalerl", "deepseek-grpo", "qwen-dapo", "magistral", "minimax")
    assert get_preset("scalerl") == Recipe()
    assert len({recipe_digest(get_preset(n)) for n in PRESETS}) == len(PRESETS)


def test_unknown_preset_lists_the_names() -> None:
    with pytest.raises(RecipeError) as info:
        get_preset("grpo")
    assert info.value.problems[0].allowed == PRESETS


@pytest.mark.parametrize(
    ("name", "loss", "agg", "norm", "zero_var", "length", "fp32", "pipeline"),
    [
        ("deepseek-grpo", "grpo", "sample", "group", "none", "none", False, "ppo_off_policy"),
        ("qwen-dapo", "dapo", "prompt", "group", "dynamic_sampling", "overlong_penalty", False, "ppo_off_policy"),
        ("magistral", "dapo", "prompt", "batch", "drop", "overlong_penalty", False, "pipeline"),
        ("minimax", "cispo", "prompt", "group", "none", "none", True, "ppo_off_policy"),
    ],
)
def test_preset_choices(
    name: str, loss: str, agg: str, norm: str, zero_var: str, length: str, fp32: bool, pipeline: str
) -> None:
    r = get_preset(name)
    got = (
        r.loss.type,
        r.loss.aggregation,
        r.advantage.normalization,
        r.filters.zero_variance,
        r.length.mode,
        r.precision.fp32_lm_head,
        r.pipeline.mode,
    )
    assert got == (loss, agg, norm, zero_var, length, fp32, pipeline)
    assert not r.curriculum.no_positive_resampling
    assert r.batch == Recipe().batch and r.optimizer == Recipe().optimizer


def test_leave_one_out_of_scalerl_has_stable_names_and_single_differences() -> None:
    loo = leave_one_out()
    assert list(loo) == [
        "loo-loss-dapo",
        "loo-no-fp32-head",
        "loo-aggregation-sample",
        "loo-advantage-norm-group",
        "loo-no-zero-variance-filter",
        "loo-no-npr",
    ]
    base = recipe_to_dict(Recipe())
    overrides = leave_one_out_overrides()
    for name, recipe in loo.items():
        (key, value), *_ = overrides[name].items()
        section, field = key.split(".")
        mine = recipe_to_dict(recipe)
        assert {s for s in base if mine[s] != base[s]} == {section}, name
        assert mine[section][field] == value
        if key == "loss.type":
            # A new loss type is that variant with its own constants at their defaults; the shared keys stay.
            assert recipe.loss == DapoLoss(aggregation=Recipe().loss.aggregation, kl_coef=Recipe().loss.kl_coef)
        else:
            assert {f for f in base[section] if mine[section][f] != base[section][f]} == {field}, name


def test_extended_leave_one_out_and_non_scalerl_inputs() -> None:
    ext = leave_one_out(extended=True)
    assert list(ext)[-2:] == ["loo-length-penalty", "loo-ppo-off-policy"]
    assert ext["loo-length-penalty"].length.mode == "overlong_penalty"
    # qwen-dapo already differs from ScaleRL almost everywhere: only aggregation is left to revert.
    assert list(leave_one_out(get_preset("qwen-dapo"), extended=True)) == ["loo-aggregation-sample"]
