"""Path and query parameter types shared by the routes (bounded so no database integer can overflow)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from server.types import MAX_ID

RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="Run id")]
ExperimentId = Annotated[int, Path(ge=1, le=MAX_ID, description="Experiment id")]
TokenId = Annotated[int, Path(ge=1, le=MAX_ID, description="Token id")]
Offset = Annotated[int, Query(ge=0, le=MAX_ID)]
