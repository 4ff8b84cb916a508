"""W&B exports read as the trainer logged them. A run-history CSV with both ``_step`` (W&B's count
of ``wandb.log`` calls) and the trainer's ``train/global_step`` is keyed on the trainer's step; a panel ("chart")
export's ``<run> - <metric>`` columns are one run each, so ``--y eval/accuracy`` names its metric."""

from __future__ import annotations

import csv
from pathlib import Path

from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.integrations.readers import choose_columns, columns_of, read_any, to_points


def test_history_csv_uses_the_trainers_step_not_wandb_step(tmp_path: Path) -> None:
    export = tmp_path / "history.csv"
    with export.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["_step", "_runtime", "train/global_step", "train/loss", "eval/accuracy"])
        wandb_step = 0
        for step in (10, 20, 30):
            w.writerow([wandb_step, 1.0 * step, step, 1.0 / step, ""])  # the training log of the step
            wandb_step += 1
            w.writerow([wandb_step, 1.0 * step, step, "", 0.01 * step])  # its evaluation: a second wandb.log
            wandb_step += 1
    ((_, history),) = read_any(export).items()
    assert sorted(history) == [10, 20, 30]
    points, _ = to_points(history, choose_columns(columns_of(history)))
    assert [(p.step, p.pass_rate) for p in points] == [(10, 0.1), (20, 0.2), (30, 0.3)]


def test_panel_export_is_one_run_per_column_prefix(tmp_path: Path) -> None:
    export = tmp_path / "panel.csv"
    export.write_text(
        '"Step","grpo-a - eval/accuracy","grpo-a - eval/accuracy__MIN","grpo-b - eval/accuracy"\n'
        + "".join(
            f'"{s}","{0.1 + s / 200:.3f}","{0.1 + s / 200:.3f}","{0.2 + s / 400:.3f}"\n' for s in range(0, 60, 10)
        )
    )
    runs = read_any(export)
    assert sorted(runs) == ["grpo-a", "grpo-b"] and columns_of(runs["grpo-a"]) == ["eval/accuracy"]
    out = tmp_path / "curves"
    result = CliRunner().invoke(cli, ["import", str(export), "--y", "eval/accuracy", "--csv-out", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["grpo-a.csv", "grpo-b.csv"]
    guessed = CliRunner().invoke(cli, ["import", str(export), "--csv-out", str(tmp_path / "guessed")])
    assert guessed.exit_code == 0 and "pass rate: 'eval/accuracy'" in guessed.output, guessed.output
