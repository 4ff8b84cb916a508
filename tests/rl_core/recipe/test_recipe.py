"""The recipe model: defaults, validation errors that name the key, loading, round trips."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rl_core.recipe import (
    INTERRUPTION_PHRASE,
    CispoLoss,
    Recipe,
    RecipeError,
    apply_overrides,
    get_value,
    load_recipe,
    recipe_digest,
    recipe_to_yaml,
)


def test_defaults_are_the_paper_scalerl_recipe() -> None:
    r = Recipe()
    assert r.loss == CispoLoss(eps_max=5.0, aggregation="prompt", kl_coef=0.0)
    assert r.advantage.normalization == "batch"
    assert r.filters.zero_variance == "drop"
    assert r.curriculum.no_positive_resampling and r.curriculum.pass_rate_threshold == 0.9
    assert r.length.mode == "interruption"
    assert (r.length.interruption.budget_min, r.length.interruption.budget_max) == (10_240, 12_288)
    assert r.length.interruption.answer_budget == 2_048
    assert r.length.interruption.phrase == INTERRUPTION_PHRASE
    assert INTERRUPTION_PHRASE == "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"
    assert r.precision.fp32_lm_head
    assert (r.pipeline.mode, r.pipeline.k) == ("pipeline", 8)
    assert (r.batch.prompts, r.batch.generations, r.batch.size) == (48, 16, 768)
    assert (r.optimizer.lr, r.optimizer.eps, r.optimizer.weight_decay) == (5e-7, 1e-15, 0.01)
    assert (r.schedule.type, r.schedule.warmup_steps) == ("constant", 100)


def test_recipe_is_frozen_and_hashable() -> None:
    r = Recipe()
    with pytest.raises(Exception, match="frozen"):
        r.loss.type = "dapo"
    assert hash(r) == hash(Recipe())


def _problems(data: object) -> dict[str, str]:
    with pytest.raises(RecipeError) as info:
        load_recipe(data)  # type: ignore[arg-type]
    return {p.key: str(p) for p in info.value.problems}


def test_unknown_key_is_named_with_allowed_keys_and_a_suggestion() -> None:
    probs = _problems({"loss": {"epsmax": 4}})
    assert list(probs) == ["loss.epsmax"]
    text = probs["loss.epsmax"]
    assert "unknown key 'epsmax'" in text and "did you mean 'eps_max'" in text
    assert "for loss.type 'cispo'" in text and text.endswith("(allowed: type, aggregation, kl_coef, eps_max)")


def test_unknown_top_level_section() -> None:
    probs = _problems({"lsos": {}})
    assert "did you mean 'loss'" in probs["lsos"]
    assert "batch" in probs["lsos"]


def test_bad_literal_lists_allowed_values() -> None:
    probs = _problems({"loss": {"type": "sgd"}, "pipeline": {"mode": "async"}})
    assert set(probs) == {"loss.type", "pipeline.mode"}
    assert "'sgd' is not allowed" in probs["loss.type"]
    assert "allowed: cispo, dapo, grpo, ppo, gspo, reinforce" in probs["loss.type"]
    assert "allowed: pipeline, ppo_off_policy, sync" in probs["pipeline.mode"]


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"batch": {"prompts": "many"}}, "batch.prompts", "valid integer"),
        ({"batch": {"prompts": 0}}, "batch.prompts", "greater than 0"),
        ({"batch": {"prompts": True}}, "batch.prompts", "got a boolean"),
        ({"batch": {"generations": 1}}, "batch.generations", "greater than or equal to 2"),
        ({"loss": {"type": "dapo", "eps_low": 1.5}}, "loss.eps_low", "less than 1"),
        ({"loss": {"type": "gspo", "gspo_eps_high": -1}}, "loss.gspo_eps_high", "greater than or equal to 0"),
        ({"loss": {"aggregation": "mean"}}, "loss.aggregation", "allowed: token, sample, prompt"),
        ({"loss": 5}, "loss", "a section must be a mapping"),
        ({"optimizer": {"lr": -1}}, "optimizer.lr", "greater than 0"),
        ({"curriculum": {"pass_rate_threshold": 1.2}}, "curriculum.pass_rate_threshold", "less than or equal"),
        ({"length": {"interruption": {"budget_min": 13000}}}, "length.interruption", "budget_min (13000)"),
        ({"length": {"max_response_tokens": 4000}}, "length", "exceeds max_response_tokens"),
        ({"schedule": {"type": "cosine"}}, "schedule", "needs total_steps"),
        ({"precision": {"fp32_lm_head": "maybe"}}, "precision.fp32_lm_head", "allowed: true, false"),
        ({"batch": {"prompts": 2**70}}, "batch.prompts", "less than or equal to 2147483647"),
        ({"batch": {"generations": 2**40}}, "batch.generations", "less than or equal to 2147483647"),
        ({"optimizer": {"lr": float("inf")}}, "optimizer.lr", "finite number"),
        ({"optimizer": {"weight_decay": float("nan")}}, "optimizer.weight_decay", "finite number"),
    ],
)
def test_ill_typed_values_name_their_key(data: dict[str, object], key: str, fragment: str) -> None:
    probs = _problems(data)
    assert key in probs, probs
    assert fragment in probs[key]


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(RecipeError) as info:
        load_recipe({"loss": {"type": "x"}, "batch": {"prompts": -1}, "nope": 1})
    assert set(info.value.keys) == {"loss.type", "batch.prompts", "nope"}
    assert isinstance(info.value, ValueError)


def test_sync_mode_normalises_k() -> None:
    assert load_recipe({"pipeline": {"mode": "sync", "k": 8}}).pipeline.k == 1
    assert load_recipe({"pipeline": {"mode": "ppo_off_policy", "k": 4}}).pipeline.k == 4


def test_yaml_round_trip_and_preset_key(tmp_path: Path) -> None:
    r = apply_overrides(Recipe(), {"loss.type": "dapo", "batch.prompts": 32, "optimizer.betas": [0.9, 0.95]})
    assert load_recipe(recipe_to_yaml(r)) == r
    f = tmp_path / "r.yaml"
    f.write_text("preset: qwen-dapo\nbatch:\n  prompts: 32\n")
    loaded = load_recipe(f)
    assert loaded.loss.type == "dapo" and loaded.filters.zero_variance == "dynamic_sampling"
    assert loaded.batch.prompts == 32
    assert load_recipe(str(f)) == loaded
    assert load_recipe("") == Recipe()


def test_yaml_errors_are_recipe_errors() -> None:
    with pytest.raises(RecipeError, match="not valid YAML"):
        load_recipe("loss: [unclosed")
    with pytest.raises(RecipeError, match="must be a mapping"):
        load_recipe("- a\n- b\n")
    with pytest.raises(RecipeError, match="unknown preset 'nope'"):
        load_recipe({"preset": "nope"})
    with pytest.raises(RecipeError, match="does not exist"):
        load_recipe("missing/recipe.yaml")


def test_json_schema_is_standard_for_forms() -> None:
    schema = Recipe.model_json_schema()
    batch = schema["$defs"]["BatchConfig"]["properties"]
    assert batch["prompts"] == {
        "default": 48,
        "exclusiveMinimum": 0,
        "maximum": 2**31 - 1,
        "title": "Prompts",
        "type": "integer",
    }
    loss = schema["properties"]["loss"]
    assert loss["discriminator"]["propertyName"] == "type"
    assert loss["discriminator"]["mapping"]["ppo"] == loss["discriminator"]["mapping"]["grpo"]
    assert loss["default"] == {"type": "cispo", "aggregation": "prompt", "kl_coef": 0.0, "eps_max": 5.0}
    cispo = schema["$defs"]["CispoLoss"]
    assert cispo["properties"]["type"]["const"] == "cispo" and cispo["additionalProperties"] is False
    assert set(cispo["properties"]) == {"type", "aggregation", "kl_coef", "eps_max"}


def test_overrides_validate_keys_and_values() -> None:
    r = apply_overrides(Recipe(), {"length.interruption": {"budget_min": 5000}})
    assert r.length.interruption.budget_min == 5000 and r.length.interruption.budget_max == 12_288
    with pytest.raises(RecipeError) as info:
        apply_overrides(Recipe(), {"loss.tpye": "dapo", "batch.prompts.x": 1})
    assert info.value.keys == ("loss.tpye", "batch.prompts.x")
    assert "did you mean 'type'" in str(info.value)
    assert "is a value, not a section" in str(info.value)


def test_digest_is_stable_and_value_based() -> None:
    a = apply_overrides(Recipe(), {"batch.prompts": 32})
    b = load_recipe({"batch": {"prompts": "32"}})
    assert a == b and recipe_digest(a) == recipe_digest(b) == recipe_digest(a)
    assert len(recipe_digest(a)) == 12 and recipe_digest(a) != recipe_digest(Recipe())
    # The digest is a pure function of values: recompute it in a fresh interpreter.
    code = (
        "from rl_core.recipe import Recipe, apply_overrides, recipe_digest; "
        "print(recipe_digest(apply_overrides(Recipe(), {'batch.prompts': 32})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == recipe_digest(a)


def test_get_value_reads_dotted_keys() -> None:
    assert get_value(Recipe(), "loss.type") == "cispo"
    assert get_value(Recipe(), "optimizer.betas") == [0.9, 0.999]
    assert get_value(Recipe(), "length.interruption")["answer_budget"] == 2048


def test_importing_the_recipe_package_does_not_import_torch() -> None:
    code = (
        "import sys, rl_core.recipe as r; r.expand_grid(r.Recipe(), {'loss.type': ['dapo']}); "
        "r.leave_one_out(); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
