"""Prototype: a Gaussian prior on the ceiling's headroom over the recent level (A - mean of the last 3 evaluations),
learned leave-one-source-out from oracle fits, on the per-run point forecast (MAP; no posterior, no grid fit).

Run: .venv/bin/python bench/headroom_prior.py [--sd-scale 1.0]
Prints the median tail MAE (signed error in brackets) of the per-run forecast without and with the headroom prior,
and of the power law, on shared/curves and the engine grids at cut-offs 0.3 and 0.5 (medians over near-duplicate
groups, as the backtest). Both sigmoid columns use the shape prior learned leave-one-source-out.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Callable
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from rl_core.scaling.fit.data import MIN_POINTS, prepare_curve
from rl_core.scaling.fit.forecast import CurveFit, FitOptions, fit_curve
from rl_core.scaling.fit.model import sigmoid
from rl_core.scaling.fit.prior import ShapePrior
from rl_core.scaling.fit.prior_learn import LEARN_CUTOFFS, learn_prior, oracle_shapes
from rl_core.scaling.measure.corpus import Curve, load_curves, near_duplicate_groups, source_of

ROOT = Path(__file__).resolve().parents[1]
RECENT = 3


def oracle_headroom(c: Curve) -> list[tuple[str, float]]:
    """(curve, A of the oracle fit - recent level) at each learning cut-off."""
    out = []
    for f in LEARN_CUTOFFS:
        m = c.x <= c.x[0] + f * (c.x[-1] - c.x[0])
        window = prepare_curve(c.x[m], c.y[m])
        if window.n_positive < MIN_POINTS:
            continue
        fit = fit_curve(c.x, c.y, burn_in=window.burn_in, intervals=False, power_law=False, prior=None)
        if fit.params is not None and fit.status == "ok":
            out.append((c.name, fit.params.A - float(np.mean(c.y[m][-RECENT:]))))
    return out


def map_with_headroom(
    xs: np.ndarray, ys: np.ndarray, fit: CurveFit, mu: float, sd: float, prior: ShapePrior
) -> Callable[[np.ndarray], np.ndarray]:
    """The shape-prior MAP refitted with A ~ N(recent level + mu, sd^2), R0 as the fit had it."""
    p = fit.params
    assert p is not None
    keep = (xs >= fit.burn_in) | (xs == 0)
    x, y = xs[keep], ys[keep]
    sigma = max(float(np.std(p(x) - y)), 1e-3)
    log_seen = float(np.log(x.max()))
    root, mean = prior.sqrt_precision, np.asarray(prior.mean)
    target = float(np.mean(ys[-RECENT:])) + mu

    def residuals(t: np.ndarray) -> np.ndarray:
        a, lb, m = t
        shape = sigma * (root @ (np.array([m - log_seen, lb]) - mean))
        return np.concatenate([sigmoid(x, p.R0, a, np.exp(lb), np.exp(m)) - y, shape, [sigma * (a - target) / sd]])

    start = np.array([p.A, np.log(p.B), np.log(p.C_mid)])
    lo, hi = [0.0, np.log(0.02), log_seen - 12], [1.0, np.log(30.0), log_seen + 12]
    a, lb, m = least_squares(residuals, np.clip(start, lo, hi), bounds=(lo, hi)).x
    return lambda z: sigmoid(z, p.R0, a, np.exp(lb), np.exp(m))


Scored = tuple[str, float, dict[str, tuple[float, float]]]


def score(args: tuple[Curve, float, ShapePrior, float, float]) -> Scored | None:
    c, f, prior, mu, sd = args
    m = c.x <= c.x[0] + f * (c.x[-1] - c.x[0])
    xs, ys, xt, yt = c.x[m], c.y[m], c.x[~m], c.y[~m]
    if xt.size == 0:
        return None
    fit = fit_curve(xs, ys, FitOptions(prior=prior, intervals=False))
    if fit.params is None or fit.power_law is None:
        return None
    preds = {
        "sigmoid": fit.params(xt),
        "+headroom": map_with_headroom(xs, ys, fit, mu, sd, prior)(xt),
        "power law": fit.power_law(xt),
    }
    return c.name, f, {k: (float(np.mean(np.abs(v - yt))), float(np.mean(v - yt))) for k, v in preds.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sd-scale", type=float, default=1.0)
    args = ap.parse_args()
    shared, _ = load_curves(ROOT.parent / "shared" / "curves")
    engine, _ = load_curves(ROOT / "tests" / "fixtures" / "engine_grids", "train_flops", "pass_rate")
    curves = shared + engine
    groups = near_duplicate_groups(curves)
    with Pool(2) as pool:
        headroom = dict(zip([c.name for c in curves], pool.map(oracle_headroom, curves), strict=True))
        found = pool.starmap(oracle_shapes, [(c.name, c.x, c.y) for c in curves])
        shapes = dict(zip([c.name for c in curves], found, strict=True))
    learned: dict[str, tuple[ShapePrior, float, float]] = {}
    for source in sorted({source_of(c.name) for c in curves}):
        train = [c for c in curves if source_of(c.name) != source]
        cases = [h for c in train for h in headroom[c.name]]
        per_group = Counter(groups[n] for n, _ in cases)
        w = np.array([1.0 / per_group[groups[n]] for n, _ in cases])
        v = np.array([h for _, h in cases])
        mu = float(np.sum(w * v) / w.sum())
        sd = float(np.sqrt(np.sum(w * (v - mu) ** 2) / w.sum()))
        prior = learn_prior([s for c in train for s in shapes[c.name]], groups, [source_of(c.name) for c in train])
        learned[source] = (prior, mu, sd * args.sd_scale)
        print(f"{source}: headroom mean {mu:.4f}, sd {sd:.4f}")
    jobs = [(c, f, *learned[source_of(c.name)]) for c in curves for f in (0.3, 0.5)]
    with Pool(2) as pool:
        results: list[Scored] = [r for r in pool.map(score, jobs) if r is not None]
    saturated = {c.name: c.frac90 < 0.1 for c in curves}
    for corpus in ("shared", "engine"):
        for subset in ("informative", "all"):
            for f in (0.3, 0.5):
                line = f"{corpus:6s} {subset:11s} {f}"
                for method in ("sigmoid", "+headroom", "power law"):
                    mae: dict[str, list[float]] = defaultdict(list)
                    bias: dict[str, list[float]] = defaultdict(list)
                    for name, cut, d in results:
                        in_corpus = ("/" in name) == (corpus == "engine")
                        if cut == f and in_corpus and (subset == "all" or not saturated[name]):
                            mae[groups[name]].append(d[method][0])
                            bias[groups[name]].append(d[method][1])
                    med = np.median([np.mean(x) for x in mae.values()])
                    signed = np.median([np.mean(x) for x in bias.values()])
                    line += f"  {method}={med:.4f} ({signed:+.3f})"
                print(line)


if __name__ == "__main__":
    main()
