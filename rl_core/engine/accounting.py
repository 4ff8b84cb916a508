"""Compute accounting: device-hours (busy time × devices, from each device's busy clock) and a FLOPs estimate, per role.

Roles: ``generator`` and ``trainer`` make up *training* compute (the x-axis of the compute–performance curve);
``eval`` is kept separate and never enters ``train_device_hours`` or ``train_flops``.

Busy time is time spent inside the role's work (decoding a batch, a gradient step, an evaluation), not time spent
waiting for the other role, read from ``busy_clock(device)``: on a GPU the wall clock (device-hours, as the paper
counts them); on the CPU the process's CPU time (user + system, all its threads), so a CPU device-hour is a
core-hour of work and another program on the machine cannot inflate a run's compute (wall-clock busy time charged
the contention to whichever run was training: 157-478 steps for one 0.05 device-hour budget on a loaded 2-core VM).

FLOPs follow the usual decoder estimate:
2·N per token for a forward pass and 6·N for forward + backward (N = parameters without embeddings, plus the
attention term the model module's ``decoder_flops_per_token`` adds), so generation of T tokens costs about
``T · forward_flops_per_token`` and a trainer step on T tokens ``3 · T · forward_flops_per_token`` (the trainer
also recomputes the prompt). Invariant: every counter only grows, and ``state_dict``/``load_state_dict`` restore
it exactly, so a resumed run continues its compute axis without a jump.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["generator", "trainer", "eval"]
ROLES: tuple[Role, ...] = ("generator", "trainer", "eval")


def busy_clock(device: str) -> Callable[[], float]:
    """The clock a role's busy seconds are read from on ``device`` ('cpu', 'cuda', 'cuda:N'; module doc)."""
    return time.process_time if device == "cpu" else time.perf_counter


@dataclass
class RoleCompute:
    busy_seconds: float = 0.0
    flops: float = 0.0
    tokens: int = 0
    devices: int = 1

    @property
    def device_hours(self) -> float:
        return self.busy_seconds * self.devices / 3600.0


@dataclass
class ComputeMeter:
    """Cumulative compute of a run (see module doc)."""

    roles: dict[str, RoleCompute] = field(default_factory=lambda: {r: RoleCompute() for r in ROLES})

    def add(self, role: Role, *, seconds: float, flops: float = 0.0, tokens: int = 0) -> None:
        if seconds < 0 or flops < 0 or tokens < 0:
            raise ValueError(f"compute increments must be >= 0 (seconds={seconds}, flops={flops}, tokens={tokens})")
        rc = self.roles[role]
        rc.busy_seconds += seconds
        rc.flops += flops
        rc.tokens += tokens

    @property
    def train_device_hours(self) -> float:
        return self.roles["generator"].device_hours + self.roles["trainer"].device_hours

    @property
    def train_flops(self) -> float:
        return self.roles["generator"].flops + self.roles["trainer"].flops

    def metrics(self) -> dict[str, float]:
        """Flat metrics attached to every metric point."""
        out: dict[str, float] = {
            "compute/device_hours": self.train_device_hours,
            "compute/flops": self.train_flops,
        }
        for role in ROLES:
            rc = self.roles[role]
            out[f"compute/{role}_device_hours"] = rc.device_hours
            out[f"compute/{role}_flops"] = rc.flops
            out[f"compute/{role}_tokens"] = float(rc.tokens)
        return out

    def state_dict(self) -> dict[str, Any]:
        return {role: asdict(rc) for role, rc in self.roles.items()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.roles = {role: RoleCompute(**state[role]) for role in ROLES}
