"""Model configs, presets, the character tokenizer, loading from a local path (never the network)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from transformers import LlamaForCausalLM, PreTrainedTokenizerBase, Qwen2ForCausalLM

from rl_core.algorithms.fp32_head import has_fp32_lm_head
from rl_core.models import CHAR_VOCAB, ModelConfig, build_model, build_tokenizer, char_tokenizer, load_tokenizer
from tests.support.tiny import TINY


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({}, "exactly one of 'path'"),
        ({"preset": "tiny", "path": "/x"}, "exactly one of 'path'"),
        ({"path": "/x", "hidden_size": 64}, "need a 'preset'"),
        ({"preset": "tiny", "hidden_size": 65}, "divisible by num_attention_heads"),
        ({"preset": "tiny", "num_key_value_heads": 3}, "divisible by num_key_value_heads"),
        ({"preset": "huge"}, "preset"),
        ({"preset": "tiny", "hiden_size": 64}, "hiden_size"),
        ({"preset": "tiny", "dtype": "float64"}, "dtype"),
    ],
)
def test_bad_model_configs_name_the_problem(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ValidationError, match=needle):
        ModelConfig(**kwargs)  # type: ignore[arg-type]


def test_char_tokenizer_round_trips_and_keeps_think_markers_single_tokens() -> None:
    tok = char_tokenizer()
    text = "12+34=<think>2+4+0=6,1+3+0=4</think>46 Okay, time is up.\n"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == text
    assert ids.count(CHAR_VOCAB["<think>"]) == 1 and ids.count(CHAR_VOCAB["</think>"]) == 1
    assert tok("1+1=")["input_ids"][0] == tok.bos_token_id
    assert (tok.pad_token_id, tok.eos_token_id, len(tok)) == (0, 2, len(CHAR_VOCAB))


def test_presets_build_deterministically_without_touching_the_global_rng(tokenizer: PreTrainedTokenizerBase) -> None:
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = build_model(TINY, tokenizer)
    assert torch.equal(torch.rand(1), expected_next)
    b = build_model(TINY, tokenizer)
    c = build_model(TINY.model_copy(update={"init_seed": 1}), tokenizer)
    assert isinstance(a, LlamaForCausalLM) and not a.training
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters(), strict=True))
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)
    assert a.config.vocab_size == len(tokenizer) and a.config.eos_token_id == tokenizer.eos_token_id
    qwen = build_model(ModelConfig(preset="tiny", arch="qwen2"), tokenizer, dtype="bfloat16", fp32_lm_head=True)
    assert isinstance(qwen, Qwen2ForCausalLM) and qwen.dtype == torch.bfloat16 and has_fp32_lm_head(qwen)
    explicit_off = build_model(TINY.model_copy(update={"fp32_lm_head": False}), tokenizer, fp32_lm_head=True)
    assert not has_fp32_lm_head(explicit_off)


def test_local_path_loads_like_any_hf_model(tmp_path: Path, tokenizer: PreTrainedTokenizerBase) -> None:
    model = build_model(TINY, tokenizer, fp32_lm_head=True)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    cfg = ModelConfig(path=tmp_path)
    tok = build_tokenizer(cfg)
    loaded = build_model(cfg, tok, fp32_lm_head=True)
    assert tok.padding_side == "left" and tok("1+2=")["input_ids"] == tokenizer("1+2=")["input_ids"]
    assert has_fp32_lm_head(loaded)
    for (name, p), q in zip(model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert load_tokenizer(tmp_path).decode([5, 6]) == tokenizer.decode([5, 6])


def test_loading_a_local_model_never_opens_a_socket(
    tmp_path: Path, tokenizer: PreTrainedTokenizerBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_model(TINY, tokenizer).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("tried to reach the network")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    cfg = ModelConfig(path=tmp_path)
    build_model(cfg, build_tokenizer(cfg))


def test_missing_local_path_is_a_clear_error(tmp_path: Path) -> None:
    cfg = ModelConfig(path=tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=r"model\.path"):
        build_tokenizer(cfg)
    with pytest.raises(FileNotFoundError, match=r"model\.path"):
        build_model(cfg, char_tokenizer())
