"""An experiment with its document's settings parsed once: the fit options, the policy and the compute unit.

Invariant: no code below a request or an assessment parses ``Experiment.document`` again; whoever starts one builds
an :class:`ExperimentSpec` (:meth:`ExperimentSpec.of`) and passes it down. A spec is a snapshot: a policy changed
later (``PUT /experiments/{id}/policy``) is read by the next request or assessment, which builds its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from server.lifecycle.experiments import DEFAULT_EXPERIMENT, compute_unit_label, get_experiment
from server.lifecycle.grid import FitSpec, PolicySpec, parse_policy, policy_key
from server.store.models import Experiment, Run


@dataclass(frozen=True)
class ExperimentSpec:
    """The experiment row and what its document says, validated: ``fit`` (how runs are fitted), ``policy`` (the
    decision's numbers and mode), ``compute_unit`` (for people) and ``policy_key`` (the policy, canonical: part of
    the assessment's state digest; a policy stored with the rules' old flat names and its form with blocks are one
    key, :func:`server.lifecycle.grid.policy_key`)."""

    experiment: Experiment
    fit: FitSpec
    policy: PolicySpec
    compute_unit: str
    policy_key: str

    @classmethod
    def of(cls, experiment: Experiment) -> ExperimentSpec:
        document = experiment.document or {}
        policy = parse_policy(document.get("policy", {}))
        return cls(
            experiment=experiment,
            fit=FitSpec.model_validate(document.get("fit", {})),
            policy=policy,
            compute_unit=compute_unit_label(experiment),
            policy_key=policy_key(policy),
        )

    @property
    def id(self) -> int:
        return self.experiment.id

    @property
    def is_default(self) -> bool:
        """The experiment that collects runs registered on their own (never fitted as one grid)."""
        return self.experiment.name == DEFAULT_EXPERIMENT


def spec_of(session: Session, experiment_id: int) -> ExperimentSpec:
    """The experiment's spec (``NotFound`` when there is no such experiment)."""
    return ExperimentSpec.of(get_experiment(session, experiment_id))


def run_with_spec(session: Session, run_id: int) -> tuple[Run, ExperimentSpec] | None:
    """A run and its experiment's spec, or ``None`` when the run (or its experiment) is gone: what work queued by
    run id reads first."""
    run = session.get(Run, run_id)
    experiment = session.get(Experiment, run.experiment_id) if run is not None else None
    if run is None or experiment is None:
        return None
    return run, ExperimentSpec.of(experiment)
