"""docs/decisions.md documents every policy key, and its example policy is a valid one."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from server.grid import PolicySpec

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
