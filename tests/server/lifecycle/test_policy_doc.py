"""docs/decisions.md documents every policy key, and its example policy is a valid one."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from server.lifecycle.grid import PolicySpec, parse_policy

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


def test_null_turns_the_noise_scaled_rules_off_and_the_fall_rule_is_passed_on() -> None:
    on = parse_policy({"fall_z": 3.0, "fall_margin": 0.05})
    assert (on.fall_z, on.fall_margin) == (3.0, 0.05)
    off = parse_policy({"fall_z": None, "behind_z": None})
    assert off.fall_z == float("inf") and off.behind_z == float("inf")


def test_seed_z_reaches_the_policy_and_null_turns_the_seed_spread_off() -> None:
    assert parse_policy({}).seed_z == 2.5
    assert parse_policy({"seed_z": 4.0}).seed_z == 4.0
    assert parse_policy({"seed_z": None}).seed_z == float("inf")
    with pytest.raises(ValidationError, match="seed_z"):
        parse_policy({"seed_z": "2.5"})  # strict: a number written as a string is refused
