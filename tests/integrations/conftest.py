"""The live service fixture of the client tests (tests/client/conftest.py)."""

from tests.client.conftest import service

__all__ = ["service"]
