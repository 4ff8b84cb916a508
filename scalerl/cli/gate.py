"""The CI gate of ``scalerl submit --wait`` and ``scalerl wait``: ``--fail-if`` conditions (parsed once, evaluated
against the verdict and the runs) and the exit code a wait ends with. The verdict is the service's
(``GET /experiments/{id}/verdict``: the decision's leader, undecided at low confidence); nothing here re-decides.

Conditions: ``undecided``, ``unfinished``, ``any-failed`` (a run failed or was lost), ``best==NAME``,
``best!=NAME`` (NAME is a run name or id), ``A<X`` (the best run's fitted ceiling is below X).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scalerl.cli.exit_codes import EXIT_CONDITION, EXIT_OK, EXIT_TIMEOUT, EXIT_UNDECIDED

KEYWORDS = ("undecided", "unfinished", "any-failed")
FORMS = (*KEYWORDS, "best==NAME", "best!=NAME", "A<X")


class ConditionError(ValueError):
    """A ``--fail-if`` value that is not one of :data:`FORMS`."""


@dataclass(frozen=True)
class Condition:
    text: str
    kind: str
    value: str = ""

    def holds(self, verdict: Mapping[str, Any], statuses: Sequence[str]) -> bool:
        best_name, best_id = verdict.get("best_run_name"), verdict.get("best_run_id")
        if self.kind == "undecided":
            return not verdict.get("decided", False)
        if self.kind == "unfinished":
            return not verdict.get("finished", False)
        if self.kind == "any-failed":
            return any(s in ("failed", "lost") for s in statuses)
        is_best = self.value in (best_name, str(best_id))
        if self.kind == "best==":
            return is_best
        if self.kind == "best!=":
            return not is_best
        ranking = verdict.get("ranking") or []
        a = ranking[0].get("A") if ranking and best_id is not None else None
        return a is None or a < float(self.value)


def parse_condition(text: str) -> Condition:
    t = text.strip()
    if t in KEYWORDS:
        return Condition(t, t)
    for op in ("best==", "best!="):
        if t.startswith(op) and t[len(op) :].strip():
            return Condition(t, op, t[len(op) :].strip())
    if t.startswith("A<"):
        try:
            x = float(t[2:])
        except ValueError:
            x = math.nan
        if math.isfinite(x):
            return Condition(t, "A<", str(x))
    raise ConditionError(f"--fail-if {text!r} is not a condition; allowed: {', '.join(FORMS)}")


def needs_statuses(conditions: Sequence[Condition]) -> bool:
    """True when a condition reads the runs' statuses (only then are the runs listed)."""
    return any(c.kind == "any-failed" for c in conditions)


def outcome(
    verdict: Mapping[str, Any], statuses: Sequence[str], conditions: Sequence[Condition], timed_out: bool
) -> tuple[int, str | None]:
    """The exit code of a wait and its one-line reason (None for success), in this order: a ``--fail-if`` condition
    holds (1), the verdict is decided (0), every run finished undecided (4), the wait timed out (3)."""
    held = [c.text for c in conditions if c.holds(verdict, statuses)]
    if held:
        return EXIT_CONDITION, f"fail-if: {', '.join(held)}"
    if verdict.get("decided"):
        return EXIT_OK, None
    if verdict.get("finished"):
        return EXIT_UNDECIDED, f"undecided: every run finished and the verdict is not decided ({verdict.get('reason')})"
    if timed_out:
        return EXIT_TIMEOUT, "timed out without a decision"
    raise ValueError("outcome() of a wait that neither ended nor timed out")
