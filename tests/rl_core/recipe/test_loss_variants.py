"""The tagged loss section: each loss.type holds only its own constants; recipes written before it still load."""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from rl_core.recipe import (
    LOSS_VARIANTS,
    PRESETS,
    CispoLoss,
    DapoLoss,
    GridError,
    GspoLoss,
    Recipe,
    RecipeError,
    ReinforceLoss,
    SymmetricClipLoss,
    apply_overrides,
    expand_grid,
    get_preset,
    get_value,
    leave_one_out,
    leave_one_out_overrides,
    load_recipe,
    recipe_overrides,
    recipe_to_dict,
    recipe_to_yaml,
)
from rl_core.recipe.model import FLAT_LOSS_KEYS, LossType

HERE = Path(__file__).resolve().parent
SHARED = ("type", "aggregation", "kl_coef")
#: Each type's own constants (beside the shared keys) and a non-default value for each.
OWN: dict[str, dict[str, float]] = {
    "cispo": {"eps_max": 4.0},
    "dapo": {"eps_low": 0.1, "eps_high": 0.35},
    "grpo": {"eps_low": 0.15},
    "ppo": {"eps_low": 0.15},
    "gspo": {"gspo_eps_low": 2e-4, "gspo_eps_high": 5e-4},
    "reinforce": {},
}
ALL_CONSTANTS = sorted({k for keys in OWN.values() for k in keys})


def _problems(data: object) -> dict[str, str]:
    with pytest.raises(RecipeError) as info:
        load_recipe(data)  # type: ignore[arg-type]
    return {p.key: str(p) for p in info.value.problems}


def test_every_loss_type_has_one_variant_in_the_declared_order() -> None:
    assert tuple(LOSS_VARIANTS) == typing.get_args(LossType)
    assert {t: set(cls.model_fields) - set(SHARED) for t, cls in LOSS_VARIANTS.items()} == {
        t: set(keys) for t, keys in OWN.items()
    }
    assert set(ALL_CONSTANTS) | set(SHARED) == FLAT_LOSS_KEYS


@pytest.mark.parametrize("loss_type", list(OWN))
def test_a_variant_accepts_its_own_and_the_shared_keys(loss_type: str) -> None:
    r = load_recipe({"loss": {"type": loss_type, "aggregation": "token", "kl_coef": 0.01, **OWN[loss_type]}})
    assert isinstance(r.loss, LOSS_VARIANTS[loss_type]) and r.loss.type == loss_type
    assert recipe_to_dict(r)["loss"] == {"type": loss_type, "aggregation": "token", "kl_coef": 0.01, **OWN[loss_type]}


@pytest.mark.parametrize(("loss_type", "key"), [(t, k) for t in OWN for k in ALL_CONSTANTS if k not in OWN[t]])
def test_a_key_of_another_variant_is_refused_naming_the_allowed_keys(loss_type: str, key: str) -> None:
    probs = _problems({"loss": {"type": loss_type, key: 0.1}})
    assert list(probs) == [f"loss.{key}"]
    owners = ", ".join(t for t, keys in OWN.items() if key in keys)
    allowed = ", ".join(LOSS_VARIANTS[loss_type].model_fields)
    assert probs[f"loss.{key}"] == (
        f"loss.{key}: loss.type {loss_type!r} has no key {key!r}; it is a key of loss.type {owners} "
        f"(allowed: {allowed})"
    )


def test_without_a_type_the_section_is_cispo() -> None:
    assert load_recipe({"loss": {"eps_max": 4}}).loss == CispoLoss(eps_max=4.0)
    assert "loss.type 'cispo' has no key 'eps_high'" in _problems({"loss": {"eps_high": 0.3}})["loss.eps_high"]


def test_grpo_and_ppo_share_a_variant_without_eps_high() -> None:
    assert load_recipe({"loss": {"type": "ppo", "eps_low": 0.1}}).loss == SymmetricClipLoss(type="ppo", eps_low=0.1)
    assert "it is a key of loss.type dapo" in _problems({"loss": {"type": "grpo", "eps_high": 0.3}})["loss.eps_high"]


def test_variants_are_frozen() -> None:
    with pytest.raises(Exception, match="frozen"):
        DapoLoss().eps_high = 0.5


