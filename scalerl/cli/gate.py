"""``--fail-if`` conditions of ``scalerl submit``: parsed once, evaluated against the verdict and the runs.

Conditions: ``undecided``, ``unfinished``, ``any-failed`` (a run failed or was lost), ``best==NAME``,
``best!=NAME`` (NAME is a run name or id), ``A<X`` (the best run's fitted ceiling is below X).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
