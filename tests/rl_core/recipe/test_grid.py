"""Grid expansion: ids, names, overrides, duplicate collapse, cap and errors."""

from __future__ import annotations

import pytest

from rl_core.recipe import GridError, GridTooLargeError, Recipe, apply_overrides, expand_grid, get_preset


def test_product_order_names_and_overrides() -> None:
    cells = expand_grid(Recipe(), {"loss.type": ["cispo", "dapo"], "batch.prompts": [48, 32]}, seeds=[0, 1])
    assert [c.name for c in cells] == [
        "seed=0",
        "seed=1",
        "batch.prompts=32,seed=0",
        "batch.prompts=32,seed=1",
        "loss=dapo,seed=0",
        "loss=dapo,seed=1",
        "loss=dapo,batch.prompts=32,seed=0",
        "loss=dapo,batch.prompts=32,seed=1",
    ]
    base = Recipe()
    for c in cells:
        assert apply_overrides(base, c.overrides) == c.recipe
        assert len(c.id) == 12 and int(c.id, 16) >= 0
    assert cells[6].overrides == {"loss.type": "dapo", "batch.prompts": 32}
    assert len({c.id for c in cells}) == len(cells)


def test_ids_are_stable_and_depend_on_recipe_and_seed() -> None:
    a = expand_grid(Recipe(), {"loss.type": ["dapo"]}, seeds=[3])
    b = expand_grid(Recipe(), {"loss.type": ["dapo"]}, seeds=[3])
    c = expand_grid(Recipe(), {"loss.type": ["dapo"]}, seeds=[4])
    assert a[0].id == b[0].id != c[0].id
    # The same concrete recipe reached from another base gets the same id.
    d = expand_grid(apply_overrides(get_preset("scalerl"), {"loss.type": "dapo"}), {}, seeds=[3])
    assert d[0].id == a[0].id and d[0].name == "seed=3"


def test_duplicates_collapse_keeping_the_first() -> None:
    cells = expand_grid(
        Recipe(), {"pipeline.mode": ["sync"], "pipeline.k": [4, 8], "batch.prompts": [48, "48"]}, seeds=[0, 0]
    )
    assert len(cells) == 1
    assert cells[0].name == "pipeline.mode=sync,pipeline.k=1,seed=0"
    assert cells[0].recipe.pipeline.k == 1


def test_float_and_list_values_render_compactly() -> None:
    cells = expand_grid(Recipe(), {"optimizer.lr": [1e-6], "optimizer.betas": [[0.9, 0.95]]})
    assert cells[0].name == "optimizer.lr=1e-06,optimizer.betas=[0.9,0.95],seed=0"


def test_cap_is_checked_before_building_anything() -> None:
    huge = {"batch.prompts": list(range(1, 1001)), "optimizer.lr": [1e-6] * 1000}
    with pytest.raises(GridTooLargeError) as info:
        expand_grid(Recipe(), huge, seeds=[0, 1], max_runs=500)
    assert info.value.requested == 2_000_000 and info.value.max_runs == 500
    assert "more than the cap of 500" in str(info.value)
    assert len(expand_grid(Recipe(), {"batch.prompts": [1, 2, 3]}, seeds=[0, 1], max_runs=6)) == 6
    with pytest.raises(GridTooLargeError):
        expand_grid(Recipe(), {"batch.prompts": [1, 2, 3]}, seeds=[0, 1], max_runs=5)


def test_bad_axes_raise_typed_errors_naming_the_key() -> None:
    with pytest.raises(GridError) as info:
        expand_grid(Recipe(), {"loss.typ": ["dapo"], "nope.x": [1]})
    assert info.value.keys == ("loss.typ", "nope")
    assert "did you mean 'type'" in str(info.value)
    with pytest.raises(GridError) as info:
        expand_grid(Recipe(), {"loss.type": ["dapo", "adam"]})
    assert info.value.keys == ("loss.type",)
    assert "'adam' is not allowed" in str(info.value) and "allowed: cispo" in str(info.value)
    assert "loss.type='adam'" in str(info.value)
    with pytest.raises(GridError, match="batch: Input should be a valid dictionary"):
        expand_grid(Recipe(), {"batch": [1]})
    assert expand_grid(Recipe(), {"batch": [{"prompts": 8}]})[0].recipe.batch.prompts == 8
    with pytest.raises(GridError, match="at least one value"):
        expand_grid(Recipe(), {"loss.type": []})
    with pytest.raises(GridError, match="must be a list"):
        expand_grid(Recipe(), {"loss.type": "dapo"})
    with pytest.raises(GridError, match="at least one seed"):
        expand_grid(Recipe(), {}, seeds=[])
    with pytest.raises(GridError, match="integers"):
        expand_grid(Recipe(), {}, seeds=[True])
    with pytest.raises(GridError, match="max_runs"):
        expand_grid(Recipe(), {}, max_runs=0)


def test_base_may_be_a_mapping_with_a_preset() -> None:
    cells = expand_grid({"preset": "minimax"}, {"loss.type": ["cispo", "dapo"]})
    assert [c.name for c in cells] == ["seed=0", "loss=dapo,seed=0"]
    assert cells[0].recipe == get_preset("minimax")
    assert cells[0].model_dump(mode="json")["recipe"]["loss"]["type"] == "cispo"
