"""The dashboard's new-experiment form, driven as a user does: open it, fill labelled fields, submit and read the
error shown next to a field."""

from __future__ import annotations

from typing import Any


def open_new_experiment(page: Any, url: str, fields: dict[str, str]) -> None:
    """Open ``url``'s new-experiment page and fill each field, found by its label, in the order given."""
    page.goto(f"{url}/experiments/new")
    for label, value in fields.items():
        page.get_by_label(label).fill(value)


def field_error(page: Any, button: str, error_id: str) -> str:
    """Click the button named ``button`` and wait for the element ``#error_id`` to be visible; its text."""
    page.get_by_role("button", name=button).click()
    error = page.locator(f"#{error_id}")
    error.wait_for(state="visible")
    return str(error.inner_text())
