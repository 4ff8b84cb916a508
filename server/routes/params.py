"""Path and query parameter types shared by the routes (bounded so no database integer can overflow, and so no
answer grows past a page of runs)."""

from __future__ import annotations

from typing import Annotated

from fastapi import HTTPException, Path, Query

from server.base.types import MAX_ID

RunId = Annotated[int, Path(ge=1, le=MAX_ID, description="Run id")]
ExperimentId = Annotated[int, Path(ge=1, le=MAX_ID, description="Experiment id")]
TokenId = Annotated[int, Path(ge=1, le=MAX_ID, description="Token id")]
Offset = Annotated[int, Query(ge=0, le=MAX_ID)]
#: Text query parameters never carry NUL: PostgreSQL refuses it in any text value (a 500 there, not a 422).
NO_NUL = r"^[^\x00]*$"

#: Runs in one page of a list that carries their full recipes (each may hold strings of up to 16,000 characters).
RECIPES_PAGE = 256
WithRecipes = Annotated[
    bool,
    Query(
        description=f"Answer each run's full recipe too (pages of at most {RECIPES_PAGE} runs); by default a list "
        "carries each run's overrides (what it changes) and recipe null."
    ),
]


def check_recipe_page(recipes: bool, limit: int) -> None:
    """A 422 for a page of full recipes longer than :data:`RECIPES_PAGE` runs (lists are bounded like requests)."""
    if recipes and limit > RECIPES_PAGE:
        raise HTTPException(
            422, f"with recipes=true a page holds at most {RECIPES_PAGE} runs, got {limit}; page with offset"
        )
