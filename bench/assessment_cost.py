"""What parsing an experiment's settings costs an assessment: ``current_state`` and one whole
assessment of an experiment of ``--runs`` runs, measured in this checkout and, in the same invocation, in another
checkout (``--baseline-root``, e.g. a ``git worktree`` of the commit before the ExperimentSpec).

Each root runs the same probe in a subprocess (its own imports): a fresh SQLite database at the head migration, one
experiment whose document has a non-default policy with a guard rule and a fit spec, ``--runs`` runs without points
(so the fits are the trivial "insufficient data" ones and what is timed is the service's own work around them:
reading the runs, parsing settings, the state digest, the decisions' bookkeeping). Median of ``--repeats``.

    git worktree add /tmp/scalerl-before 93cf8fe
    .venv/bin/python bench/assessment_cost.py --runs 4096 --baseline-root /tmp/scalerl-before
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, statistics, sys, time
from pathlib import Path
runs_n, repeats, db = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
# The checkout under test, not the editable install of another one: drop setuptools' editable finders.
sys.meta_path = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
try:  # the layered server
    from server.store.migrate import upgrade
    from server.store.db import make_engine, read_session
    from server.store.models import Experiment, Run
    from server.assess.assessing import build_assessment, current_state
    from server.assess.recommending import FitCache, experiment_runs
    from server.lifecycle.spec import ExperimentSpec
    layout = "layered"
except ImportError:  # the flat server before it
    from server.migrate import upgrade
    from server.db import make_engine, read_session
    from server.models import Experiment, Run
    from server.assessing import build_assessment, current_state
    from server.recommending import FitCache, experiment_runs
    ExperimentSpec = None
    layout = "flat"
url = f"sqlite:///{db}"
upgrade(url)
engine = make_engine(url)
document = {
    "name": "cost",
    "compute_unit": "gpu_hours",
    "fit": {"prior": "public", "level": 0.8},
    "policy": {
        "mode": "recommend", "min_gain": 0.02, "guards": [{"metric": "train/truncation_rate", "max_value": 0.15}]
    },
}
from sqlalchemy.orm import Session
with Session(engine) as s, s.begin():
    exp = Experiment(name="cost", document=document)
    s.add(exp)
    s.flush()
    s.add_all([Run(experiment_id=exp.id, name=f"run-{i}", status="running", budget=100.0) for i in range(runs_n)])
    exp_id = exp.id
def spec_of(e):
    return ExperimentSpec.of(e) if ExperimentSpec is not None else e
state_ms, assess_s = [], []
cache = FitCache()
with read_session(engine) as reader:
    exp = reader.get(Experiment, exp_id)
    runs = experiment_runs(reader, exp)
    for _ in range(repeats):
        t = time.perf_counter()
        current_state(spec_of(exp), runs)  # the "after" side builds its spec here: the parse is timed too
        state_ms.append((time.perf_counter() - t) * 1000)
    for _ in range(max(1, repeats // 5)):
        t = time.perf_counter()
        build_assessment(reader, spec_of(exp), cache)
        assess_s.append(time.perf_counter() - t)
print(json.dumps({"layout": layout, "runs": runs_n, "current_state_ms": statistics.median(state_ms),
                  "assessment_s": statistics.median(assess_s)}))
"""


def measure(root: Path, runs: int, repeats: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [sys.executable, "-c", PROBE, str(runs), str(repeats), str(Path(tmp) / "cost.db")],
            cwd=root,
            env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
        )
    if out.returncode != 0:
        raise SystemExit(f"the probe failed in {root}:\n{out.stderr[-3000:]}")
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--baseline-root", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=3, help="the roots take turns this many times (load drifts)")
    args = parser.parse_args()
    roots = [("this checkout", REPO)]
    if args.baseline_root is not None:
        roots.insert(0, ("baseline", args.baseline_root.resolve()))
    seen: dict[str, list[dict[str, object]]] = {label: [] for label, _ in roots}
    for _ in range(args.rounds):
        for label, root in roots:
            seen[label].append(measure(root, args.runs, args.repeats))
    print(f"| code | layout | runs | current_state, ms | one assessment, s | (medians over {args.rounds} rounds) |")
    print("|---|---|---|---|---|---|")
    for label, results in seen.items():
        state = statistics.median(float(str(r["current_state_ms"])) for r in results)
        assess = statistics.median(float(str(r["assessment_s"])) for r in results)
        first = results[0]
        print(f"| {label} | {first['layout']} | {first['runs']} | {state:.1f} | {assess:.2f} | |")


if __name__ == "__main__":
    main()
