"""docs/api.md's exit-code table and scalerl/cli/exit_codes.py agree: every constant documented with its value,
nothing documented that the code lacks."""

from __future__ import annotations

import re
from pathlib import Path

from scalerl.cli import exit_codes

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def documented() -> dict[str, int]:
    section = DOC.read_text().split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\d+) \| `(EXIT_[A-Z_]+)` \|", section, re.M)
    return {name: int(code) for code, name in rows}


def test_every_documented_exit_code_is_the_constant_and_every_constant_is_documented() -> None:
    in_code = {name: value for name, value in vars(exit_codes).items() if name.startswith("EXIT_")}
    assert len(in_code) >= 8 and documented() == in_code


def test_the_commands_help_states_the_same_codes() -> None:
    from scalerl.cli.ci_cmds import submit_cmd, wait_cmd

    for command in (submit_cmd, wait_cmd):
        text = " ".join((command.help or "").split())
        for code, words in ((3, "timed out"), (4, "undecided"), (5, "unreachable"), (6, "token")):
            assert re.search(rf"\b{code} [^,.]*{words}", text), (command.name, code)
