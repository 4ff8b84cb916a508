"""The data files the forecaster ships with (``shape_prior.json``, ``forecast_calibration.json``), read one way.

They are package data of ``rl_core.scaling.fit`` (``pyproject.toml``, ``[tool.setuptools.package-data]``). An
install that lacks one (a wheel built without its package data, a copied tree) cannot give the numbers the docs and
the backtest describe, so reading one that is missing or unreadable raises :class:`ShippedDataError`, which names
the file and the fix, never a fallback to other numbers. The service and the workers load both at start
(``scalerl.cli.errors.require_shipped_data``: ``scalerl server``, ``scalerl worker``, ``scalerl up``), so a broken
install fails there, not in the first assessment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PRIOR_FILE = HERE / "shape_prior.json"
CALIBRATION_FILE = HERE / "forecast_calibration.json"


class ShippedDataError(RuntimeError):
    """A data file that ships with scalerl is missing or unreadable: the install is broken."""


def read_shipped(path: Path) -> Any:
    """The JSON document of a shipped data file; :class:`ShippedDataError` if it is missing or not valid JSON."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ShippedDataError(
            f"scalerl's shipped data file {path.name} cannot be read at {path} ({exc.strerror or exc}): this install "
            "is incomplete (a wheel built without its package data?); reinstall scalerl from a complete wheel or "
            "checkout. The forecaster does not run without it."
        ) from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ShippedDataError(
            f"scalerl's shipped data file {path} is not valid JSON ({exc}): reinstall scalerl"
        ) from exc
