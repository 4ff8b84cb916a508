"""The base of every REST body: request bodies are strict (:class:`Strict`), and every error answer is
:class:`ErrorOut` (``{"detail": ...}``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Request bodies: unknown keys and wrong types are refused (no string-to-number or bool-to-number coercion)."""

    model_config = ConfigDict(extra="forbid", strict=True)


class ErrorOut(BaseModel):
    detail: Any = Field(description="What was wrong and what is allowed (a string, or a list of validation errors).")