@pytest.mark.parametrize("loss_type", list(OWN))
def test_dumps_round_trip_and_hold_only_the_variants_keys(loss_type: str) -> None:
    r = apply_overrides(Recipe(), {"loss.type": loss_type, **{f"loss.{k}": v for k, v in OWN[loss_type].items()}})
    dumped = recipe_to_dict(r)
    assert set(dumped["loss"]) == set(SHARED) | set(OWN[loss_type])
    assert load_recipe(dumped) == r
    assert load_recipe(recipe_to_yaml(r)) == r
    assert load_recipe(json.loads(json.dumps(dumped))) == r


def test_default_recipe_dump_has_only_cispo_keys() -> None:
    assert recipe_to_dict(Recipe())["loss"] == {
        "type": "cispo",
        "aggregation": "prompt",
        "kl_coef": 0.0,
        "eps_max": 5.0,
    }
    assert get_preset("scalerl") == Recipe()


# --- recipes written before the section was tagged -------------------------------------------------------------

LEGACY = json.loads((HERE / "legacy_loss_sections.json").read_text(encoding="utf-8"))


def _expected(name: str) -> Recipe:
    return get_preset(name) if name in PRESETS else leave_one_out(extended=True)[name]


def test_the_old_default_yaml_loads_as_the_same_recipe() -> None:
    text = (HERE / "legacy_scalerl.yaml").read_text(encoding="utf-8")
    assert "gspo_eps_low" in text and load_recipe(text) == Recipe()
    assert load_recipe(HERE / "legacy_scalerl.yaml") == Recipe()


@pytest.mark.parametrize("name", [n for n in LEGACY if not n.startswith("loss")])
def test_old_full_dumps_of_presets_and_leave_one_out_load_equal(name: str) -> None:
    expected = _expected(name)
    old = {**recipe_to_dict(expected), "loss": LEGACY[name]}
    assert set(old["loss"]) == FLAT_LOSS_KEYS
    assert load_recipe(old) == expected
    assert load_recipe({"preset": "scalerl", **old}) == expected  # merged over a preset of another loss type
    assert load_recipe({"preset": "qwen-dapo", **old}) == expected


def test_an_old_dump_keeps_meaning_even_with_an_ignored_value_of_another_variant() -> None:
    # A grid over loss.type x loss.eps_high stored a CISPO cell with eps_high 0.4, which CISPO never read.
    cispo = {**recipe_to_dict(Recipe()), "loss": LEGACY["loss.eps_high=0.4,seed=0"]}
    assert load_recipe(cispo) == Recipe()
    dapo = {**recipe_to_dict(Recipe()), "loss": LEGACY["loss=dapo,loss.eps_high=0.4,seed=0"]}
    assert load_recipe(dapo).loss == DapoLoss(eps_high=0.4)


def test_an_old_stored_delta_still_loads() -> None:
    # A run stored as its experiment's base (a full old dump) plus the delta [[["loss", "type"], "dapo"]].
    base = {**recipe_to_dict(Recipe()), "loss": LEGACY["scalerl"]}
    run = {**base, "loss": {**base["loss"], "type": "dapo"}}
    assert load_recipe(run) == apply_overrides(Recipe(), {"loss.type": "dapo"})
    assert load_recipe(run) == leave_one_out()["loo-loss-dapo"]


def test_only_a_complete_flat_section_counts_as_old() -> None:
    partial = {k: v for k, v in LEGACY["scalerl"].items() if k != "kl_coef"}
    probs = _problems({"loss": partial})
    assert set(probs) == {"loss.eps_low", "loss.eps_high", "loss.gspo_eps_low", "loss.gspo_eps_high"}
    # A complete flat section with an unknown key too still names the unknown key.
    assert list(_problems({"loss": {**LEGACY["scalerl"], "epsmax": 1}})) == ["loss.epsmax"]


# --- overrides, grids, dotted keys ------------------------------------------------------------------------------


