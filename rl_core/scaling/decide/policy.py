"""The decision policy: every threshold of the recommendations, the optional rules as blocks (``behind``, ``rung``,
``resume``, ``fall``; ``None`` turns one off), and the flat names of earlier documents read into their blocks in one
place. A pydantic dataclass: constructing one (or ``dataclasses.replace``) validates every bound, so a policy that
exists is a valid one. Defaults are documented in docs/decisions.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.dataclasses import dataclass as config_dataclass
from pydantic_core import ArgsKwargs

from rl_core.scaling.decide.rules import Divergence, Guard, Patience, Rules, Threshold
from rl_core.scaling.fit.calibration import Comparison
from rl_core.scaling.fit.questions import CEILING_MARGIN
from rl_core.scaling.fit.summary import MAX_CEILING_WIDTH

#: Strict numbers (no string or bool for a number), unknown names refused: the same object validates a grid
#: document's ``policy`` at the service's edge and is what the decision code reads.
_CONFIG = ConfigDict(extra="forbid", use_attribute_docstrings=True)
_Fraction = Annotated[float, Field(ge=0.0, le=1.0, strict=True)]
_Positive = Annotated[float, Field(gt=0.0, strict=True)]
"""A noise multiplier: ``inf`` (``None`` in a document) turns its rule off."""
_Z = Annotated[float, Field(gt=0.0, allow_inf_nan=False, strict=True)]
"""A rule block's noise multiplier: finite (the block set to ``None`` turns its rule off)."""


def _finite_z(value: object, block: str) -> object:
    """A block's z of ``null`` or ``inf`` (how a flat z turned its rule off) is refused with how to turn it off."""
    if value is None or (isinstance(value, float) and math.isinf(value)):
        raise ValueError(
            f"z must be a finite number > 0; to turn the rule off, set the block itself to null ({block}: null)"
        )
    return value


@config_dataclass(frozen=True, config=_CONFIG)
class BehindRule:
    """Grid comparison without a forecast (:mod:`.matched_compute`): stop a run trailing another at equal compute by
    more than ``margin`` + ``z`` × the grid's evaluation noise × √(2/``points``)."""

    z: _Z = 2.5
    """The noise multiplier of that threshold."""
    margin: _Fraction = 0.02
    """The margin of that rule (pass rate)."""
    points: Annotated[int, Field(ge=1, le=20, strict=True)] = 2
    """The run's level is its mean over its last this many evaluations."""

    @field_validator("z", mode="before")
    @classmethod
    def _z_is_finite(cls, value: object) -> object:
        return _finite_z(value, "behind")


@config_dataclass(frozen=True, config=_CONFIG)
class RungRule:
    """Successive halving at equal compute (:mod:`.rungs`): at rungs η^-k of the budget (1/9 and 1/3 for η = 3),
    stop a run when more than max(1, n // η) of the n recipes at the rung stand above it by more than ``margin``."""

    eta: Annotated[float, Field(ge=2.0, le=10.0, strict=True)] = 3.0
    """The reduction factor η."""
    margin: _Fraction = 0.01
    """The margin of that rule (pass rate)."""


@config_dataclass(frozen=True, config=_CONFIG)
class ResumeRule:
    """Freeze-thaw (:mod:`.resume`): resume a run the grid comparison stopped when its value at the budget stands
    above the best rival's with probability at least ``p``, its expected gain over that rival is at least ``gain``,
    and the policy has resumed it fewer than ``max_resumes`` times."""

    p: Annotated[float, Field(gt=0.0, le=1.0, strict=True)] = 0.5
    """The probability the run's value at the budget must stand above the best rival's with."""
    gain: _Fraction = 0.01
    """The least expected gain over that rival at the budget (above ``min_expected_gain``, so a run cannot both
    "not matter" and be resumed on the same numbers: without this gap, near-ties were stopped and resumed again and
    again)."""
    max_resumes: Annotated[int, Field(ge=0, le=100, strict=True)] | None = 2
    """How many times the policy may resume one run (``None``: no limit). Each resume costs a restart from a
    checkpoint and pushes the grid's end later; a near-tie that keeps flipping is not worth a third."""


