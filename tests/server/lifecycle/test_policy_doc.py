"""docs/decisions.md documents every policy key, and its example policy is a valid one; the optional rules' old flat
names are read into their blocks, once, and never beside them."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from rl_core.scaling.decide.policy import FLAT_RULE_KEYS, FallRule
from server.lifecycle.grid import PolicySpec, parse_policy, policy_document, policy_key

DOC = Path(__file__).resolve().parents[3] / "docs" / "decisions.md"


def test_every_policy_key_is_documented_and_the_example_validates() -> None:
    text = DOC.read_text(encoding="utf-8")
    names = [f.name for f in dataclasses.fields(PolicySpec)]
    missing = [k for k in names if f"`{k}" not in text and f"{k}:" not in text]
    assert not missing, f"undocumented in docs/decisions.md: {missing}"
    example = re.search(r"```yaml\n(policy:.*?)```", text, re.S)
    assert example is not None
    policy = parse_policy(yaml.safe_load(example.group(1))["policy"])
    assert policy.rules.threshold is not None and policy.rules.guards[0].metric == "train/truncation_rate"


def test_null_turns_a_rule_off_and_the_fall_rule_is_passed_on() -> None:
    on = parse_policy({"fall": {"z": 3.0, "margin": 0.05}})
    assert on.fall == FallRule(z=3.0, margin=0.05)
    off = parse_policy({"fall": None, "behind": None, "rung": None, "resume": None})
    assert (off.fall, off.behind, off.rung, off.resume) == (None, None, None, None)
    assert parse_policy({}) == PolicySpec() and PolicySpec().fall == FallRule()  # every rule on by default


#: Documents with the optional rules' old flat names (as stored before the rules were blocks) and their nested form.
FLAT_AND_NESTED = [
    ({}, {}),
    ({"fall_z": 3.0, "fall_margin": 0.05}, {"fall": {"z": 3.0, "margin": 0.05}}),
    ({"fall_z": None, "behind_z": None}, {"fall": None, "behind": None}),
    ({"behind_z": float("inf"), "fall_z": float("inf")}, {"behind": None, "fall": None}),
    ({"behind_margin": 0.03, "behind_points": 3}, {"behind": {"margin": 0.03, "points": 3}}),
    ({"rung_eta": None, "rung_margin": 0.02}, {"rung": None}),  # the margin of a rule that is off means nothing
    ({"rung_eta": 4.0}, {"rung": {"eta": 4.0}}),
    ({"p_resume": None, "resume_gain": 0.02}, {"resume": None}),
    ({"p_resume": 0.6, "max_resumes": None}, {"resume": {"p": 0.6, "max_resumes": None}}),
    (
        {"mode": "auto_stop", "p_stop": 0.8, "resume_gain": 0.03},
        {"mode": "auto_stop", "p_stop": 0.8, "resume": {"gain": 0.03}},
    ),
]


@pytest.mark.parametrize(("flat", "nested"), FLAT_AND_NESTED)
def test_a_flat_document_and_its_nested_form_are_one_policy(flat: dict[str, Any], nested: dict[str, Any]) -> None:
    policy = parse_policy(flat)
    assert policy == parse_policy(nested)
    assert policy_key(policy) == policy_key(parse_policy(nested))
    assert PolicySpec(**flat) == PolicySpec(**nested) == policy  # keyword arguments are read the same way
    document = policy_document(policy)
    assert not set(document) & set(FLAT_RULE_KEYS)  # written with blocks only
    assert parse_policy(document) == policy  # and read back as the same policy
    assert parse_policy(json.loads(json.dumps(document))) == policy


def test_the_full_stored_form_of_an_old_experiment_reads_as_the_defaults() -> None:
    """An experiment created before the rules were blocks stored every key of its policy, flat (the grid document's
    dump): it reads as today's default policy, under the same key as an empty document."""
    stored = {
        "min_gain": 0.01, "scale_factor": 2.0, "scale_gain": 0.02, "ceiling_margin": 0.02, "max_ceiling_width": 0.25,
        "value_margin": 0.01, "p_stop": 0.9, "min_expected_gain": 0.004, "hold": 2, "min_fraction": 0.1, "min_live": 1,
        "behind_z": 2.5, "behind_margin": 0.02, "behind_points": 2, "rung_eta": 3.0, "rung_margin": 0.01,
        "seed_z": 2.5, "forecast_comparison": "calibrated", "p_resume": 0.5, "resume_gain": 0.01, "max_resumes": 2,
        "fall_z": 2.5, "fall_margin": 0.02, "compute_target": None, "target_keep_p": None, "target_start": None,
        "max_work_spread": 1.2, "rank_replicates": False, "threshold": None, "patience": None, "divergence": None,
        "guards": [], "mode": "recommend",
    }  # fmt: skip
    assert parse_policy(stored) == PolicySpec()
    assert policy_key(parse_policy(stored)) == policy_key(parse_policy({})) == "{}"


@pytest.mark.parametrize(
    ("document", "names"),
    [
        ({"rung": {"eta": 3.0}, "rung_margin": 0.02}, ["`rung`", "`rung_margin`"]),
        ({"resume": None, "p_resume": 0.6, "max_resumes": 1}, ["`resume`", "`p_resume`", "`max_resumes`"]),
        ({"fall": {"z": 3.0}, "fall_z": None}, ["`fall`", "`fall_z`"]),
        ({"behind": None, "behind_points": 3}, ["`behind`", "`behind_points`"]),
    ],
)
def test_a_block_beside_its_flat_names_is_refused(document: dict[str, Any], names: list[str]) -> None:
    with pytest.raises(ValidationError) as err:
        parse_policy(document)
    assert all(n in str(err.value) for n in names) and "both given" in str(err.value)


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ({"behind": {"z": None}}, ["behind.z", "behind: null"]),  # a block's z is never the way to turn it off
        ({"fall": {"z": float("inf")}}, ["fall.z", "fall: null"]),
        ({"rung": {"eta": 1.0}}, ["rung.eta", "greater than or equal to 2"]),
        ({"rung_eta": 1.0}, ["rung.eta", "greater than or equal to 2"]),
        ({"rung": {"η": 3}}, ["rung.η", "Unexpected"]),
        ({"rung_eta": None, "rung_margin": 5}, ["rung_margin", "less than or equal to 1"]),  # checked, as before
        ({"resume": 0.5}, ["resume", "ResumeRule"]),
        ({"resume": {"max_resumes": 1.5}}, ["resume.max_resumes", "integer"]),
    ],
)
def test_a_bad_rule_setting_says_what_is_wrong(document: dict[str, Any], says: list[str]) -> None:
    with pytest.raises(ValidationError) as err:
        parse_policy(document)
    assert all(s in str(err.value) for s in says), str(err.value)


def test_seed_z_reaches_the_policy_and_null_turns_the_seed_spread_off() -> None:
    assert parse_policy({}).seed_z == 2.5
    assert parse_policy({"seed_z": 4.0}).seed_z == 4.0
    assert parse_policy({"seed_z": None}).seed_z == float("inf")
    with pytest.raises(ValidationError, match="seed_z"):
        parse_policy({"seed_z": "2.5"})  # strict: a number written as a string is refused
