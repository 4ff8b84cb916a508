"""From the command line: `scalerl runs`, `scalerl experiments`, `scalerl resume|retry RUN`, names found in
whichever experiment holds them, and the policy of an own-runs experiment (`experiment create --policy`,
`experiment policy`)."""

from __future__ import annotations

from scalerl.client import Client, Point
from tests.client.conftest import Service
from tests.integrations.test_own_runs_cli import invoke


def test_list_resume_retry_and_names_across_experiments(service: Service) -> None:
    with Client(service.url, service.token) as api:
        run = api.register_run("lr-2e-6", experiment="sweep-a")
        api.post_points(run.id, [Point.make(1, 1.0, 0.1)])
        api.report_status(run.id, "succeeded", "done")
        other = api.register_run("crashy", experiment="sweep-a")
        api.post_points(other.id, [Point.make(1, 1.0, 0.1)])
        api.report_status(other.id, "failed", "CUDA error")
    code, out = invoke(service, "experiments")
    assert code == 0 and "sweep-a" in out and "1 failed, 1 succeeded" in out, out
    code, out = invoke(service, "runs", "--experiment", "sweep-a")
    assert code == 0 and "lr-2e-6  succeeded" in out and "crashy  failed" in out, out
    code, out = invoke(service, "runs", "--status", "failed")
    assert code == 0 and "crashy" in out and "lr-2e-6" not in out, out

    # a name is found in the one experiment that has it (it used to be looked for in 'default' only)
    code, out = invoke(service, "resume", "lr-2e-6")
    assert code == 0 and f"run lr-2e-6 (id {run.id}): queued" in out, out
    code, out = invoke(service, "retry", "crashy")
    assert code == 0 and "queued" in out, out
    code, out = invoke(service, "retry", "lr-2e-6")  # queued now: not a failed run
    assert code == 2 and "only failed or lost runs can be retried" in out and "Traceback" not in out, out
    with Client(service.url, service.token) as api:
        api.register_run("lr-2e-6", experiment="sweep-b")
    code, out = invoke(service, "stop", "lr-2e-6")
    assert code == 2 and "2 experiments have a run named 'lr-2e-6'" in out, out
    code, out = invoke(service, "stop", "lr-2e-6", "--experiment", "sweep-b")
    assert code == 0 and "stopped" in out, out
    code, out = invoke(service, "runs", "--experiment", "nope")
    assert code == 2 and "no experiment named 'nope'" in out


def test_policy_of_an_own_runs_experiment(service: Service) -> None:
    code, out = invoke(service, "experiment", "create", "auto-sweep", "--policy", "mode=auto_stop",
                       "--policy", "min_gain=0.05")  # fmt: skip
    assert code == 0 and "policy auto_stop" in out, out
    code, out = invoke(service, "experiment", "policy", "auto-sweep")
    assert code == 0 and "policy auto_stop (min_gain=0.05)" in out, out
    code, out = invoke(service, "experiment", "policy", "auto-sweep", "mode=recommend")
    assert code == 0 and "policy recommend (the defaults)" in out, out
    code, out = invoke(service, "experiment", "policy", "auto-sweep", "p_stop=2")
    assert code == 2 and "p_stop" in out and "Traceback" not in out, out
    code, out = invoke(service, "experiment", "policy", "auto-sweep", "nonsense")
    assert code == 2 and "write KEY=VALUE" in out, out


def test_importing_a_file_again_adds_to_the_same_finished_run(service: Service, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Imported runs end `succeeded`; importing the file again must not start `<name>-2` (resume="auto" would)."""
    log = tmp_path / "again.jsonl"
    log.write_text("".join(f'{{"step": {s}, "gpu_hours": {s * 0.1}, "pass_rate": {0.02 * s}}}\n' for s in range(1, 21)))
    for _ in range(2):
        code, out = invoke(service, "import", str(log), "--experiment", "imports")
        assert code == 0 and "run again (id" in out, out
    with Client(service.url, service.token) as api:
        exp = api.find_experiment("imports")
        assert exp is not None
        runs = api.list_runs(int(exp["id"]))
        assert [(r.name, r.status, r.n_points) for r in runs] == [("again", "succeeded", 20)]
