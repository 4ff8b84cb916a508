"""Leave-one-out variants: revert one ScaleRL choice at a time to the alternative the paper compared it with.

Names are stable (they are part of the public contract and appear in run names):

    loo-loss-dapo                 loss.type            cispo      -> dapo
    loo-no-fp32-head              precision.fp32_lm_head true     -> false
    loo-aggregation-sample        loss.aggregation     prompt     -> sample
    loo-advantage-norm-group      advantage.normalization batch   -> group
    loo-no-zero-variance-filter   filters.zero_variance drop      -> none
    loo-no-npr                    curriculum.no_positive_resampling true -> false
  extended=True adds:
    loo-length-penalty            length.mode          interruption -> overlong_penalty
    loo-ppo-off-policy            pipeline.mode        pipeline   -> ppo_off_policy

Invariant: a variant is produced only when the input recipe uses ScaleRL's choice for that component, so every
variant differs from its input in exactly the listed key(s); ``loo-loss-dapo``'s loss section is DAPO's variant
(its own constants at their defaults, CISPO's ``eps_max`` gone), with the shared keys of the input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rl_core.recipe.model import Recipe
from rl_core.recipe.paths import apply_overrides, get_value


@dataclass(frozen=True)
class LeaveOneOut:
    """One component: the key that selects it, ScaleRL's value, and the alternative to revert to."""

    name: str
    key: str
    scalerl_value: Any
    alternative: Any
    extended: bool = False
    label: str = ""
    """What the variant removes, for people (the verdict's leave-one-out lines)."""


LEAVE_ONE_OUT: tuple[LeaveOneOut, ...] = (
    LeaveOneOut("loo-loss-dapo", "loss.type", "cispo", "dapo", label="DAPO loss, no CISPO"),
    LeaveOneOut("loo-no-fp32-head", "precision.fp32_lm_head", True, False, label="no FP32 head"),
    LeaveOneOut("loo-aggregation-sample", "loss.aggregation", "prompt", "sample", label="sample aggregation"),
    LeaveOneOut("loo-advantage-norm-group", "advantage.normalization", "batch", "group", label="group advantage norm"),
    LeaveOneOut(
        "loo-no-zero-variance-filter", "filters.zero_variance", "drop", "none", label="no zero-variance filter"
    ),
    LeaveOneOut("loo-no-npr", "curriculum.no_positive_resampling", True, False, label="no NPR"),
    LeaveOneOut(
        "loo-length-penalty", "length.mode", "interruption", "overlong_penalty", extended=True, label="overlong penalty"
    ),
    LeaveOneOut(
        "loo-ppo-off-policy", "pipeline.mode", "pipeline", "ppo_off_policy", extended=True, label="PPO off-policy"
    ),
)


def leave_one_out(recipe: Recipe | None = None, *, extended: bool = False) -> dict[str, Recipe]:
    """Leave-one-out variants of ``recipe`` (default: ScaleRL), keyed by stable name, in a fixed order.

    The six paper components are always considered; ``extended=True`` adds length control and the off-policy
    algorithm. Components where ``recipe`` does not use ScaleRL's choice are skipped.
    """
    base = recipe if recipe is not None else Recipe()
    out: dict[str, Recipe] = {}
    for item in LEAVE_ONE_OUT:
        if item.extended and not extended:
            continue
        if get_value(base, item.key) != item.scalerl_value:
            continue
        out[item.name] = apply_overrides(base, {item.key: item.alternative})
    return out


def leave_one_out_overrides(*, extended: bool = False) -> Mapping[str, Mapping[str, Any]]:
    """The override applied by each leave-one-out variant, by name (for display and for grids)."""
    return {i.name: {i.key: i.alternative} for i in LEAVE_ONE_OUT if extended or not i.extended}
