"""The grid document (one schema for the API, the CLI and the web form) and its expansion into runs.

Recipes are validated and expanded by ``rl_core.recipe`` only; this module adds the experiment-level fields
(task, model, budget, seeds, policy). Invariant: :func:`expand` either returns every run of the document or
raises :class:`GridDocumentError` naming every problem, before anything is stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic.dataclasses import dataclass as config_dataclass

from rl_core.recipe import (
    DEFAULT_MAX_RUNS,
    RecipeError,
    expand_grid,
    get_value,
    leave_one_out,
    load_recipe,
    recipe_overrides,
    recipe_to_dict,
)
from rl_core.recipe.grid import cell_name
from rl_core.scaling import FitOptions, Policy
from rl_core.scaling.decide.policy import FLAT_RULE_KEYS, FLAT_SWITCHES, RULE_BLOCKS
from rl_core.scaling.fit.prior import ShapePrior
from server.base.safeinput import unstorable
from server.base.types import Budget, Name, Seed, Text

#: Longest run name (the database column holds 300 characters; a grid cell's name lists its values).
MAX_RUN_NAME = 300


def _policy_schema(schema: dict[str, Any]) -> None:
    """The document's policy schema says what each key means (the docstrings of :class:`rl_core.scaling.Policy`'s
    fields), that ``null`` turns ``seed_z`` off, and that the optional rules' old flat names are still read
    (deprecated: each is a setting of its block, :data:`~rl_core.scaling.decide.policy.FLAT_RULE_KEYS`)."""
    meanings = TypeAdapter(Policy).json_schema()["properties"]
    properties = schema.get("properties", {})
    for name, prop in properties.items():
        if "description" in meanings.get(name, {}):
            prop.setdefault("description", meanings[name]["description"])
        if name == "seed_z":
            prop["anyOf"] = [{"type": "number", "exclusiveMinimum": 0.0}, {"type": "null"}]
            prop.pop("type", None)
            prop.pop("exclusiveMinimum", None)
    for flat, (block, setting) in FLAT_RULE_KEYS.items():
        setting_schema = TypeAdapter(RULE_BLOCKS[block]).json_schema()["properties"][setting]
        prop = {k: v for k, v in setting_schema.items() if k not in ("default", "title", "description")}
        switch = flat in FLAT_SWITCHES.values()
        if switch and "anyOf" not in prop:  # null (or inf) turned the rule off
            prop = {"anyOf": [prop, {"type": "null"}]}
        off = f"; `null`: `{block}: null`" if switch else ""
        prop.update(
            deprecated=True,
            description=f"The old flat name of `{block}.{setting}`, still read (never beside `{block}`{off}).",
        )
        properties[flat] = prop


@config_dataclass(
    frozen=True, config=ConfigDict(extra="forbid", use_attribute_docstrings=True, json_schema_extra=_policy_schema)
)
class PolicySpec(Policy):
    """A grid document's ``policy``: the decision's numbers are :class:`rl_core.scaling.Policy`'s own fields, bounds
    and defaults (docs/decisions.md; an optional rule's block set to ``null`` turns it off; the blocks' old flat names
    are read by ``Policy`` itself), validated here once and read as they are by the decision code; ``mode`` says how
    the recommendations are used: ``recommend`` only reports them, ``auto_stop`` also stops the runs told to stop."""

    mode: Literal["recommend", "auto_stop"] = "recommend"

    @model_validator(mode="after")
    def _resume_apart_from_stop(self) -> PolicySpec:
        rule = self.resume
        if rule is not None and rule.p <= 1.0 - self.p_stop:
            raise ValueError(
                f"resume.p ({rule.p:g}; p_resume in a flat document) must be above 1 - p_stop ({1.0 - self.p_stop:g}), "
                "else a run could be stopped and resumed on the same numbers"
            )
        if rule is not None and rule.gain <= self.min_expected_gain:
            raise ValueError(
                f"resume.gain ({rule.gain:g}; resume_gain in a flat document) must be above min_expected_gain "
                f"({self.min_expected_gain:g}), else a run could be stopped as one that cannot matter and resumed on "
                "the same numbers"
            )
        return self


_POLICY = TypeAdapter(PolicySpec)


def parse_policy(document: Mapping[str, Any]) -> PolicySpec:
    """A stored or submitted ``policy`` mapping as the policy the decisions read (raises ``ValidationError``); the
    optional rules' old flat names (a policy stored before the rules were blocks) are read into their blocks."""
    return _POLICY.validate_python(document)