@config_dataclass(frozen=True, config=_CONFIG)
class FallRule:
    """A run whose recent level is below its peak by more than ``margin`` + ``z`` × the grid's evaluation noise ×
    √(2/3) has fallen (:mod:`.fallen`): its forecast at the budget is capped at its recent level, so a collapsing
    run neither stops others nor keeps them stopped."""

    z: _Z = 2.5
    """The noise multiplier of that threshold."""
    margin: _Fraction = 0.02
    """The margin of that rule (pass rate)."""

    @field_validator("z", mode="before")
    @classmethod
    def _z_is_finite(cls, value: object) -> object:
        return _finite_z(value, "fall")


#: The flat names a policy document had for the optional rules' settings before they were blocks: flat name ->
#: (block, setting). Still read (:func:`nest_flat_rule_keys`), never written.
FLAT_RULE_KEYS: dict[str, tuple[str, str]] = {
    "behind_z": ("behind", "z"),
    "behind_margin": ("behind", "margin"),
    "behind_points": ("behind", "points"),
    "rung_eta": ("rung", "eta"),
    "rung_margin": ("rung", "margin"),
    "p_resume": ("resume", "p"),
    "resume_gain": ("resume", "gain"),
    "max_resumes": ("resume", "max_resumes"),
    "fall_z": ("fall", "z"),
    "fall_margin": ("fall", "margin"),
}
#: Each block's flat switch: ``null`` turned the rule off (and ``inf`` for a z).
FLAT_SWITCHES = {"behind": "behind_z", "rung": "rung_eta", "resume": "p_resume", "fall": "fall_z"}
#: The optional rules' blocks, by their field name in :class:`Policy`.
RULE_BLOCKS: dict[str, type] = {"behind": BehindRule, "rung": RungRule, "resume": ResumeRule, "fall": FallRule}


def _switched_off(value: object) -> bool:
    return value is None or (isinstance(value, float) and value == math.inf)


def nest_flat_rule_keys(document: Mapping[str, Any]) -> dict[str, Any]:
    """A policy mapping with the flat names of :data:`FLAT_RULE_KEYS` moved into their blocks: a flat switch set to
    ``null`` (or a z to ``inf``) is the block set to ``None`` (its other flat settings meant nothing then: they are
    checked, as they always were, and dropped); other flat settings are the block's settings, the rest at their
    defaults. Raises ``ValueError`` when a block and one of its flat names are both given."""
    flat = [k for k in document if k in FLAT_RULE_KEYS]
    if not flat:
        return dict(document)
    out = {k: v for k, v in document.items() if k not in FLAT_RULE_KEYS}
    for block in dict.fromkeys(FLAT_RULE_KEYS[k][0] for k in flat):
        names = [k for k in flat if FLAT_RULE_KEYS[k][0] == block]
        if block in document:
            given = ", ".join(f"`{k}`" for k in names)
            settings = ", ".join(f"{FLAT_RULE_KEYS[k][1]}: ..." for k in names)
            raise ValueError(
                f"`{block}` and the flat {given} are both given: write the rule once, either as the block "
                f"`{block}: {{{settings}}}` (`{block}: null` turns it off) or with the flat names alone"
            )
        switch = FLAT_SWITCHES[block]
        if switch in document and _switched_off(document[switch]):
            out[block] = None
            _check_settings(block, {FLAT_RULE_KEYS[k][1]: document[k] for k in names if k != switch})
        else:
            out[block] = {FLAT_RULE_KEYS[k][1]: document[k] for k in names}
    return out


def _check_settings(block: str, settings: Mapping[str, Any]) -> None:
    """Refuse a setting of a rule turned off that is out of its bounds (a document that says ``rung_eta: null,
    rung_margin: 5`` is as wrong as before the rules were blocks)."""
    try:
        RULE_BLOCKS[block](**settings)
    except ValidationError as e:
        flat = {v: k for k, v in FLAT_RULE_KEYS.items()}
        problems = "; ".join(
            f"{flat.get((block, str(err['loc'][0])), err['loc'][0]) if err['loc'] else block}: {err['msg']}"
            for err in e.errors()
        )
        raise ValueError(problems) from None


