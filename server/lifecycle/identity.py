"""Which run a registration means: its key first, then its name under its ``resume`` policy (W&B's semantics).

Invariants:
- With a key, the key is the identity (W&B's run id): the run of the experiment holding it is the run meant,
  whatever its name or status (a retried registration, an offline run synced twice and a preempted job resumed
  under its id reach one run); without one, a new run is created, named ``name`` or, when another run has that
  name, ``<name>-2``, ... (two offline runs that share a name stay two runs). ``never``: 409 when the key exists;
  ``must``: 404 when it does not.
- Without a key, the name is: ``never`` 409 when it exists, ``must`` 404 when it does not, ``allow``/``must``
  attach to it whatever its status.
- ``auto`` (without a key) never attaches to a run whose trainer is alive (:func:`trainer_alive`): two live
  processes never share a run; the second gets ``<name>-2``. It attaches to a live-status run nobody is reporting
  to (a crashed or killed trainer's, before or after the reaper marked it ``lost``) and starts a new run once the
  run of that name has ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.lifecycle.runs import Conflict, NotFound, as_utc
from server.lifecycle.status import LIVE
from server.store.models import Experiment, Run, utcnow

#: ``resume='auto'`` tries ``<name>-2`` ... ``<name>-<this>`` before it gives up (409).
MAX_SUFFIX = 1000
#: A trainer heard from within this many of its promised heartbeats is alive. Two, not one: the reporter's thread
#: beats every ``poll_interval`` but a long C call holding the GIL can delay one beat.
ALIVE_WITHIN_HEARTBEATS = 2.0


@dataclass(frozen=True)
class Match:
    """What a registration means: attach to ``existing``, or create a run called ``name``."""

    existing: Run | None
    name: str


def trainer_alive(run: Run, now: datetime | None = None) -> bool:
    """True while a process is reporting to ``run``: a worker's unexpired lease, or a trainer of its own heard from
    within :data:`ALIVE_WITHIN_HEARTBEATS` of the heartbeats it promised. A run with no promise cannot tell a live
    trainer from a dead one: it counts as not alive (so ``auto`` attaches, as before promises existed)."""
    if run.status not in ("queued", "running", "stopping"):
        return False
    now = now or utcnow()
    if run.lease_id is not None and run.lease_expires_at is not None:
        return as_utc(run.lease_expires_at) > now
    if run.heartbeat_seconds is None:
        return False
    last = as_utc(run.last_seen_at or run.created_at)
    return (now - last).total_seconds() <= ALIVE_WITHIN_HEARTBEATS * run.heartbeat_seconds


def resolve(session: Session, experiment: Experiment, name: str, key: str | None, resume: str) -> Match:
    """Apply a registration's ``key`` and ``resume`` policy (``server.lifecycle.status.ResumePolicy``) to
    ``experiment`` (see the module docstring)."""
    if key is not None:
        return _by_key(session, experiment, name, key, resume)
    found = session.scalar(select(Run).where(Run.experiment_id == experiment.id, Run.name == name))
    if found is None:
        if resume == "must":
            raise NotFound(f"experiment {experiment.name!r} has no run named {name!r} (resume='must')")
        return Match(None, name)
    if resume == "never":
        raise Conflict(
            f"experiment {experiment.name!r} already has a run named {name!r}; register with resume='allow' to "
            "continue it, 'auto' to start a new run under a suffixed name, or choose another name"
        )
    if resume in ("allow", "must") or (found.status in LIVE and not trainer_alive(found)):
        return Match(found, name)
    return Match(None, _free_name(session, experiment, name))


def _by_key(session: Session, experiment: Experiment, name: str, key: str, resume: str) -> Match:
    """The key is the identity: the run holding it, else a new run (named ``name``, suffixed when the name is
    another run's)."""
    keyed = session.scalar(select(Run).where(Run.experiment_id == experiment.id, Run.key == key))
    if keyed is not None:
        if resume == "never":
            raise Conflict(
                f"experiment {experiment.name!r} already has a run with key {key!r} ({keyed.name!r}); register with "
                "resume='allow' to continue it, or use a new key"
            )
        return Match(keyed, keyed.name)
    if resume == "must":
        raise NotFound(f"experiment {experiment.name!r} has no run with key {key!r} (resume='must')")
    taken = session.scalar(select(Run.id).where(Run.experiment_id == experiment.id, Run.name == name))
    return Match(None, name if taken is None else _free_name(session, experiment, name))


def _free_name(session: Session, experiment: Experiment, name: str) -> str:
    taken = set(
        session.scalars(
            select(Run.name).where(Run.experiment_id == experiment.id, Run.name.startswith(f"{name}-", autoescape=True))
        )
    )
    for n in range(2, MAX_SUFFIX + 1):
        candidate = f"{name}-{n}"
        if candidate not in taken:
            return candidate
    raise Conflict(f"experiment {experiment.name!r} already has runs {name!r}-2 ... -{MAX_SUFFIX}; choose a new name")
