"""Tasks: seeded synthetic problems with disjoint splits and exact rewards; the math JSONL task."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from rl_core.tasks import (
    AdditionTaskConfig,
    MathTask,
    Problem,
    SyntheticTask,
    Task,
    build_task,
    extract_answer,
    parse_task_config,
)

DATA = Path(__file__).resolve().parents[2] / "fixtures" / "math_small.jsonl"
KINDS = ["synthetic-addition", "synthetic-sort", "synthetic-modular"]


@pytest.mark.parametrize("kind", KINDS)
def test_synthetic_tasks_are_seeded_disjoint_and_solved_by_their_demonstrations(kind: str) -> None:
    cfg = {"kind": kind, "train_size": 300, "validation_size": 50, "seed": 3}
    task, again = build_task(cfg), build_task(cfg)
    assert isinstance(task, Task) and task.name == kind
    train, val = task.problems("train"), task.problems("validation")
    assert (len(train), len(val)) == (300, 50)
    assert train == again.problems("train") and val == again.problems("validation")
    assert not {p.prompt for p in train} & {p.prompt for p in val}
    assert len({p.id for p in (*train, *val)}) == 350
    for p in (*train[:20], *val[:20]):
        demo = task.demonstration(p)
        assert demo.startswith("<think>") and "</think>" in demo
        assert task.reward(p, demo) == 1.0
        assert task.reward(p, demo + "0") == 0.0
    other = build_task({**cfg, "seed": 4})
    assert other.problems("train") != train


def test_demonstrations_never_use_validation_prompts_and_are_reproducible() -> None:
    task = build_task({"kind": "synthetic-addition", "digits_max": 1, "train_size": 40, "validation_size": 30})
    assert isinstance(task, SyntheticTask)
    val = {p.prompt for p in task.problems("validation")}
    demos = task.demonstrations(500, seed=1)
    assert len(demos) == 500 and not {p for p, _ in demos} & val
    assert demos == task.demonstrations(500, seed=1) != task.demonstrations(500, seed=2)


def test_addition_scratchpad_and_knobs() -> None:
    task = build_task({"kind": "synthetic-addition", "digits_min": 3, "digits_max": 3, "operands": 3})
    assert isinstance(task, SyntheticTask)
    p = task.problems("train")[0]
    a, b, c = (int(x) for x in p.prompt.rstrip("=").split("+"))
    assert all(100 <= x <= 999 for x in (a, b, c)) and int(p.answer) == a + b + c
    scratch = task.demonstration(p).split("</think>")[0].removeprefix("<think>")
    assert len(scratch.split(",")) == 3
    plain = build_task({"kind": "synthetic-addition", "scratchpad": False})
    assert isinstance(plain, SyntheticTask)
    q = plain.problems("train")[0]
    assert plain.demonstration(q) == f"<think></think>{q.answer}"


def test_rewards_look_only_at_the_answer_after_thinking() -> None:
    task = build_task({"kind": "synthetic-sort", "length_min": 4, "length_max": 4})
    p = task.problems("validation")[0]
    assert task.reward(p, f"<think>{p.answer[::-1]}</think> {p.answer} \n") == 1.0
    assert task.reward(p, f"<think>{p.answer}") == 0.0  # thinking never ended: no answer
    assert task.reward(p, p.answer) == 1.0  # no thinking at all
    assert extract_answer("<think>a</think>b</think>c") == "c"
    assert extract_answer("<think>never closed") is None


@pytest.mark.parametrize(
    ("cfg", "key"),
    [
        ({"kind": "synthetic-addition", "digits_max": 0}, "digits_max"),
        ({"kind": "synthetic-sort", "lenght_min": 2}, "lenght_min"),
        ({"kind": "synthetic-modular", "terms_min": 5, "terms_max": 2}, "terms_min"),
        ({"kind": "nope"}, "nope"),
        ({"kind": "math", "path": "x.jsonl", "template": "no placeholder"}, "template"),
    ],
)
def test_bad_task_configs_name_the_key(cfg: dict[str, object], key: str) -> None:
    with pytest.raises(ValidationError, match=key):
        parse_task_config(cfg)


def test_too_small_problem_space_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="train_size"):
        build_task(AdditionTaskConfig(digits_max=1, train_size=200, validation_size=10))


def test_math_task_reads_jsonl_with_a_seeded_split() -> None:
    task = build_task({"kind": "math", "path": str(DATA), "validation_size": 4})
    assert isinstance(task, MathTask)
    train, val = task.problems("train"), task.problems("validation")
    assert (len(train), len(val)) == (8, 4)
    assert {p.id for p in train} | {p.id for p in val} == {f"m{i}" for i in range(1, 13)}
    assert val == build_task({"kind": "math", "path": str(DATA), "validation_size": 4}).problems("validation")
    first = next(p for p in (*train, *val) if p.id == "m1")
    assert first.answer == "\\frac{1}{2}" and "\\boxed{}" in first.prompt and "\\frac{1}{4}" in first.prompt
    assert task.reward(first, "<think>1/4+1/4 is 0.5</think>The answer is \\boxed{0.5}.") == 1.0
    assert task.reward(first, "<think>\\boxed{1/2}</think>\\boxed{1/3}") == 0.0
    with pytest.raises(ValueError, match="split"):
        task.problems("test")  # type: ignore[arg-type]


def test_math_task_errors_name_file_line_and_key(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"task\.path"):
        build_task({"kind": "math", "path": str(tmp_path / "missing.jsonl")})
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "1+1", "answer": "2"}) + "\n" + json.dumps({"question": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: missing key 'problem'"):
        build_task({"kind": "math", "path": str(bad), "validation_size": 1})
    with pytest.raises(ValueError, match="validation_size"):
        build_task({"kind": "math", "path": str(DATA), "validation_size": 12})


def test_problem_is_immutable() -> None:
    p = Problem("a", "1+1=", "2")
    with pytest.raises(AttributeError):
        p.answer = "3"  # type: ignore[misc]
