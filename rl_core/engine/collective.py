"""Publishing weights over a collective: bucketed broadcasts from the trainer (rank 0) to generators (ranks 1..N).

The transport for a generator that cannot map the trainer's memory: another machine, or a GPU reached through
NCCL (``backend="nccl"``); ``backend="gloo"`` is the same protocol on CPU (what the tests run). It has the reader
interface of ``SharedWeights`` (``version``, ``tensors``, ``read_into``), so the generator does not know which
transport it reads from.

Protocol: a ``TCPStore`` (hosted by the trainer at ``init_method``) carries a notice per publish
(``publish/<n>`` = version); each generator's receiver thread waits for the notice and only then joins the
broadcast, so no collective is ever left waiting for a trainer step. Tensors are packed, in name order, into
flat buckets of one dtype of at most ``bucket_mb`` (one broadcast each, instead of one per tensor). Both sides
hold one copy of the weights in the sync dtype as flat buckets whose named views are the staging tensors: the
trainer stages a publish (casting, one tensor at a time, so ZeRO-3 can gather parameter by parameter) and then
broadcasts; nothing is unpacked on the receiving side.

Invariants:
- Every publish is received, in order; the receiver's ``version`` changes only after every bucket of that
  version arrived, under the lock that ``read_into`` holds, so a reader never sees a torn update.
- ``publish`` returns only after every receiver acknowledged the version (through the store), so from then on
  each generator reads that version or a newer one: the same guarantee as ``SharedWeights``, which the engine's
  staleness bound relies on.
- A publish that does not complete within ``timeout_s`` (the receiver died or hangs; NCCL itself has no timeout)
  raises ``WeightSyncError``; the collective runs on a daemon thread, so the trainer is never stuck in it, and the
  channel is then broken: later publishes fail at once.
- A process group of its own (not the default group), so DeepSpeed's or the user's distributed setup is untouched.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import torch
import torch.distributed as dist
from torch import Tensor

from rl_core.engine.weights import WeightSyncError, items_of, publishable

__all__ = ["CollectiveWeights", "plan_buckets"]

_STOP = -1
_NOTICE_POLL_S = 0.002  # how often the receiver thread asks the store for the next notice


@dataclass(frozen=True)
class _Entry:
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    offset: int  # in elements, within its bucket

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class _Bucket:
    dtype: torch.dtype
    numel: int
    entries: tuple[_Entry, ...]


def plan_buckets(specs: Mapping[str, tuple[tuple[int, ...], torch.dtype]], bucket_bytes: int) -> list[_Bucket]:
    """Pack tensors (name order, grouped by dtype) into flat buckets of at most ``bucket_bytes``; a tensor larger
    than a bucket gets a bucket of its own."""
    buckets: list[_Bucket] = []
    by_dtype: dict[torch.dtype, list[str]] = {}
    for name in sorted(specs):
        by_dtype.setdefault(specs[name][1], []).append(name)
    for dtype, names in by_dtype.items():
        size = torch.empty((), dtype=dtype).element_size()
        entries: list[_Entry] = []
        used = 0
        for name in names:
            shape = tuple(specs[name][0])
            numel = _Entry(name, shape, dtype, 0).numel
            if entries and (used + numel) * size > bucket_bytes:
                buckets.append(_Bucket(dtype, used, tuple(entries)))
                entries, used = [], 0
            entries.append(_Entry(name, shape, dtype, used))
            used += numel
        if entries:
            buckets.append(_Bucket(dtype, used, tuple(entries)))
    return buckets


def _process_group(backend: str, store: Any, rank: int, size: int, timeout: datetime.timedelta) -> Any:
    """A process group of its own (not the default group)."""
    if backend == "gloo":
        return dist.ProcessGroupGloo(store, rank, size, timeout)
    if backend == "nccl":
        opts = dist.ProcessGroupNCCL.Options()
        opts._timeout = timeout
        return dist.ProcessGroupNCCL(store, rank, size, opts)
    raise ValueError(f"backend must be 'nccl' or 'gloo', got {backend!r}")


class CollectiveWeights:
    """Trainer -> generator weights over bucketed broadcasts (see module doc). Create it in the trainer process,
    pass it to the ``receivers`` spawned generator processes, then ``connect_sender`` here and
    ``connect_receiver(device, rank)`` in each (ranks 1..receivers)."""

    def __init__(
        self,
        state: Mapping[str, Tensor],
        *,
        init_method: str,
        backend: str,
        bucket_mb: float = 256.0,
        timeout_s: float = 120.0,
        version: int = 0,
        dtype: torch.dtype | None = None,
        receivers: int = 1,
    ) -> None:
        url = urlparse(init_method)
        if url.scheme != "tcp" or not url.hostname or not url.port:
            raise ValueError(f"init_method must be tcp://host:port, got {init_method!r}")
        if backend not in ("nccl", "gloo"):
            raise ValueError(f"backend must be 'nccl' or 'gloo', got {backend!r}")
        if bucket_mb <= 0 or timeout_s <= 0:
            raise ValueError("bucket_mb and timeout_s must be positive")
        if receivers < 1:
            raise ValueError("receivers must be >= 1")
        self.receivers = receivers
        self.host, self.port = url.hostname, url.port
        self.backend = backend
        self.timeout_s = float(timeout_s)
        self.specs = {k: (tuple(v.shape), dtype or v.dtype) for k, v in publishable(state).items()}
        self.buckets = plan_buckets(self.specs, int(bucket_mb * 2**20))
        self.initial_version = version
        self._local: _LocalState | None = None

    # ---- both sides ----------------------------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_local"] = None  # the connection belongs to one process
        return state

    def _connect(self, rank: int, device: torch.device | str) -> _LocalState:
        if self._local is not None:
            raise RuntimeError("already connected")
        dev = torch.device(device)
        if self.backend == "nccl" and dev.type != "cuda":
            raise ValueError("backend 'nccl' needs a CUDA device")
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        timeout = datetime.timedelta(seconds=self.timeout_s)
        try:
            size = self.receivers + 1
            store = dist.TCPStore(  # type: ignore[attr-defined]
                self.host, self.port, size, rank == 0, timeout, wait_for_workers=False
            )
            group = _process_group(self.backend, store, rank, size, timeout)
        except RuntimeError as exc:  # a peer never came (it crashed, or init_method is unreachable)
            side = "generator(s)" if rank == 0 else "trainer"
            raise WeightSyncError(
                f"weight sync: could not connect to the {side} at tcp://{self.host}:{self.port} within "
                f"{self.timeout_s:g} s ({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc
        self._local = _LocalState(store=store, group=group, device=dev, rank=rank)
        return self._local

    # ---- trainer side (rank 0) -----------------------------------------------------------------------------

    def connect_sender(self, device: torch.device | str) -> None:
        """Host the store and join the group (returns once the receiver joined, or raises after the timeout)."""
        local = self._connect(0, device)
        local.buffers, local.views = self._allocate(local.device)

    def _allocate(self, device: torch.device) -> tuple[list[Tensor], dict[str, Tensor]]:
        buffers = [torch.empty(b.numel, dtype=b.dtype, device=device) for b in self.buckets]
        views: dict[str, Tensor] = {}
        for flat, b in zip(buffers, self.buckets, strict=True):
            for e in b.entries:
                views[e.name] = flat[e.offset : e.offset + e.numel].view(e.shape)
        return buffers, views

    @property
    def version(self) -> int:
        """Trainer side: the last version published. Generator side: the last version fully received."""
        local = self._require()
        return local.version if local.version is not None else self.initial_version - 1

    def publish(self, state: Mapping[str, Tensor] | Iterable[tuple[str, Tensor]], version: int) -> None:
        """Broadcast every weight as ``version``; raises ``WeightSyncError`` if it does not complete in time."""
        local = self._require()
        if local.broken is not None:
            raise WeightSyncError(f"weight sync channel is broken: {local.broken}")
        if local.version is not None and version < local.version:
            raise ValueError(f"version went backwards: {version} < {local.version}")
        seen: set[str] = set()
        with torch.no_grad():  # stage: one pass over the items, each valid only until the next (ZeRO-3)
            for name, src in items_of(state):
                dst = local.views.get(name)
                if dst is not None:
                    dst.copy_(src)
                    seen.add(name)
        missing = self.specs.keys() - seen
        if missing:
            raise KeyError(f"publish is missing {len(missing)} tensors, e.g. {sorted(missing)[:3]}")
        local.sequence += 1
        local.store.set(f"publish/{local.sequence}", str(version))
        errors: list[BaseException] = []

        sequence = local.sequence

        def send() -> None:
            try:
                for flat in local.buffers:
                    local.group.broadcast(flat, 0).wait()
                if local.device.type == "cuda":
                    torch.cuda.synchronize(local.device)
                # A sender's broadcast can finish before the receiver has the data: wait for its acknowledgement,
                # so that once publish returns the generator reads this version (as with SharedWeights).
                acks = [f"ack/{sequence}/{r}" for r in range(1, self.receivers + 1)]
                local.store.wait(acks, datetime.timedelta(seconds=self.timeout_s))
                for key in [*acks, f"publish/{sequence}"]:
                    local.store.delete_key(key)
            except BaseException as exc:  # reported to the caller below
                errors.append(exc)

        self._run_bounded(local, send, f"publish of version {version}", errors)
        local.version = version

    def close(self) -> None:
        """Trainer side: tell the receiver to stop (best effort). Generator side: stop the receiver thread. Then
        release the process group (a group left to the interpreter's exit can abort the process)."""
        local = self._local
        if local is None:
            return
        try:
            if local.rank_receiver:
                local.stopping.set()
                if local.thread is not None:
                    local.thread.join(1.0)
            else:
                local.sequence += 1
                local.store.set(f"publish/{local.sequence}", str(_STOP))
        except Exception:  # the peer may be gone already
            pass
        finally:
            self._local = None
            local.group = None

    def _run_bounded(self, local: _LocalState, fn: Any, what: str, errors: list[BaseException]) -> None:
        thread = threading.Thread(target=fn, name="scalerl-weight-sync", daemon=True)
        thread.start()
        thread.join(self.timeout_s)
        if thread.is_alive():
            local.broken = f"{what} did not complete within {self.timeout_s:g} s"
            raise WeightSyncError(local.broken + " (is the generator alive? see weight_sync.timeout_s)")
        if errors:
            local.broken = f"{what} failed: {type(errors[0]).__name__}: {str(errors[0])[:300]}"
            raise WeightSyncError(local.broken) from errors[0]

    # ---- generator side (rank 1) ---------------------------------------------------------------------------

    def connect_receiver(self, device: torch.device | str, rank: int = 1) -> None:
        """Join the group as generator ``rank`` (1..receivers), allocate the staging buffers, start the receiver
        thread."""
        if not 1 <= rank <= self.receivers:
            raise ValueError(f"receiver rank must be 1..{self.receivers}, got {rank}")
        local = self._connect(rank, device)
        local.rank_receiver = True
        local.buffers, local.views = self._allocate(local.device)
        local.thread = threading.Thread(
            target=self._receive_loop, args=(local,), name="scalerl-weight-recv", daemon=True
        )
        local.thread.start()

    @property
    def tensors(self) -> dict[str, Tensor]:
        """Generator side: the received weights (staging views; read them through ``read_into``)."""
        return self._require().views

    def wait_for_version(self, version: int, timeout_s: float | None = None) -> int:
        """Generator side: block until ``version`` (or newer) was received; raises ``WeightSyncError`` on timeout
        or when the receiver failed."""
        local = self._require()
        limit = self.timeout_s if timeout_s is None else timeout_s
        with local.changed:
            ok = local.changed.wait_for(
                lambda: local.broken is not None or (local.version is not None and local.version >= version), limit
            )
            if local.broken is not None:
                raise WeightSyncError(local.broken)
            if not ok:
                raise WeightSyncError(f"no weights of version >= {version} within {limit:g} s")
            assert local.version is not None
            return local.version

    def read_into(self, target: Mapping[str, Tensor]) -> int:
        """Copy the latest received weights into ``target`` (tensors updated in place); returns their version."""
        local = self._require()
        with local.changed, torch.no_grad():
            if local.broken is not None:
                raise WeightSyncError(local.broken)
            if local.version is None:
                raise WeightSyncError("no weights received yet")
            for name, src in local.views.items():
                target[name].copy_(src)
            return local.version

    def _receive_loop(self, local: _LocalState) -> None:
        sequence = 0
        try:
            while True:
                sequence += 1
                key = f"publish/{sequence}"
                while not local.store.check([key]):  # no deadline: a trainer step may take long
                    if local.stopping.is_set():
                        return
                    time.sleep(_NOTICE_POLL_S)
                version = int(local.store.get(key))
                if version == _STOP:
                    return
                with local.changed, torch.no_grad():
                    for flat in local.buffers:
                        local.group.broadcast(flat, 0).wait()
                    if local.device.type == "cuda":
                        torch.cuda.synchronize(local.device)
                    local.version = version
                    local.changed.notify_all()
                local.store.set(f"ack/{sequence}/{local.rank}", str(version))
        except BaseException as exc:
            with local.changed:
                local.broken = f"weight receiver failed: {type(exc).__name__}: {str(exc)[:300]}"
                local.changed.notify_all()

    def _require(self) -> _LocalState:
        if self._local is None:
            raise RuntimeError("not connected: call connect_sender or connect_receiver first")
        return self._local


class _LocalState:
    """The per-process side of a connection (never pickled)."""

    def __init__(self, *, store: Any, group: Any, device: torch.device, rank: int) -> None:
        self.rank = rank
        self.store = store
        self.group = group
        self.device = device
        self.version: int | None = None
        self.sequence = 0
        self.broken: str | None = None
        self.rank_receiver = False
        self.buffers: list[Tensor] = []  # one flat tensor per bucket; ``views`` are the named tensors inside them
        self.views: dict[str, Tensor] = {}
        self.changed = threading.Condition()
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
