"""Experiments: creation from a grid document (validated and expanded before anything is stored) and lookup."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from rl_core.recipe import DEFAULT_MAX_RUNS
from server.lifecycle.grid import GridDocument, GridDocumentError, PlannedRun, base_recipe_data, expand
from server.lifecycle.recipes import split_recipe
from server.lifecycle.runs import Conflict, NotFound
from server.lifecycle.team_prior import resolve_team_prior
from server.store.models import Event, Experiment, Run, RunTransition

DEFAULT_EXPERIMENT = "default"
#: Most bytes of recipes a grid may store (the document and its base recipe once, then each run's overrides and
#: recipe delta: its grid values, twice): a bound on what one request can make the database and every later read
#: of the experiment hold (a 1 MB request stored 517 MB when every run held the full recipe).
MAX_STORED_RECIPE_BYTES = 32 * 1024 * 1024
#: A full recipe with the presets' defaults is about 1.3 KB as JSON; this bounds it (document values come on top).
_BASE_RECIPE_BYTES = 4096
#: More variants than ``leave_one_out`` (extended) ever makes.
_MAX_LOO_VARIANTS = 32


def get_experiment(session: Session, experiment_id: int) -> Experiment:
    exp = session.get(Experiment, experiment_id)
    if exp is None:
        raise NotFound(f"experiment {experiment_id} does not exist")
    return exp


def compute_unit_of(experiment: Experiment) -> str:
    """The unit an experiment's runs report compute in: its document's ``compute_unit`` (grid documents default to
    ``gpu_hours``, and so does an experiment that never named one)."""
    return str((experiment.document or {}).get("compute_unit", "gpu_hours"))


def compute_unit_label(experiment: Experiment) -> str:
    """The unit for people: the document's, or plain "compute" where the experiment never named one (``default``)."""
    return str((experiment.document or {}).get("compute_unit", "compute"))


def default_experiment(session: Session) -> Experiment:
    """The experiment that directly registered runs join when they name none (created on first use)."""
    exp = session.scalar(select(Experiment).where(Experiment.name == DEFAULT_EXPERIMENT))
    if exp is not None:
        return exp
    doc: dict[str, Any] = {"name": DEFAULT_EXPERIMENT, "description": "runs registered without an experiment"}
    try:
        # Create-or-get, atomically: a concurrent first registration that created it wins; this one reads it.
        with session.begin_nested():
            exp = Experiment(name=DEFAULT_EXPERIMENT, document=doc, policy_mode="recommend")
            session.add(exp)
    except IntegrityError:
        exp = session.scalar(select(Experiment).where(Experiment.name == DEFAULT_EXPERIMENT))
        assert exp is not None
    return exp


def check_grid_budget(data: Any) -> None:
    """Refuse, from the raw document and before it is validated or expanded, a grid with more runs than its
    ``max_runs`` (default 256) or whose runs would store more than :data:`MAX_STORED_RECIPE_BYTES` of recipes
    (GridDocumentError). Only counts: what is malformed is left to :func:`server.lifecycle.grid.parse_document`. The
    recipe is stored once per experiment (:mod:`server.lifecycle.recipes`); what grows with the run count is each run's
    grid values."""
    if not isinstance(data, dict):
        return
    cap = data.get("max_runs")
    cap = cap if isinstance(cap, int) and not isinstance(cap, bool) and 1 <= cap <= 4096 else DEFAULT_MAX_RUNS
    seeds = data.get("seeds")
    n_seeds = len({s for s in seeds if isinstance(s, int)}) or 1 if isinstance(seeds, list) else 1
    grid = data.get("grid")
    once = 2 * (_BASE_RECIPE_BYTES + _json_size(data.get("recipe")))  # the document's and the base recipe
    per_run = 256  # a run's own columns beside its recipe values (name, delta paths)
    if isinstance(grid, dict) and grid:
        n = n_seeds
        for values in grid.values():
            if isinstance(values, list) and values:
                n *= len(values)
                per_run += 3 * max(_json_size(v) for v in values)  # in the name, the overrides and the delta
        if n > cap:
            raise GridDocumentError([f"axes: grid requests {n} runs, more than the cap of {cap}"])
    else:
        n = n_seeds * (_MAX_LOO_VARIANTS if data.get("leave_one_out") else 1)
        n = min(n, cap)
        per_run += _BASE_RECIPE_BYTES  # a variant may change any of the recipe's values
    stored = once + n * per_run
    if stored > MAX_STORED_RECIPE_BYTES:
        raise GridDocumentError(
            [
                f"recipe: a recipe of up to {once // 2} bytes and {n} runs of up to {per_run} bytes of their own "
                f"would store {stored} bytes; at most {MAX_STORED_RECIPE_BYTES} are stored per experiment (use "
                "shorter recipe or grid values, or fewer runs)"
            ]
        )


def _json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, separators=(",", ":"), default=repr))
    except (ValueError, RecursionError):
        return 0


def create_experiment(
    session: Session, doc: GridDocument, actor: str, planned: list[PlannedRun] | None = None
) -> tuple[Experiment, list[PlannedRun]]:
    """Store the experiment and one queued run per grid cell, in one transaction. ``planned`` is ``expand(doc)``
    when the caller expanded it before the transaction (so that SQLite's write lock is not held meanwhile)."""
    if doc.name == DEFAULT_EXPERIMENT:
        raise Conflict(f"the name {DEFAULT_EXPERIMENT!r} is reserved for runs registered without an experiment")
    # The name first: a duplicate is refused before a (possibly large) grid is expanded.
    if session.scalar(select(Experiment.id).where(Experiment.name == doc.name)) is not None:
        raise Conflict(f"an experiment named {doc.name!r} already exists")
    if planned is None:
        planned = expand(doc)
    doc = resolve_team_prior(session, doc)
    exp = Experiment(
        name=doc.name,
        document=doc.model_dump(mode="json"),
        base_recipe=base_recipe_data(doc.preset, doc.recipe),
        policy_mode=doc.policy.mode,
    )
    session.add(exp)
    session.flush()
    _create_runs(session, exp, actor, doc, planned)
    return exp, planned


