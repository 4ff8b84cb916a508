"""A shipped data file that is missing or broken is a clear error naming it, never a fallback (fast, in-process;
the installed-wheel version of this check is in test_wheel.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from rl_core.scaling.fit import calibration, prior
from rl_core.scaling.fit.shipped import ShippedDataError
from scalerl.cli.main import cli

EXAMPLE = Path(__file__).resolve().parents[2] / "scalerl" / "examples" / "qwen2p5_0p5b_gsm8k_ppo.csv"


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    calibration.load_calibration.cache_clear()
    prior.load_prior.cache_clear()
    yield
    calibration.load_calibration.cache_clear()
    prior.load_prior.cache_clear()


def test_the_shipped_files_load() -> None:
    assert calibration.load_calibration().version != "raw"
    assert prior.load_prior() is not None


@pytest.mark.parametrize(
    ("module", "name", "load"),
    [(calibration, "CALIBRATION_FILE", "load_calibration"), (prior, "PRIOR_FILE", "load_prior")],
)
def test_a_missing_file_raises_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, module: object, name: str, load: str
) -> None:
    monkeypatch.setattr(module, name, tmp_path / "gone.json")
    with pytest.raises(ShippedDataError, match=r"gone\.json.*reinstall"):
        getattr(module, load)()


def test_a_malformed_file_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bad = tmp_path / "forecast_calibration.json"
    bad.write_text("{not json")
    monkeypatch.setattr(calibration, "CALIBRATION_FILE", bad)
    with pytest.raises(ShippedDataError, match="not valid JSON"):
        calibration.load_calibration()


def test_the_cli_says_which_file_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(calibration, "CALIBRATION_FILE", tmp_path / "forecast_calibration.json")
    r = CliRunner().invoke(cli, ["fit", str(EXAMPLE), "--x", "cum_response_tokens_est", "--y", "val_score"])
    assert r.exit_code == 2, r.output
    assert "error: scalerl's shipped data file forecast_calibration.json cannot be read" in r.output