def policy_document(policy: PolicySpec) -> dict[str, Any]:
    """The policy as an experiment's document keeps it: only what differs from the defaults (a rule block set to
    ``null``: that rule off; ``seed_z`` ``null``: off), the rules as blocks."""
    out: dict[str, Any] = json.loads(_POLICY.dump_json(policy, exclude_defaults=True))  # inf -> null
    return out


def policy_key(policy: PolicySpec) -> str:
    """The policy as one canonical string: equal for equal policies, whatever form their documents had (the rules'
    old flat names or blocks, defaults written out or left out)."""
    return json.dumps(policy_document(policy), sort_keys=True)


Pair = Annotated[list[Annotated[float, Field(allow_inf_nan=False)]], Field(min_length=2, max_length=2)]


class ShapePriorDoc(BaseModel):
    """A shape prior as ``scalerl prior build`` writes it (paste the file's JSON as is): a Gaussian over
    (log(C_mid / compute seen), log B) and its extrapolation error; docs/forecasting.md."""

    model_config = ConfigDict(extra="forbid", strict=True)

    format_version: Literal[1] = 1
    mean: Pair
    cov: Annotated[list[Pair], Field(min_length=2, max_length=2)]
    extrapolation_sd: Annotated[float, Field(ge=0.0, le=1.0)] = 0.0
    version: Annotated[str, Field(max_length=100)] = "custom"
    scale: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] = 1.0
    n_cases: Annotated[int, Field(ge=0)] = 0
    sources: Annotated[list[Annotated[str, Field(max_length=200)]], Field(max_length=1000)] = Field(
        default_factory=list
    )
    description: Annotated[str, Field(max_length=2000)] = ""
    extra: dict[str, Any] = Field(default_factory=dict)
    coordinates: list[str] | None = None

    @model_validator(mode="after")
    def _positive_definite(self) -> ShapePriorDoc:
        self.to_prior()  # ShapePrior checks its covariance (ValueError -> a 422 naming the problem)
        return self

    def to_prior(self) -> ShapePrior:
        return ShapePrior.from_json(self.model_dump())


#: Longest ``fit.prior_note`` (the service clips what it writes there to this).
PRIOR_NOTE_LIMIT = 1000