def _create_runs(session: Session, exp: Experiment, actor: str, doc: GridDocument, planned: list[PlannedRun]) -> None:
    """What :func:`server.lifecycle.runs.create_run` does for each planned run, as three bulk INSERTs (runs with
    RETURNING,
    their first transitions, their ``run_created`` events) instead of three ORM statements per run: a 4,096-run
    grid held SQLite's write lock for seconds with one INSERT per run. Each run stores only what its
    recipe changes in the experiment's base recipe (:mod:`server.lifecycle.recipes`)."""
    if not planned:
        return
    base = exp.base_recipe or {}
    split = [split_recipe(base, p.recipe) for p in planned]
    rows = [
        {
            "experiment_id": exp.id,
            "status": "queued",
            "status_reason": "created",
            "name": p.name,
            "seed": p.seed,
            "task": doc.task,
            "model": doc.model,
            "recipe": recipe,
            "recipe_delta": delta,
            "overrides": p.overrides,
            "budget": p.budget,
        }
        for p, (recipe, delta) in zip(planned, split, strict=True)
    ]
    # Names are unique in an experiment: the ids are matched by name (an ordered RETURNING is one row at a time on
    # SQLite).
    by_name = {r.name: r.id for r in session.execute(insert(Run).returning(Run.id, Run.name), rows)}
    ids = [by_name[p.name] for p in planned]
    session.execute(
        insert(RunTransition),
        [{"run_id": i, "from_status": None, "to_status": "queued", "reason": "created", "actor": actor} for i in ids],
    )
    session.execute(
        insert(Event),
        [
            {"experiment_id": exp.id, "run_id": i, "type": "run_created", "data": {"run_id": i, "name": p.name}}
            for i, p in zip(ids, planned, strict=True)
        ],
    )


#: ``document["kind"]`` of an experiment created by name for runs trained elsewhere (no grid, no planned runs).
TRACKING_KIND = "tracking"


def tracking_document(
    name: str,
    *,
    compute_unit: str = "gpu_hours",
    budget: float | None = None,
    task: str | None = None,
    model: str | None = None,
    description: str = "",
) -> dict[str, Any]:
    """The stored document of an experiment for your own runs: its labels, unit and default run budget. The
    ``compute_unit`` key is the one grid documents use, so every check of an experiment's unit reads it the same."""
    doc: dict[str, Any] = {"name": name, "kind": TRACKING_KIND, "description": description}
    doc["compute_unit"] = compute_unit
    for key, value in (("task", task), ("model", model), ("budget", budget)):
        if value is not None:
            doc[key] = value
    return doc


def create_tracking_experiment(
    session: Session, document: dict[str, Any], *, exist_ok: bool = False
) -> tuple[Experiment, bool]:
    """Create the experiment ``document`` (see :func:`tracking_document`) with no runs; ``(experiment, created)``.

    With ``exist_ok`` an experiment of that name is returned as it is (a trainer restarted with the same
    experiment name joins it), unless it records another compute unit: runs of different units cannot be compared
    on one curve, so that is a :class:`Conflict` (as is the reserved name ``default`` and, without ``exist_ok``,
    any existing name)."""
    name = str(document["name"])
    if name == DEFAULT_EXPERIMENT:
        raise Conflict(f"the name {DEFAULT_EXPERIMENT!r} is reserved for runs registered without an experiment")
    existing = session.scalar(select(Experiment).where(Experiment.name == name))
    if existing is None:
        try:
            with session.begin_nested():  # create-or-get: a concurrent creation of the same name wins
                exp = Experiment(name=name, document=document, policy_mode="recommend")
                session.add(exp)
            return exp, True
        except IntegrityError:
            existing = session.scalar(select(Experiment).where(Experiment.name == name))
            if existing is None:
                raise
    if not exist_ok:
        raise Conflict(f"an experiment named {name!r} already exists")
    unit = compute_unit_of(existing)
    if unit != document["compute_unit"]:
        raise Conflict(
            f"experiment {name!r} measures compute in {unit!r}, not {document['compute_unit']!r}: runs of one "
            "experiment must share a unit (use another experiment name, or report in its unit)"
        )
    return existing, False


def inherited_labels(exp: Experiment) -> dict[str, Any]:
    """What a run registered in ``exp`` without its own ``task``, ``model`` or ``budget`` takes from it: the labels
    and default budget of an experiment created by name (none from grid documents, whose runs are planned)."""
    doc = exp.document or {}
    if doc.get("kind") != TRACKING_KIND:
        return {}
    return {k: doc[k] for k in ("task", "model", "budget") if doc.get(k) is not None}


def unit_problem(experiment: Experiment, unit: str | None) -> str | None:
    """Why a run reporting compute in ``unit`` cannot join ``experiment`` (None: it can). One experiment, one unit:
    its document's ``compute_unit``; the ``default`` experiment takes any (its runs of other units are then never
    compared with each other)."""
    expected = compute_unit_of(experiment)
    if unit is None or unit == expected or experiment.name == DEFAULT_EXPERIMENT:
        return None
    return (
        f"compute_unit: experiment {experiment.name!r} measures compute in {expected!r}, this run reports {unit!r}; "
        f"register it in an experiment of that unit (or convert its compute to {expected!r})"
    )
