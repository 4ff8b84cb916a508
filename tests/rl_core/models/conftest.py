"""The tiny model's fixtures (tests/support/tiny.py), one torch thread per test."""

from tests.support.tiny import model, one_thread, tokenizer

__all__ = ["model", "one_thread", "tokenizer"]