class FitSpec(BaseModel):
    """How each run's curve is fitted: points below ``burn_in`` compute (absolute) are left out; ``adaptive_band``
    (off by default) lets the experiment's own earlier forecasts widen or narrow the calibrated band."""

    model_config = ConfigDict(extra="forbid", strict=True)

    burn_in: Annotated[float | None, Field(ge=0.0, allow_inf_nan=False)] = None
    level: Annotated[float, Field(gt=0.0, lt=1.0)] = 0.8
    prior: Literal["team", "public", "none"] | ShapePriorDoc = "team"
    """``team`` (the default): a prior learned at submission from this server's succeeded runs of the same task and
    model (server/lifecycle/team_prior.py), or flat priors when there are too few; ``public``: the shipped shape
    prior, learned from public RL curves (stored documents that say ``default``, its name until flat priors became
    the fallback, read as ``public``); ``none``: flat priors (for curves that start very slowly); or a prior learned
    from your own finished runs (the JSON of ``scalerl prior build``)."""
    team_prior: ShapePriorDoc | None = None
    """Set by the service at submission when ``prior`` is ``team`` (a value given is replaced): the prior it
    learned, or null: flat priors. Runs registered without an experiment are fitted with flat priors."""
    prior_note: Text = Field(default="", max_length=PRIOR_NOTE_LIMIT)
    """Set by the service with ``team_prior``: what the prior was learned from, or why flat priors are used."""
    adaptive_band: bool = Field(
        default=False,
        description="Scale the calibrated band by the experiment's own earlier forecast misses (off by default).",
    )
    """Widen or narrow the calibrated 80% band by what this experiment's own earlier forecasts did
    (docs/forecasting.md, "Bands that adapt to the experiment"): at each assessment every run's earlier stored
    forecasts are scored against its points that arrived later, and one multiplier of the band's half-widths (0.5-3,
    exactly 1 with no residuals) is applied to the band and interval the pages show and to the draws the grid
    decisions compare (``policy.forecast_comparison: calibrated`` only). Off by default: on the backtest it moves
    coverage toward 80% on average but does not put every collection in 75-85%."""

    @field_validator("prior", mode="before")
    @classmethod
    def _renamed_default(cls, value: object) -> object:
        """``default`` was the shipped prior's name until session 15; experiments stored with it keep working."""
        return "public" if value == "default" else value

    def effective_prior(self) -> Literal["public", "none"] | ShapePriorDoc:
        """The prior the fits use: ``team`` is its learned prior, or flat priors when none was learned."""
        if self.prior == "team":
            return self.team_prior or "none"
        return self.prior

    def options(self) -> FitOptions:
        """The library's fit options for this spec."""
        chosen = self.effective_prior()
        prior = chosen.to_prior() if isinstance(chosen, ShapePriorDoc) else chosen
        return FitOptions(burn_in=self.burn_in, level=self.level, prior=None if prior == "none" else prior)

    def cache_key(self) -> tuple[object, ...]:
        """What of this spec a fit depends on, hashable."""
        chosen = self.effective_prior()
        prior = chosen if isinstance(chosen, str) else json.dumps(chosen.model_dump(), sort_keys=True)
        return (self.burn_in, self.level, prior)

    def describe(self) -> str:
        """One line for people: which prior the fits use, and why (a resolved ``team``'s note)."""
        if self.prior == "team":
            return self.prior_note or "flat priors (a team prior is learned for submitted grid documents only)"
        if isinstance(self.prior, ShapePriorDoc):
            return f"the given prior {self.prior.version}"
        return "the shipped prior" if self.prior == "public" else "flat priors"


class GridDocument(BaseModel):
    """An experiment: a base recipe (``preset`` and/or ``recipe`` overrides), then ``grid`` axes or
    ``leave_one_out`` variants, times ``seeds``; every run gets ``budget`` compute on ``task`` with ``model``."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: Name
    description: Text = Field(default="", max_length=2000)
    preset: Text | None = Field(default=None, description="Starting recipe (default scalerl).", max_length=100)
    recipe: dict[str, Any] = Field(default_factory=dict, description="Nested recipe keys merged over the preset.")
    grid: dict[str, list[Any]] = Field(
        default_factory=dict, description="Dotted recipe key -> values; the runs are the cartesian product."
    )
    leave_one_out: bool | Literal["extended"] = Field(
        default=False, description="Run the base and each ScaleRL leave-one-out variant ('extended' adds two)."
    )
    seeds: list[Seed] = Field(default_factory=lambda: [0], min_length=1, max_length=64)
    task: Text = Field(min_length=1, max_length=200)
    model: Text = Field(min_length=1, max_length=300)
    budget: Budget = Field(description="Compute budget per run.")
    compute_unit: Text = Field(default="gpu_hours", min_length=1, max_length=50)
    max_runs: Annotated[int, Field(ge=1, le=4096)] = DEFAULT_MAX_RUNS
    policy: PolicySpec = Field(default_factory=PolicySpec)
    fit: FitSpec = Field(default_factory=FitSpec)


@dataclass(frozen=True)
class PlannedRun:
    name: str
    seed: int
    overrides: dict[str, Any]
    recipe: dict[str, Any]
    budget: float


class GridDocumentError(ValueError):
    """The document is invalid; ``problems`` are 'key: message' lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def parse_document(data: Any) -> GridDocument:
    """Validate the document's own fields (recipes are checked by :func:`expand`).

    Its free-form parts (``recipe``, ``grid`` values, a prior's ``extra``) are also checked for what cannot be stored
    or answered as JSON (NaN/Infinity, lone surrogates): the document is stored as given and read back by every
    listing of experiments, so one such value would otherwise be a 500 at insert or on every later read.
    """
    if not isinstance(data, dict):
        raise GridDocumentError([f"document: must be a mapping, got {type(data).__name__}"])
    try:
        doc = GridDocument.model_validate(data)
    except ValidationError as exc:
        raise GridDocumentError(
            [f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}" for e in exc.errors(include_url=False)]
        ) from None
    problems = unstorable(data)
    if problems:
        raise GridDocumentError(problems)
    return doc


