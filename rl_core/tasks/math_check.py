"""Math answer checking: extract the final answer and decide equivalence with a reference.

``answers_match(reference, completion)`` first strips the thinking part (everything up to the last
``</think>``; a completion whose thinking never ended is wrong), then compares with Math-Verify when it is
installed (``pip install math-verify``: LaTeX/expression parsing, ``\\boxed{}``, fractions vs decimals, sets,
intervals) and with a SymPy fallback otherwise. Both are deterministic and never raise on bad input.

Math-Verify times out parsing with ``signal.alarm``, which only works in the main thread: elsewhere the check
runs without its timeout (inputs are short answer strings, never whole documents).
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from typing import Any

from rl_core.tasks.base import extract_answer

__all__ = ["answers_match", "extract_boxed", "have_math_verify", "normalize_answer", "sympy_equal"]

_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?")


@lru_cache(maxsize=1)
def _math_verify() -> Any:
    try:
        import math_verify
    except ImportError:
        return None
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    return math_verify


def have_math_verify() -> bool:
    """True if the maintained checker (Math-Verify) is importable."""
    return _math_verify() is not None


def extract_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``) with balanced braces, or None."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    brace = text.find("{", start)
    if brace < 0:
        return None
    depth = 0
    for i in range(brace, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[brace + 1 : i]
    return None


_LATEX_SUBS: tuple[tuple[str, str], ...] = (
    (r"\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}", r"(\1)/(\2)"),
    (r"\\frac(\d)(\d)", r"(\1)/(\2)"),
    (r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)"),
    (r"\\sqrt(\d+)", r"sqrt(\1)"),
    (r"\\(left|right|displaystyle|!|,|;|:)", ""),
    (r"\\(cdot|times)", "*"),
    (r"\\pi", "pi"),
    (r"\\infty", "oo"),
    (r"\^\{([^{}]*)\}", r"**(\1)"),
    (r"\^", "**"),
    (r"\\text\{([^{}]*)\}", r"\1"),
    (r"\\%|%|\$|\\\(|\\\)|\\\[|\\\]", ""),
)


def normalize_answer(text: str) -> str:
    """A plain-text normal form of a short LaTeX answer (for the SymPy fallback and string comparison)."""
    s = text.strip().rstrip(".")
    boxed = extract_boxed(s)
    if boxed is not None:
        s = boxed
    for _ in range(3):  # nested fractions / roots
        for pattern, repl in _LATEX_SUBS:
            s = re.sub(pattern, repl, s)
    s = s.replace("{", "(").replace("}", ")")
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)
    return re.sub(r"\s+", "", s)


def sympy_equal(reference: str, answer: str) -> bool:
    """SymPy fallback: equal normal forms, or expressions whose difference simplifies to 0 (|diff| < 1e-6)."""
    a, b = normalize_answer(reference), normalize_answer(answer)
    if not a or not b:
        return False
    if a == b:
        return True
    try:
        import sympy
        from sympy.parsing.sympy_parser import (
            convert_xor,
            implicit_multiplication_application,
            parse_expr,
            standard_transformations,
        )

        transformations = (*standard_transformations, implicit_multiplication_application, convert_xor)
        ea = parse_expr(a, transformations=transformations, evaluate=True)
        eb = parse_expr(b, transformations=transformations, evaluate=True)
        diff = sympy.simplify(ea - eb)
        if diff == 0:
            return True
        value = complex(sympy.N(diff))
        return abs(value) < 1e-6
    except Exception:  # unparsable or non-numeric answers are simply not equal
        return False


def _final_answer_text(answer: str) -> str:
    """The boxed answer if there is one, else the last number, else the whole answer text."""
    boxed = extract_boxed(answer)
    if boxed is not None:
        return boxed
    numbers = _NUMBER.findall(answer)
    return numbers[-1] if numbers else answer


def _math_verify_equal(mv: Any, reference: str, answer: str) -> bool:
    main = threading.current_thread() is threading.main_thread()
    parse_kw: dict[str, Any] = {} if main else {"parsing_timeout": None}
    verify_kw: dict[str, Any] = {} if main else {"timeout_seconds": None}
    gold = mv.parse(f"${reference}$", **parse_kw) or mv.parse(reference, **parse_kw)
    if not gold:
        return False
    candidates = [answer]
    if extract_boxed(answer) is None:
        candidates.append(f"${_final_answer_text(answer)}$")
    for target in candidates:
        pred = mv.parse(target, **parse_kw)
        if pred and mv.verify(gold, pred, **verify_kw):
            return True
    return False


def answers_match(reference: str, completion: str) -> bool:
    """True iff the completion's final answer (after stripping ``<think>…</think>``) equals ``reference``."""
    answer = extract_answer(completion)
    if not answer:
        return False
    mv = _math_verify()
    if mv is not None:
        try:
            if _math_verify_equal(mv, reference, answer):
                return True
        except Exception:  # Math-Verify failed on odd input: fall back to SymPy
            pass
    return sympy_equal(reference, answer) or sympy_equal(reference, _final_answer_text(answer))