@config_dataclass(frozen=True, config=_CONFIG)
class Policy:
    """Thresholds of the recommendations (pass rates are absolute, in [0, 1]). A pydantic dataclass: constructing
    one (or ``dataclasses.replace``) validates every bound, so a policy that exists is a valid one."""

    min_gain: _Fraction = 0.01
    """Stop when even the optimistic end of the band says the remaining budget buys less than this."""
    scale_factor: Annotated[float, Field(gt=1.0, le=1000.0, strict=True)] = 2.0
    """Scaling is judged by the gain from ``budget`` to ``scale_factor`` × budget."""
    scale_gain: _Fraction = 0.02
    """Recommend scaling when that gain is at least this (and its lower end is positive)."""
    ceiling_margin: _Fraction = CEILING_MARGIN
    """Runs whose A differ by less than this have the same ceiling (the paper's ±0.02)."""
    max_ceiling_width: Annotated[float, Field(gt=0.0, le=1.0, strict=True)] = MAX_CEILING_WIDTH
    """A fit whose interval for A is wider than this has not identified its ceiling: ``unstable``."""
    value_margin: _Fraction = 0.01
    """Grid comparison: a run is dominated when its value at the budget is below another's by more than this."""
    p_stop: Annotated[float, Field(gt=0.5, lt=1.0, strict=True)] = 0.9
    """... with at least this posterior probability."""
    min_expected_gain: _Fraction = 0.004
    """Grid comparison: a run whose expected gain over the leader at the budget is below this cannot matter."""
    hold: Annotated[int, Field(ge=1, le=10, strict=True)] = 2
    """A forecast-based stop must hold on this many consecutive evaluations."""
    min_fraction: _Fraction = 0.1
    """No forecast-based stop before a run has used this fraction of its budget."""
    min_live: Annotated[int, Field(ge=0, le=1000, strict=True)] = 1
    """The grid comparison never stops the last this many live runs."""
    behind: BehindRule | None = BehindRule()
    """Grid comparison without a forecast: stop a run trailing another at equal compute by more than ``margin`` +
    ``z`` × the grid's evaluation noise × √(2/``points``), its level the mean of its last ``points`` evaluations
    (:class:`BehindRule`; ``None``: off)."""
    rung: RungRule | None = RungRule()
    """Successive halving at equal compute (:mod:`.rungs`): at rungs η^-k of the budget (1/9 and 1/3 for ``eta`` η
    = 3), stop a run when more than max(1, n // η) of the n recipes at the rung stand above it by more than
    ``margin`` (:class:`RungRule`; ``None``: off)."""
    seed_z: _Positive = 2.5
    """Both equal-compute rules (behind, rung), where the grid has seeds of one recipe: a gap must also exceed
    ``seed_z`` × the spread between seeds at that compute, × √2 between two runs and × √(1/n_a + 1/n_b) between
    two recipes' means over n_a and n_b seeds. When a seed takes off varies, the spread is far above the evaluation
    noise, and a gap within it ranks seeds, not recipes (``inf``: off)."""
    forecast_comparison: Comparison = "calibrated"
    """Which draws of the value at the budget runs are compared on (:mod:`rl_core.scaling.fit.calibration`):
    ``"calibrated"`` the calibrated forecast draws the pages summarise; ``"blended"`` the same centre (the sigmoid
    blended with the power law) with the posterior's own spread (the drift the band's calibration covers is largely
    shared by a grid's runs); ``"raw"`` the sigmoid's raw posterior, for the pages too (before 2026-11-27). The
    value and interval a run shows are the calibrated ones unless ``"raw"``."""
    resume: ResumeRule | None = ResumeRule()
    """Freeze-thaw (:mod:`.resume`): resume a run the grid comparison stopped when its value at the budget stands
    above the best rival's with probability at least ``p``, its expected gain over that rival at the budget is at
    least ``gain`` (above ``min_expected_gain``) and the policy has resumed it fewer than ``max_resumes`` times
    (:class:`ResumeRule`; ``None``: off, a stopped run stays stopped)."""
    fall: FallRule | None = FallRule()
    """A run whose recent level is below its peak by more than ``margin`` + ``z`` × the grid's evaluation noise ×
    √(2/3) has fallen (:mod:`.fallen`): its forecast at the budget is capped at its recent level, so a collapsing
    run neither stops others nor keeps them stopped (:class:`FallRule`; ``None``: off)."""
    compute_target: Annotated[float, Field(gt=0.0, le=1.0, strict=True)] | None = None
    """The one knob that trades compute for risk (:mod:`.compute_target`): about what fraction of the grid's compute
    (every run to its budget = 1) the grid may spend. 0.5 is the rules alone; above it every stop waits longer and
    needs more evidence (1: only clearly worse runs stopped, from 93% of the budget), below it a
    successive-halving-shaped schedule stops the runs ranked lowest by value at the budget, the leader never.
    ``None``: the rules alone. A target, not a guarantee (docs/decisions.md, "One knob", has what each setting spent
    and risked on the replays)."""
    target_keep_p: _Fraction | None = None
    """With ``compute_target`` below 0.5: a run whose value at the budget stands above the top-ranked run's with at
    least this probability (their draws paired) is not stopped by the target, whatever its rank (``None``: 0.2)."""
    target_start: _Fraction | None = None
    """With ``compute_target`` below 0.5: the schedule starts at this fraction of the budget, and its stops alone may
    come before ``min_fraction`` (``None``: 1/27, ASHA's smallest minimum resource)."""
    max_work_spread: Annotated[float, Field(gt=1.0, le=100.0, strict=True)] | None = 1.2
    """The verdict's check on the work each run got for its compute (:mod:`.work_spread`): when the runs' steps per
    compute unit (their latest points') differ by more than this ratio (max / min), the verdict warns, and it is not
    decided unless the best run's lead holds at equal work (``None``: off)."""
    rank_replicates: Annotated[bool, Field(strict=True)] = False
    """Grid comparison: rank seeds of one recipe against each other (off: a run is compared with other recipes
    only, since the gap between its own seeds is noise)."""
    threshold: Threshold | None = None
    """Observed-value rules (:mod:`.rules`), all off by default: stop a run below a pass rate ..."""
    patience: Patience | None = None
    """... with no new best in some evaluations ..."""
    divergence: Divergence | None = None
    """... fallen from its best ..."""
    guards: Annotated[tuple[Guard, ...], Field(max_length=10)] = ()
    """... or with a training metric over a bound (e.g. the truncation rate)."""

    @model_validator(mode="before")
    @classmethod
    def _flat_rule_keys(cls, data: Any) -> Any:
        """The optional rules' old flat names (:data:`FLAT_RULE_KEYS`) read into their blocks, here only: in a
        document and as keyword arguments alike."""
        if isinstance(data, ArgsKwargs) and data.kwargs and any(k in FLAT_RULE_KEYS for k in data.kwargs):
            return ArgsKwargs(data.args, nest_flat_rule_keys(data.kwargs))
        if isinstance(data, Mapping) and any(k in FLAT_RULE_KEYS for k in data):
            return nest_flat_rule_keys(data)
        return data

    @field_validator("seed_z", mode="before")
    @classmethod
    def _null_is_off(cls, value: object) -> object:
        return math.inf if value is None else value

    @field_validator("guards", mode="before")
    @classmethod
    def _guards_tuple(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @property
    def rules(self) -> Rules:
        """The observed-value rules, as :func:`.rules.check_rules` reads them."""
        return Rules(self.threshold, self.patience, self.divergence, self.guards)

    def guard_metrics(self) -> tuple[str, ...]:
        """The training metrics the guards read (loaded for each run before deciding)."""
        return tuple(g.metric for g in self.guards)
