import numpy as np
import pytest

from rl_core.scaling.fit.fit_fast import fit_fast, fit_fixed_ceiling
from rl_core.scaling.fit.fit_paper import PaperGrid, fit_paper
from rl_core.scaling.fit.search import SearchBox
from tests.scaling.conftest import make_curve, random_curve


def test_fast_recovers_noiseless_parameters() -> None:
    x, y = make_curve(noise=0.0)
    fit = fit_fast(x, y, 0.1, SearchBox.for_data(x))
    p = fit.params
    assert fit.sse < 1e-12
    assert np.allclose([p.A, p.B, p.C_mid], [0.6, 1.8, 300.0], rtol=1e-4)


def test_fast_fits_r0_when_asked() -> None:
    x, y = make_curve(noise=0.0, R0=0.2)
    fit = fit_fast(x, y, None, SearchBox.for_data(x))
    assert np.isclose(fit.params.R0, 0.2, atol=1e-5)


def _small_paper_grid(x: np.ndarray, y: np.ndarray) -> PaperGrid:
    return PaperGrid.scaled_to(x[x > 0], y, n_a=15, n_c=15)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("r0", [0.1, None])
def test_fast_never_worse_than_paper(seed: int, r0: float | None) -> None:
    x, y = random_curve(seed, B=(0.5, 4), C_mid=(50, 2000), noise=(0.002, 0.05), n=True)
    grid = _small_paper_grid(x, y)
    paper = fit_paper(x, y, r0, grid)
    assert paper is not None
    fast = fit_fast(x, y, r0, SearchBox.for_data(x, grid.c_mid_range))
    assert fast.sse <= paper.sse * (1 + 1e-9) + 1e-12


def test_paper_grid_is_the_papers() -> None:
    g = PaperGrid.paper()
    assert g.a_values[0] == 0.45 and g.a_values[-1] == 0.8 and g.a_values.size == 71
    assert g.c_mid_values.size == 100 and g.c_mid_range == (100.0, 40000.0)


def test_fixed_ceiling_holds_a() -> None:
    x, y = make_curve(noise=0.0)
    fit = fit_fixed_ceiling(x, y, 0.1, 0.6, SearchBox.for_data(x))
    assert fit.params.A == 0.6
    assert np.isclose(fit.params.B, 1.8, rtol=1e-3)
