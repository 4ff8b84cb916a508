"""FLOPs estimates: 2·N_matmul per token plus the attention term, checked against the model's own weights."""

from __future__ import annotations

import pytest
from transformers import PreTrainedModel

from rl_core.generation import decoder_flops_per_token, matmul_params, sequence_flops
from rl_core.models import ModelConfig, build_hf_config, char_tokenizer


def test_matmul_params_count_the_projection_weights(model: PreTrainedModel) -> None:
    linear = sum(p.numel() for name, p in model.named_parameters() if name.endswith("proj.weight"))
    head = model.config.vocab_size * model.config.hidden_size
    assert matmul_params(model.config) == linear + head
    assert decoder_flops_per_token(model.config) == 2 * (linear + head)


def test_attention_term_and_sequence_totals(model: PreTrainedModel) -> None:
    cfg = model.config
    per_position = 4 * cfg.num_hidden_layers * cfg.hidden_size  # 4 · L · heads · head_dim
    assert decoder_flops_per_token(cfg, context=10) - decoder_flops_per_token(cfg) == pytest.approx(10 * per_position)
    p, r = 5, 7
    expected = sum(decoder_flops_per_token(cfg, context=i + 1) for i in range(p + r))
    assert sequence_flops(cfg, p, r) == pytest.approx(expected)
    assert sequence_flops(cfg, p, r, training=True) == pytest.approx(3 * expected)
    assert sequence_flops(cfg, 0, 0) == 0.0
    with pytest.raises(ValueError):
        decoder_flops_per_token(cfg, context=-1)


def test_qwen2_half_billion_shape_is_about_half_a_billion() -> None:
    cfg = build_hf_config(ModelConfig(preset="qwen2-0.5b"), char_tokenizer())
    # 494M parameters with the tied 136M-parameter embedding; the head is a matmul, the lookup is not.
    assert 4.9e8 < matmul_params(cfg) < 5.0e8
    with pytest.raises(ValueError, match="hidden_size"):
        decoder_flops_per_token(object())
