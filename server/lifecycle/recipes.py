"""A run's full recipe, stored once per experiment: the experiment's base recipe plus the run's delta.

A grid's runs share one base recipe (``experiments.base_recipe``); each run stores only what differs from it
(``runs.recipe_delta``: a list of ``[path, value]`` to set and ``[path]`` to remove, paths as lists of keys), so no
request is multiplied by its run count (a 1 MB request with 256 runs stored 517 MB). A run registered with
a recipe of its own keeps it whole in ``runs.recipe`` (``recipe_delta`` NULL). Invariant: ``apply_delta(base,
recipe_delta(base, r)) == r`` for every JSON recipe ``r`` (the creation checks it and stores ``r`` whole otherwise);
:func:`effective_recipe` is the one reading of a run's full recipe (REST answers, the worker's lease, comparisons).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, object_session

from server.store.models import Experiment, Run

#: A delta: ``[path, value]`` sets the value at ``path``; ``[path]`` removes the key at ``path``.
Delta = list[list[Any]]


def recipe_delta(base: dict[str, Any], recipe: dict[str, Any]) -> Delta:
    """What turns ``base`` into ``recipe`` (nested mappings are compared key by key; anything else as a whole)."""
    out: Delta = []
    stack: list[tuple[list[str], dict[str, Any], dict[str, Any]]] = [([], base, recipe)]
    while stack:
        path, old, new = stack.pop()
        for key, value in new.items():
            if isinstance(value, dict) and isinstance(old.get(key), dict):
                stack.append(([*path, key], old[key], value))
            elif key not in old or old[key] != value or type(old[key]) is not type(value):
                out.append([[*path, key], value])
        out.extend([[*path, key]] for key in old if key not in new)
    return out


def apply_delta(base: dict[str, Any], delta: Delta) -> dict[str, Any]:
    """``base`` with ``delta`` applied (``base`` is not changed: the mappings on a changed path are copied)."""
    out = dict(base)
    for op in delta:
        path = op[0]
        node = out
        for key in path[:-1]:
            child = node.get(key)
            node[key] = dict(child) if isinstance(child, dict) else {}
            node = node[key]
        if len(op) == 2:
            node[path[-1]] = op[1]
        else:
            node.pop(path[-1], None)
    return out


def split_recipe(base: dict[str, Any], recipe: dict[str, Any]) -> tuple[dict[str, Any] | None, Delta | None]:
    """``(recipe, recipe_delta)`` columns of a run of an experiment with ``base``: the delta when it reproduces the
    recipe exactly, else the whole recipe."""
    delta = recipe_delta(base, recipe)
    if apply_delta(base, delta) == recipe:
        return None, delta
    return recipe, None


def effective_recipe(run: Run, session: Session | None = None) -> dict[str, Any] | None:
    """The run's full recipe: its own, or its experiment's base recipe with its delta (read through ``session``, by
    default the run's own; the experiment is then in the session's identity map for the next run)."""
    if run.recipe_delta is None:
        return run.recipe
    session = session or object_session(run)
    if session is None:
        raise RuntimeError(f"run {run.id}: its recipe is a delta, and no session can read its experiment's base")
    experiment = session.get(Experiment, run.experiment_id)
    base = experiment.base_recipe if experiment is not None else None
    return apply_delta(base or {}, run.recipe_delta)
