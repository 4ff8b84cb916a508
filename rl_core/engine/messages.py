"""Messages between the orchestrating trainer process and the generator process (all picklable, no tensors).

- ``Order``: generate ``n`` responses for each of ``problem_ids`` as batch ``batch_index``. ``refresh`` asks the
  generator to load the latest published weights before starting (sync / PPO-off-policy); in pipeline mode the
  generator instead polls between decode steps (``inflight``).
- ``GenResult``: the scored groups of one order plus the generator's busy time and token counts for compute
  accounting. ``error`` is set (and nothing else meaningful) when the generator failed; the trainer then stops
  the run with that message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rl_core.engine.batch import Group


@dataclass(frozen=True)
class Order:
    batch_index: int
    problem_ids: tuple[str, ...]
    n: int
    refresh: bool
    inflight: bool


@dataclass
class GenResult:
    batch_index: int
    groups: list[Group] = field(default_factory=list)
    busy_seconds: float = 0.0
    sampled_tokens: int = 0
    prompt_tokens: int = 0
    weight_updates: int = 0
    version_start: int = 0
    version_end: int = 0
    generator: int = 1  # which generator process (1..generator.processes) produced it
    error: str | None = None


@dataclass(frozen=True)
class Ready:
    """Sent once by the generator after its model is built: the number of parameters (FLOPs accounting)."""

    forward_flops_per_token: float
