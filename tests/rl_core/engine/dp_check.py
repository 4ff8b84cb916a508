"""Run by ``test_trainer_group.py`` in a fresh interpreter (torch.distributed is per process): a 2-rank DeepSpeed
``TrainerGroup`` against a single torch trainer on the same batch. Prints one JSON line of measured differences."""

from __future__ import annotations

import copy
import json
import sys
import tempfile

import torch

from rl_core.contracts.run_config import parse_run_config
from rl_core.engine.batch import build_train_batch, group_rewards
from rl_core.engine.models import build_trainer_model
from rl_core.engine.trainer import TorchTrainer
from rl_core.engine.trainer_group import TrainerGroup
from tests.rl_core.engine.test_trainers import _groups
from tests.support.tiny_run import tiny_config


def main(stage: int) -> dict[str, object]:
    cfg = parse_run_config(
        tiny_config(
            **{
                "trainer": {"backend": "deepspeed", "zero_stage": stage, "micro_batch_size": 2, "ranks": 2},
                "recipe.loss": {"aggregation": "prompt"},
            }
        )
    )
    model, _ = build_trainer_model(cfg, cfg.model)
    ref = TorchTrainer(copy.deepcopy(model), cfg.recipe, device=torch.device("cpu"), micro_batch_size=3)
    groups = _groups(model)  # 9 rows: shards of 5 and 4, 3 and 2 passes of 2 rows (one zero-weighted pad)
    batch = build_train_batch(groups, group_rewards(groups, cfg.recipe), cfg.recipe, pad_id=0)
    assert batch is not None
    initial = {k: v.detach().clone() for k, v in model.state_dict().items()}
    group = TrainerGroup(cfg, cfg.model, model)
    try:
        losses = []
        for _ in range(2):
            a, b = ref.step(batch), group.step(batch)
            losses.append((a.loss, b.loss, a.tokens, b.tokens))
        want, got = ref.weights(), group.weights()
        weight_diff = max(float((got[k].float() - want[k].float()).abs().max()) for k in want)
        streamed = {k: v.detach().clone() for k, v in group.weight_items()}
        stream_diff = max(float((streamed[k].float() - got[k].float()).abs().max()) for k in got)
        with tempfile.TemporaryDirectory() as tmp:
            group.save(tmp)
            before = group.version
            group.version = 0
            group.load(tmp)
            reloaded = group.weights()
            reload_diff = max(float((reloaded[k].float() - got[k].float()).abs().max()) for k in got)
        moved = max(float((got[k].float() - initial[k].float()).abs().max()) for k in got)
        return {
            "losses": losses,
            "weight_diff": weight_diff,
            "stream_diff": stream_diff,
            "reload_diff": reload_diff,
            "keys_equal": sorted(streamed) == sorted(want),
            "version": [before, group.version],
            "moved": moved,
        }
    finally:
        group.close()


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(int(sys.argv[1]))), flush=True)
