"""The trainer's decoder body compiled (``TorchTrainer(compile_backend=...)``): the same step as eager, the
same parameters and state-dict keys (weight sync and checkpoints see no difference). On the CPU the ``aot_eager``
backend checks the traced forward and backward; inductor's speed is a GPU measurement (bench/gpu.py)."""

from __future__ import annotations

import copy

import pytest
import torch

from rl_core.engine.batch import build_train_batch, group_rewards
from rl_core.engine.trainer import TorchTrainer

from .test_trainers import RECIPE, _groups, _model


def test_a_compiled_body_takes_the_eager_step_and_keeps_its_state_dict() -> None:
    torch._dynamo.reset()
    model = _model()
    groups = _groups(model)
    batch = build_train_batch(groups, group_rewards(groups, RECIPE), RECIPE, pad_id=0)
    assert batch is not None
    cpu = torch.device("cpu")
    eager = TorchTrainer(copy.deepcopy(model), RECIPE, device=cpu, micro_batch_size=4)
    compiled = TorchTrainer(copy.deepcopy(model), RECIPE, device=cpu, micro_batch_size=4, compile_backend="aot_eager")
    assert compiled.compiled and not eager.compiled
    assert list(compiled.weights()) == list(eager.weights())  # no _orig_mod prefixes
    for _ in range(2):
        a, b = eager.step(batch), compiled.step(batch)
        assert b.loss == pytest.approx(a.loss, rel=1e-5, abs=1e-7)
        assert b.grad_norm == pytest.approx(a.grad_norm, rel=1e-4)
    for (name, p), q in zip(eager.model.named_parameters(), compiled.model.parameters(), strict=True):
        torch.testing.assert_close(q, p, atol=1e-6, rtol=1e-5, msg=name)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # something was really traced
    head = compiled.model.get_output_embeddings()
    assert head.weight is compiled.model.get_input_embeddings().weight  # tied weights stay tied
