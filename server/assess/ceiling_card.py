"""Ceiling or efficiency? Every run against a reference, read from the same fits as the runs table.

Reference: the leave-one-out ``base`` run of the same seed when the experiment has one, else the run with the highest
identified ceiling. The paper's question is answered from the table's posterior (no refit of its own):

- either ceiling not identified (on the A = 1 bound, or the point fit outside its interval): *unknown*, and the card
  says so instead of showing a number;
- the ceilings differ by more than the policy's ``ceiling_margin`` and P(A_run > A_ref) is at least ``CONFIDENT``
  (or at most 1 − it): a *ceiling* effect;
- the ceilings differ by more than the margin but P(A_run > A_ref) is between 1 − ``CONFIDENT`` and ``CONFIDENT``:
  *not shown to differ* (never "no difference");
- otherwise the ceilings are the same within the margin, and the run is *more (less) efficient* when it reaches
  half of its gain at less (more) compute, P(C_mid_run < C_mid_ref) ≥ ``CONFIDENT`` (≤ 1 − it); else *none*.

Invariant: every A, B and difference on the card equals the runs table's (the same :class:`RunAssessment`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rl_core.recipe import RecipeError, dotted, load_recipe, recipe_overrides
from rl_core.scaling import CurveFit
from server.assess.schemas import Comparison, ComparisonOut, RunAssessment
from server.lifecycle.recipes import effective_recipe
from server.store.models import Run

MAX_ROWS = 60
BASE_PREFIX = "base,"
#: The probability a difference must reach on the card.
CONFIDENT = 0.9
_PAIRING_SEED = 20261126


def recipe_changes(run: dict[str, Any] | None, reference: dict[str, Any] | None) -> dict[str, Any]:
    """Dotted keys where ``run``'s settings differ from ``reference``'s, with the run's values. Two recipes are told
    apart by :func:`~rl_core.recipe.recipe_overrides` (a changed ``loss.type`` is one change, not also the new type's
    constants, which the other type's section does not have); anything else (a run's own ``config``, a recipe that
    does not load) key by key."""
    mine, theirs = dict(run or {}), dict(reference or {})
    mine_config, their_config = mine.pop("config", None), theirs.pop("config", None)
    changes = _recipe_changes(mine, theirs)
    own_mine, own_theirs = dotted({"config": mine_config or {}}), dotted({"config": their_config or {}})
    changes.update({k: v for k, v in own_mine.items() if own_theirs.get(k) != v})
    return changes


def _recipe_changes(mine: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    if mine and theirs:
        try:
            return recipe_overrides(load_recipe(theirs), load_recipe(mine))
        except RecipeError:
            pass
    flat_mine, flat_theirs = dotted(mine), dotted(theirs)
    return {k: v for k, v in flat_mine.items() if flat_theirs.get(k) != v}


def run_settings(run: Run) -> dict[str, Any]:
    """What a comparison tells runs apart by: the run's recipe, and its own ``config`` under ``config.`` (runs you
    train yourself describe themselves there)."""
    settings = dict(effective_recipe(run) or {})
    if run.config:
        settings["config"] = dict(run.config)
    return settings


def _reference(runs: Sequence[Run], table: Mapping[int, RunAssessment], seed: int | None) -> tuple[Run | None, str]:
    bases = [r for r in runs if r.name.startswith(BASE_PREFIX)]
    if bases:
        same_seed = [r for r in bases if r.seed == seed]
        return (same_seed or bases)[0], "base"
    usable = [r for r in runs if table[r.id].ceiling_identified and table[r.id].A is not None]
    if not usable:
        return None, "none"
    return max(usable, key=lambda r: float(table[r.id].A or 0.0)), "best"


def _p_greater(a: np.ndarray, b: np.ndarray) -> float:
    """P(a > b) over independent draws (each shuffled by its own permutation: fits share a random stream)."""
    rng = np.random.default_rng(_PAIRING_SEED)
    n = min(a.size, b.size)
    return float(np.mean(rng.permutation(a)[:n] > rng.permutation(b)[:n]))


def _row(
    run: Run, ref: Run, fits: Mapping[int, CurveFit], table: Mapping[int, RunAssessment], margin: float
) -> Comparison:
    mine, theirs = table[run.id], table[ref.id]
    values: dict[str, Any] = {
        "run_id": run.id,
        "run_name": run.name,
        "changes": recipe_changes(run_settings(run), run_settings(ref)),
        "A_diff": None,
        "probability_higher": None,
        "A_ref": theirs.A,
        "A_run": mine.A,
        "B_ref": theirs.B,
        "B_run": mine.B,
    }

    def row(effect: str, direction: str, reason: str, **kw: Any) -> Comparison:
        return Comparison.model_validate({**values, "effect": effect, "direction": direction, "reason": reason, **kw})

    fa, fb = fits[run.id], fits[ref.id]
    for who, entry, fit in ((run, mine, fa), (ref, theirs, fb)):
        if fit.params is None or fit.status != "ok":
            return row("unknown", "unknown", f"no usable fit for {who.name}: {fit.message}", A_ref=None, A_run=None)
        if not entry.ceiling_identified:
            return row(
                "unknown",
                "unknown",
                f"the ceiling of {who.name} is not identified yet (A on the bound or outside its interval): "
                "not compared",
                A_ref=None if who is ref else theirs.A,
                A_run=None if who is run else mine.A,
            )
    sa, sb = fa.samples, fb.samples
    diff = float(mine.A or 0.0) - float(theirs.A or 0.0)
    if sa is None or sb is None:
        return row("unknown", "unknown", "fits without posterior draws cannot be compared", A_diff=diff)
    p_higher = _p_greater(sa.A, sb.A)
    kw = {"A_diff": diff, "probability_higher": p_higher}
    if abs(diff) > margin and (p_higher >= CONFIDENT or p_higher <= 1 - CONFIDENT):
        better = diff > 0
        return row(
            "ceiling",
            "better" if better else "worse",
            f"ceiling {'higher' if better else 'lower'} by {abs(diff):.3f} (> margin {margin:g}); "
            f"P(A higher) = {p_higher:.2f}",
            **kw,
        )
    if abs(diff) > margin:  # a gap beyond the margin that the posterior does not support: say so, not "no difference"
        return row(
            "not_shown",
            "unknown",
            f"ceilings not shown to differ: ΔA = {diff:+.3f} but P(A higher) = {p_higher:.2f} "
            f"(a difference needs ≥ {CONFIDENT:g} or ≤ {1 - CONFIDENT:.1f}); efficiency not compared while the "
            "ceilings may differ",
            **kw,
        )
    p_sooner = _p_greater(sb.C_mid, sa.C_mid)
    same = f"ceilings within {margin:g} (ΔA = {diff:+.3f}, P(A higher) = {p_higher:.2f})"
    if p_sooner >= CONFIDENT or p_sooner <= 1 - CONFIDENT:
        better = p_sooner >= CONFIDENT
        return row(
            "efficiency",
            "better" if better else "worse",
            f"{same}; reaches half its gain at {'less' if better else 'more'} compute "
            f"(C_mid {mine.C_mid:.3g} vs {theirs.C_mid:.3g}, P = {max(p_sooner, 1 - p_sooner):.2f})",
            **kw,
        )
    return row("none", "same", f"{same}; efficiency indistinguishable (P(C_mid lower) = {p_sooner:.2f})", **kw)


def build_comparison(
    experiment_id: int,
    runs: Sequence[Run],
    fits: Mapping[int, CurveFit],
    table: Mapping[int, RunAssessment],
    margin: float,
    fit_label: str,
) -> ComparisonOut:
    first_ref, kind = _reference(runs, table, None)
    others = [r for r in runs if first_ref is None or r.id != first_ref.id]
    rows: list[Comparison] = []
    for run in others[:MAX_ROWS]:
        ref, _ = _reference(runs, table, run.seed)
        if ref is None or ref.id == run.id:
            continue
        rows.append(_row(run, ref, fits, table, margin))
    return ComparisonOut(
        experiment_id=experiment_id,
        reference_id=None if first_ref is None else first_ref.id,
        reference_name=None if first_ref is None else first_ref.name,
        reference_kind=kind,  # type: ignore[arg-type]
        margin=margin,
        rows=rows,
        skipped=max(0, len(others) - MAX_ROWS),
        fit=fit_label,
    )
