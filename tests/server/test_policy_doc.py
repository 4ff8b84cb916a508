"""docs/decisions.md documents every policy key, and its example policy is a valid one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from server.lifecycle.grid import PolicySpec

DOC = Path(__file__).resolve().parents[2] / "docs" / "decisions.md"


def test_every_policy_key_is_documented_and_the_example_validates() -> None:
    text = DOC.read_text(encoding="utf-8")
    missing = [k for k in PolicySpec.model_fields if f"`{k}" not in text and f"{k}:" not in text]
    assert not missing, f"undocumented in docs/decisions.md: {missing}"
    example = re.search(r"```yaml\n(policy:.*?)```", text, re.S)
    assert example is not None
    spec = PolicySpec.model_validate(yaml.safe_load(example.group(1))["policy"])
    policy = spec.to_policy()
    assert policy.rules.threshold is not None and policy.rules.guards[0].metric == "train/truncation_rate"


def test_null_turns_the_noise_scaled_rules_off_and_the_fall_rule_is_passed_on() -> None:
    on = PolicySpec.model_validate({"fall_z": 3.0, "fall_margin": 0.05}).to_policy()
    assert (on.fall_z, on.fall_margin) == (3.0, 0.05)
    off = PolicySpec.model_validate({"fall_z": None, "behind_z": None}).to_policy()
    assert off.fall_z == float("inf") and off.behind_z == float("inf")


def test_seed_z_reaches_the_policy_and_null_turns_the_seed_spread_off() -> None:
    assert PolicySpec.model_validate({}).to_policy().seed_z == 2.5
    assert PolicySpec.model_validate({"seed_z": 4.0}).to_policy().seed_z == 4.0
    assert PolicySpec.model_validate({"seed_z": None}).to_policy().seed_z == float("inf")
    with pytest.raises(ValidationError, match="seed_z"):
        PolicySpec.model_validate({"seed_z": "2.5"})  # strict: a number written as a string is refused
