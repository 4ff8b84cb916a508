"""A team prior: the shape prior learned from this server's finished runs of the same task and model.

The shipped prior learned what public RL curves look like; a new training stack's curves can have a shape of
their own, and then a prior learned from the stack's own finished runs forecasts its next grid better
(docs/forecasting.md, "A prior from your own runs"). An experiment whose grid document says ``fit: {prior: team}``
(the default) gets that prior **once, at submission**: it is learned from the newest :data:`MAX_TEAM_RUNS` runs
that succeeded with the document's task and model (each experiment one source, as ``scalerl prior build
--experiment`` reads them) and stored in the experiment's document as ``fit.team_prior``, so every later fit of the
experiment uses the same prior and the document says what it was. With fewer than :data:`MIN_TEAM_RUNS` such runs,
or none that gives an oracle fit, the experiment is fitted with flat priors, and ``fit.prior_note`` says why (the
shipped prior, learned from public curves, forecast worse than flat priors on five stacks it never saw:
docs/forecasting.md).

Invariant: only runs whose status is ``succeeded`` are learned from (a stopped run is a partial curve, and the
runs stopped early are the worst ones).
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import date

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session

from rl_core.scaling.measure.corpus import MIN_CURVE_POINTS, Curve, clean_curve
from rl_core.scaling.measure.prior_build import PriorCorpus
from server.lifecycle.grid import PRIOR_NOTE_LIMIT, GridDocument, ShapePriorDoc
from server.store.models import Experiment, Run, StoredPoint

#: Fewest finished runs a team prior is learned from. Measured (bench/team_prior_history.py, docs/forecasting.md):
#: from ~2 runs it forecasts worse than the shipped prior, from ~5 it is mixed, from 8 on it is better on both
#: corpora measured.
MIN_TEAM_RUNS = 8
#: The newest runs read (the prior costs about 50 ms per run to learn, at submission).
MAX_TEAM_RUNS = 32
#: Experiments named in the note (the rest are counted).
NAMED_EXPERIMENTS = 5
#: Only complete curves are learned from.
FINISHED = "succeeded"


@dataclass(frozen=True)
class TeamPrior:
    prior: ShapePriorDoc | None
    """The learned prior, or None: flat priors are used."""
    note: str
    """What was learned from, or why nothing was (stored as the document's ``fit.prior_note``)."""


def _label(text: str) -> str:
    return text.replace("/", "_")


def team_curves(session: Session, task: str, model: str) -> tuple[list[Curve], list[str]]:
    """The newest finished runs of ``task`` with ``model`` as curves named ``<experiment>/<run>`` (one source per
    experiment), and the experiments they come from."""
    rows = session.execute(
        select(Run.id, Run.name, Experiment.name.label("experiment"))
        .join(Experiment, Experiment.id == Run.experiment_id)
        .where(
            Run.task == task,
            Run.model == model,
            Run.status == FINISHED,
            Run.curve_points >= MIN_CURVE_POINTS,
        )
        .order_by(Run.finished_at.desc().nulls_last(), Run.id.desc())
        .limit(MAX_TEAM_RUNS)
    ).all()
    if not rows:
        return [], []
    points: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    t = StoredPoint.__table__
    for run_id, step, compute, pass_rate in session.execute(
        select(t.c.run_id, t.c.step, t.c.compute, t.c.pass_rate)
        .where(t.c.run_id.in_([r.id for r in rows]), t.c.pass_rate.is_not(None))
        .order_by(t.c.run_id, t.c.step)
    ):
        points[int(run_id)].append((float(step), float(compute), float(pass_rate)))
    curves: list[Curve] = []
    for r in rows:
        arr = np.array(points.get(int(r.id), []), dtype=np.float64).reshape(-1, 3)
        name = f"{_label(r.experiment)}/{_label(r.name)}"
        curve = clean_curve(name, "compute", "pass_rate", arr[:, 0], arr[:, 1], arr[:, 2])
        if curve is not None:
            curves.append(curve)
    experiments = sorted({c.name.rpartition("/")[0] for c in curves})
    return curves, experiments


def learn_team_prior(session: Session, task: str, model: str) -> TeamPrior:
    """The team prior for a new experiment on ``task`` with ``model`` (see the module docstring)."""
    curves, experiments = team_curves(session, task, model)
    where = f"task {task!r} with model {model!r}"
    if len(curves) < MIN_TEAM_RUNS:
        return TeamPrior(
            None,
            _clip(
                f"team prior: {len(curves)} succeeded run(s) of {where} on this server, {MIN_TEAM_RUNS} needed; "
                "flat priors are used"
            ),
        )
    try:
        prior = PriorCorpus(curves).prior(
            version=f"team {date.today().isoformat()} ({len(curves)} runs)",
            extra={"task": task, "model": model, "experiments": experiments},
        )
    except ValueError as exc:
        return TeamPrior(
            None, _clip(f"team prior: none learned from {len(curves)} runs of {where} ({exc}); flat priors")
        )
    # Through JSON, as a prior file is pasted: the document model is strict (lists, not tuples).
    doc = ShapePriorDoc.model_validate({**json.loads(json.dumps(prior.to_json())), "sources": experiments})
    named = ", ".join(experiments[:NAMED_EXPERIMENTS])
    if len(experiments) > NAMED_EXPERIMENTS:
        named += f" and {len(experiments) - NAMED_EXPERIMENTS} more"
    note = f"team prior: learned at submission from {len(curves)} succeeded runs of {where} in {len(experiments)} "
    return TeamPrior(doc, _clip(note + f"experiment(s): {named}"))


def _clip(note: str) -> str:
    """At most PRIOR_NOTE_LIMIT characters: a longer ``fit.prior_note`` would make the stored document invalid."""
    return note if len(note) <= PRIOR_NOTE_LIMIT else note[: PRIOR_NOTE_LIMIT - 1] + "…"


def resolve_team_prior(session: Session, doc: GridDocument) -> GridDocument:
    """``doc`` with ``fit.team_prior`` and ``fit.prior_note`` set from this server's history when ``fit.prior`` is
    ``team`` (whatever the document gave for them: a cloned document learns afresh); any other prior as given."""
    if doc.fit.prior != "team":
        return doc
    found = learn_team_prior(session, doc.task, doc.model)
    fit = doc.fit.model_copy(update={"team_prior": found.prior, "prior_note": found.note})
    return doc.model_copy(update={"fit": fit})