def base_recipe_data(preset: str | None, recipe: dict[str, Any] | None) -> dict[str, Any]:
    """The validated full recipe of ``preset`` (default scalerl) with ``recipe`` merged over it, as JSON data."""
    try:
        return recipe_to_dict(load_recipe({**(recipe or {}), "preset": preset or "scalerl"}))
    except RecipeError as exc:
        raise GridDocumentError([f"recipe.{p}" if p.key != "preset" else str(p) for p in exc.problems]) from None


def expand(doc: GridDocument) -> list[PlannedRun]:
    """Every run of the document, in a stable order (raises GridDocumentError)."""
    if doc.grid and doc.leave_one_out:
        raise GridDocumentError(["grid, leave_one_out: use one of them, not both"])
    base = load_recipe(base_recipe_data(doc.preset, doc.recipe))
    try:
        if doc.leave_one_out:
            variants = {"base": base, **leave_one_out(base, extended=doc.leave_one_out == "extended")}
            seeds = list(dict.fromkeys(doc.seeds))
            if len(variants) * len(seeds) > doc.max_runs:
                raise GridDocumentError(
                    [f"max_runs: the document requests {len(variants) * len(seeds)} runs, cap is {doc.max_runs}"]
                )
            return [
                PlannedRun(
                    name=f"{name},seed={seed}",
                    seed=seed,
                    overrides=recipe_overrides(base, recipe),
                    recipe=recipe_to_dict(recipe),
                    budget=doc.budget,
                )
                for name, recipe in variants.items()
                for seed in seeds
            ]
        cells = expand_grid(base, doc.grid, doc.seeds, max_runs=doc.max_runs)
    except RecipeError as exc:
        raise GridDocumentError(
            [f"grid.{p}" if p.key not in ("axes", "seeds") else str(p) for p in exc.problems]
        ) from None
    runs = [
        PlannedRun(
            name=cell_name({key: get_value(c.recipe, key) for key in doc.grid}, c.seed),
            seed=c.seed,
            overrides=dict(c.overrides),
            recipe=recipe_to_dict(c.recipe),
            budget=doc.budget,
        )
        for c in cells
    ]
    if any("\x00" in r.name for r in runs):
        raise GridDocumentError(["grid: values must not contain NUL (\\x00) characters"])
    long = [r.name for r in runs if len(r.name) > MAX_RUN_NAME]
    if long:
        raise GridDocumentError(
            [
                f"grid: run names (key=value,...,seed=N) are at most {MAX_RUN_NAME} characters; {len(long)} are "
                f"longer (the first has {len(long[0])}): use fewer or shorter grid values"
            ]
        )
    return runs