def test_changing_the_type_keeps_shared_keys_and_starts_the_new_constants_at_defaults() -> None:
    base = load_recipe({"loss": {"eps_max": 8, "aggregation": "sample", "kl_coef": 0.02}})
    assert apply_overrides(base, {"loss.type": "gspo"}).loss == GspoLoss(aggregation="sample", kl_coef=0.02)
    assert apply_overrides(base, {"loss.type": "dapo", "loss.eps_high": 0.3}).loss == DapoLoss(
        eps_high=0.3, aggregation="sample", kl_coef=0.02
    )
    assert apply_overrides(base, {"loss": {"type": "reinforce"}}).loss == ReinforceLoss(
        aggregation="sample", kl_coef=0.02
    )
    # A constant both variants have carries over (dapo -> grpo keeps eps_low); dapo's eps_high does not.
    dapo = apply_overrides(Recipe(), {"loss.type": "dapo", "loss.eps_low": 0.1})
    assert apply_overrides(dapo, {"loss.type": "grpo"}).loss == SymmetricClipLoss(type="grpo", eps_low=0.1)
    # The preset key merges the same way.
    assert load_recipe({"preset": "qwen-dapo", "loss": {"type": "cispo"}}).loss == CispoLoss()
    assert load_recipe({"preset": "qwen-dapo", "loss": {"eps_high": 0.3}}).loss == DapoLoss(eps_high=0.3)


def test_overriding_a_key_of_another_variant_alone_is_refused() -> None:
    with pytest.raises(RecipeError, match=r"loss\.type 'cispo' has no key 'eps_high'"):
        apply_overrides(Recipe(), {"loss.eps_high": 0.3})
    with pytest.raises(RecipeError) as info:
        apply_overrides(Recipe(), {"loss.eps_hgh": 0.3})
    assert "did you mean 'eps_high'" in str(info.value)
    assert info.value.problems[0].allowed == (
        "type",
        "aggregation",
        "kl_coef",
        "eps_max",
        "eps_low",
        "eps_high",
        "gspo_eps_low",
        "gspo_eps_high",
    )


def test_get_value_of_a_key_the_variant_lacks_is_none() -> None:
    assert get_value(Recipe(), "loss.eps_high") is None
    assert get_value(get_preset("qwen-dapo"), "loss.eps_high") == 0.28


def test_grids_over_loss_types_and_their_constants() -> None:
    cells = expand_grid(Recipe(), {"loss.type": ["dapo", "grpo"], "loss.eps_low": [0.1, 0.2]})
    assert [c.name for c in cells] == [
        "loss=dapo,loss.eps_low=0.1,seed=0",
        "loss=dapo,loss.eps_low=0.2,seed=0",  # CISPO, the base, has no eps_low: every value differs from it
        "loss=grpo,loss.eps_low=0.1,seed=0",
        "loss=grpo,loss.eps_low=0.2,seed=0",
    ]
    assert cells[0].recipe.loss == DapoLoss(eps_low=0.1)
    for c in cells:
        assert apply_overrides(Recipe(), c.overrides) == c.recipe
    with pytest.raises(GridError) as info:
        expand_grid(Recipe(), {"loss.type": ["cispo", "dapo"], "loss.eps_high": [0.4]})
    assert "invalid grid cell (loss.type='cispo',loss.eps_high=0.4)" in str(info.value)
    assert "loss.type 'cispo' has no key 'eps_high'" in str(info.value)


def test_recipe_overrides_lists_a_changed_type_as_one_override() -> None:
    # Comparing the dumps of ScaleRL and its DAPO variant also lists DAPO's eps_low and eps_high (CISPO has none).
    for name, variant in leave_one_out(extended=True).items():
        assert recipe_overrides(Recipe(), variant) == leave_one_out_overrides(extended=True)[name]
    tuned = apply_overrides(Recipe(), {"loss.type": "dapo", "loss.eps_high": 0.3, "batch.prompts": 32})
    assert recipe_overrides(Recipe(), tuned) == {"loss.type": "dapo", "loss.eps_high": 0.3, "batch.prompts": 32}
    assert recipe_overrides(tuned, Recipe()) == {"loss.type": "cispo", "batch.prompts": 48}
    assert recipe_overrides(Recipe(), Recipe()) == {}
    for a in PRESETS:
        for b in PRESETS:
            assert apply_overrides(get_preset(a), recipe_overrides(get_preset(a), get_preset(b))) == get_preset(b)
