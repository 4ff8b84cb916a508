"""A leave-one-out grid's own question: what removing each component costs against the base recipe.

A grid document with ``leave_one_out`` makes a ``base`` run and one ``loo-<component>`` run per removed component
(times its seeds; run names ``<variant>,seed=<n>``). The verdict answers, for each component, the base against that
variant at the budget, with the very draws and P(higher) that rank the best run against the runner-up
(:func:`rl_core.scaling.decide.grid_verdict.contrast`): a recipe with seeds is valued by the mean over its seeds;
a variant the stop rules stopped keeps its forecast at the budget from where it stopped.

Findings at the verdict's ``min_confidence`` (``p`` = P(variant lower than base)):

- ``costs``: ``p`` ≥ ``min_confidence``: removing it is a clear loss, named with its difference
  ("no FP32 head: −0.074, P > 0.99");
- ``helps``: ``1 − p`` ≥ ``min_confidence``: the variant ends higher;
- ``not_shown``: neither ("no NPR: not shown to differ (−0.010, P(lower) = 0.62)");
- ``no_value``: the variant or the base has no value at the budget yet.

Computed inside the one assessment and stored with its verdict; :func:`at_confidence` only re-reads the stored
numbers at another ``min_confidence``.
"""

from __future__ import annotations

from collections.abc import Sequence

from rl_core.recipe import LEAVE_ONE_OUT
from rl_core.scaling import Recommendation
from rl_core.scaling.decide.grid_verdict import GridVerdict, contrast
from server.assess.verdict_schemas import AblationOut
from server.store.models import Run

BASE = "base"
VARIANT_PREFIX = "loo-"
SEED_SEPARATOR = ",seed="
_LABELS = {item.name: item.label or item.name for item in LEAVE_ONE_OUT}
_ORDER = {item.name: k for k, item in enumerate(LEAVE_ONE_OUT)}


def variant_of(name: str) -> str:
    """The variant a leave-one-out run belongs to: its name before ``,seed=``."""
    return name.split(SEED_SEPARATOR, 1)[0]


def _signed(d: float) -> str:
    return f"{'−' if d < 0 else '+'}{abs(d):.3f}"


def _p(p: float) -> str:
    return "P > 0.99" if p > 0.99 else f"P = {p:.2f}"


def ablations(
    decided: Sequence[tuple[Run, Recommendation]], grid: GridVerdict, min_confidence: float
) -> list[AblationOut]:
    """Each leave-one-out variant of the experiment against its base (empty unless it has a ``base`` run and at
    least one ``loo-`` run); ``grid``'s indices are positions in ``decided``."""
    groups: dict[str, list[int]] = {}
    for i, (run, _) in enumerate(decided):
        groups.setdefault(variant_of(run.name), []).append(i)
    base = groups.pop(BASE, [])
    variants = sorted((k for k in groups if k.startswith(VARIANT_PREFIX)), key=lambda k: (_ORDER.get(k, 99), k))
    if not base or not variants:
        return []
    out = []
    for name in variants:
        idx = groups[name]
        c = contrast(grid, idx, base)
        entry = AblationOut(
            component=name,
            label=_LABELS.get(name, name),
            runs=[decided[i][0].name for i in idx],
            difference=None if c is None else c.difference,
            probability_lower=None if c is None else 1.0 - c.p_higher,
            basis="none" if c is None else c.basis,
            finding="no_value",
            text="",
        )
        out.append(at_confidence(entry, min_confidence))
    return out


def at_confidence(a: AblationOut, min_confidence: float) -> AblationOut:
    """The finding and line of a stored ablation at ``min_confidence`` (pure)."""
    if a.difference is None or a.probability_lower is None:
        return a.model_copy(update={"finding": "no_value", "text": f"{a.label}: no value at the budget yet"})
    observed = " (observed)" if a.basis == "observed" else ""
    p_lower = a.probability_lower
    if p_lower >= min_confidence:
        return a.model_copy(
            update={"finding": "costs", "text": f"{a.label}: {_signed(a.difference)}, {_p(p_lower)}{observed}"}
        )
    if 1.0 - p_lower >= min_confidence:
        text = f"{a.label}: {_signed(a.difference)} (ends higher without it), {_p(1.0 - p_lower)}{observed}"
        return a.model_copy(update={"finding": "helps", "text": text})
    text = f"{a.label}: not shown to differ ({_signed(a.difference)}, P(lower) = {p_lower:.2f})"
    return a.model_copy(update={"finding": "not_shown", "text": text})


def summary(items: Sequence[AblationOut]) -> str | None:
    """The ablations in one line, the clear losses first (``None`` without any)."""
    if not items:
        return None
    rank = {"costs": 0, "helps": 1, "not_shown": 2, "no_value": 3}
    ordered = sorted(items, key=lambda a: (rank[a.finding], a.difference if a.difference is not None else 0.0))
    return "removing each component, against the base recipe at the budget: " + "; ".join(a.text for a in ordered)
