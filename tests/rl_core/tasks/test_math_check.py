"""The math checker: equivalent answers match (fractions, decimals, \\boxed{}), thinking is stripped."""

from __future__ import annotations

import threading

import pytest

from rl_core.tasks import answers_match, have_math_verify
from rl_core.tasks.math_check import extract_boxed, normalize_answer, sympy_equal

EQUIVALENT = [
    ("1/2", "0.5"),
    ("1/2", "\\frac{1}{2}"),
    ("0.5", "\\boxed{\\frac{1}{2}}"),
    ("\\frac{1}{2}", "The answer is \\boxed{0.5}."),
    ("\\frac{3}{4}", "\\dfrac{3}{4}"),
    ("\\sqrt{3}", "\\boxed{\\frac{\\sqrt{12}}{2}}"),
    ("4\\pi", "\\boxed{4\\pi}"),
    ("1024", "so we get 2^10 = 1024"),
    ("12", "\\boxed{12}"),
]
DIFFERENT = [
    ("1/2", "\\boxed{0.6}"),
    ("7", "\\boxed{-7}"),
    ("\\frac{3}{10}", "\\boxed{\\frac{1}{3}}"),
    ("6", "the answer is 5"),
]


def test_the_maintained_checker_is_installed() -> None:
    assert have_math_verify()


@pytest.mark.parametrize(("reference", "answer"), EQUIVALENT)
def test_equivalent_answers_match(reference: str, answer: str) -> None:
    assert answers_match(reference, answer)
    assert answers_match(reference, f"<think>Let me think. Maybe \\boxed{{999}}?</think>{answer}")


@pytest.mark.parametrize(("reference", "answer"), DIFFERENT)
def test_different_answers_do_not_match(reference: str, answer: str) -> None:
    assert not answers_match(reference, answer)


def test_thinking_is_stripped_before_checking() -> None:
    assert not answers_match("5", "<think>\\boxed{5}</think>\\boxed{4}")
    assert answers_match("5", "<think>\\boxed{4}</think>\\boxed{5}")
    assert not answers_match("5", "<think>the answer is \\boxed{5}")  # thinking never ended
    assert not answers_match("5", "<think>x</think>")


@pytest.mark.parametrize(("reference", "answer"), EQUIVALENT[:6])
def test_sympy_fallback_agrees_on_equivalences(reference: str, answer: str) -> None:
    assert sympy_equal(reference, answer)


def test_sympy_fallback_rejects_differences_and_garbage() -> None:
    assert not sympy_equal("1/2", "0.6")
    assert not sympy_equal("1/2", "\\frac{")
    assert not sympy_equal("x", "")


def test_boxed_extraction_balances_braces() -> None:
    assert extract_boxed("a \\boxed{1} b \\boxed{\\frac{1}{2}} c") == "\\frac{1}{2}"
    assert extract_boxed("\\boxed{unclosed") is None
    assert normalize_answer("\\boxed{\\frac{1}{2}}") == "(1)/(2)"


def test_checker_works_outside_the_main_thread() -> None:
    results: list[bool] = []
    worker = threading.Thread(target=lambda: results.append(answers_match("1/2", "\\boxed{0.5}")))
    worker.start()
    worker.join()
    assert results == [True]
