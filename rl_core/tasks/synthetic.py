"""Synthetic verifiable tasks with difficulty knobs, generated offline from a seed.

Every task draws problems from its own distribution with ``random.Random`` streams derived from ``seed``:

- ``validation`` is drawn first, then ``train`` excluding every validation prompt, so the splits are disjoint;
- ``demonstrations(n, seed)`` (supervised warm-up data for the base checkpoint) excludes validation prompts too;
- the same config gives the same problems, ids and demonstrations in every process.

A demonstration is ``<think>{scratchpad}</think>{answer}``; with ``scratchpad: false`` it is
``<think></think>{answer}``. The reward is exact match of the answer (text after the last ``</think>``) with
the reference. Knobs (digit counts, list lengths, modulus, number of terms) dial difficulty; longer chains of
steps compound per-token errors, which is what RL sharpens.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rl_core.tasks.base import THINK_END, THINK_START, Problem, Split, check_split, extract_answer
from rl_core.tasks.config import AdditionTaskConfig, ModularTaskConfig, SortTaskConfig, SyntheticTaskConfig

__all__ = ["Example", "SyntheticTask", "make_addition", "make_modular", "make_sort"]


@dataclass(frozen=True)
class Example:
    """One generated problem with its worked solution."""

    prompt: str
    scratchpad: str
    answer: str


Maker = Callable[[random.Random], Example]


def _number(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)


def make_addition(cfg: AdditionTaskConfig) -> Maker:
    """``a+b=`` with column-wise scratchpad ``7+5+0=12,4+8+1=13`` (digits + carry-in = column sum), right to left."""

    def make(rng: random.Random) -> Example:
        nums = [_number(rng, rng.randint(cfg.digits_min, cfg.digits_max)) for _ in range(cfg.operands)]
        cols: list[str] = []
        carry = 0
        width = max(len(str(n)) for n in nums)
        for i in range(width):
            digits = [(n // 10**i) % 10 for n in nums]
            total = sum(digits) + carry
            cols.append("+".join(str(d) for d in digits) + f"+{carry}={total}")
            carry = total // 10
        return Example("+".join(str(n) for n in nums) + "=", ",".join(cols), str(sum(nums)))

    return make


def make_sort(cfg: SortTaskConfig) -> Maker:
    """``sort:3172=`` -> ``1237``; the scratchpad counts each symbol in order (``1:1,2:1,3:1,7:1``)."""
    alphabet = "0123456789"[: cfg.alphabet]

    def make(rng: random.Random) -> Example:
        items = [rng.choice(alphabet) for _ in range(rng.randint(cfg.length_min, cfg.length_max))]
        counts = [f"{c}:{items.count(c)}" for c in alphabet if c in items]
        return Example("sort:" + "".join(items) + "=", ",".join(counts), "".join(sorted(items)))

    return make


def make_modular(cfg: ModularTaskConfig) -> Maker:
    """``3+9+5 mod 7=`` with running residues ``3,5,3`` in the scratchpad; answer the final residue."""

    def make(rng: random.Random) -> Example:
        terms = [rng.randrange(cfg.modulus) for _ in range(rng.randint(cfg.terms_min, cfg.terms_max))]
        running: list[str] = []
        acc = 0
        for t in terms:
            acc = (acc + t) % cfg.modulus
            running.append(str(acc))
        prompt = "+".join(str(t) for t in terms) + f" mod {cfg.modulus}="
        return Example(prompt, ",".join(running), str(acc))

    return make


def _maker(cfg: SyntheticTaskConfig) -> Maker:
    if isinstance(cfg, AdditionTaskConfig):
        return make_addition(cfg)
    if isinstance(cfg, SortTaskConfig):
        return make_sort(cfg)
    return make_modular(cfg)


def _draw(
    make: Maker, rng: random.Random, n: int, exclude: set[str], *, key: str, distinct: bool = True
) -> list[Example]:
    """``n`` examples whose prompts are not in ``exclude`` (and distinct if ``distinct``); a clear error naming
    ``key`` if the problem space is too small."""
    out: list[Example] = []
    seen = set(exclude)
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise ValueError(
                f"{key}: could only draw {len(out)} distinct problems out of {n}; "
                "the problem space is too small for this size (raise the difficulty knobs or lower the size)"
            )
        ex = make(rng)
        if ex.prompt not in seen:
            if distinct:
                seen.add(ex.prompt)
            out.append(ex)
    return out


class SyntheticTask:
    """A synthetic task built from a config (see module docstring for the invariants)."""

    def __init__(self, cfg: SyntheticTaskConfig) -> None:
        self.config = cfg
        self.name: str = cfg.kind
        self._make = _maker(cfg)
        val = _draw(
            self._make, random.Random(f"{cfg.seed}:validation"), cfg.validation_size, set(), key="validation_size"
        )
        self._val_prompts = {e.prompt for e in val}
        train = _draw(
            self._make, random.Random(f"{cfg.seed}:train"), cfg.train_size, self._val_prompts, key="train_size"
        )
        self._examples: dict[str, Example] = {}
        self._splits: dict[Split, list[Problem]] = {"validation": [], "train": []}
        for split, examples in (("validation", val), ("train", train)):
            for i, ex in enumerate(examples):
                problem = Problem(id=f"{split[0]}{i:06d}", prompt=ex.prompt, answer=ex.answer)
                self._splits[split].append(problem)  # type: ignore[index]
                self._examples[problem.id] = ex

    def problems(self, split: Split) -> Sequence[Problem]:
        """The fixed problem list of ``split`` (validation never overlaps train)."""
        return tuple(self._splits[check_split(split)])

    def reward(self, problem: Problem, completion: str) -> float:
        """1.0 iff the answer after ``</think>`` equals the reference exactly (after stripping whitespace)."""
        answer = extract_answer(completion)
        return 1.0 if answer is not None and answer == problem.answer else 0.0

    def demonstration(self, problem: Problem) -> str:
        """The worked completion for a problem of this task: ``<think>scratchpad</think>answer``."""
        ex = self._examples.get(problem.id)
        if ex is None or ex.prompt != problem.prompt:
            raise KeyError(f"problem {problem.id!r} does not belong to this task")
        return self._format(ex)

    def demonstrations(self, n: int, *, seed: int) -> list[tuple[str, str]]:
        """``n`` (prompt, completion) pairs for supervised warm-up, drawn with replacement from the task's
        distribution (they may repeat train prompts) but never using a validation prompt."""
        rng = random.Random(f"{self.config.seed}:demo:{seed}")
        examples = _draw(self._make, rng, n, self._val_prompts, key="demonstrations", distinct=False)
        return [(ex.prompt, self._format(ex)) for ex in examples]

    def _format(self, ex: Example) -> str:
        scratch = ex.scratchpad if self.config.scratchpad else ""
        return f"{THINK_START}{scratch}{THINK_END}{ex.answer}"
