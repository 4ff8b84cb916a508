"""Tokenizers: a character-level tokenizer defined in code (synthetic tasks, tiny presets) or a local HF one.

The character tokenizer is a real ``tokenizers``/``transformers`` fast tokenizer: every printable ASCII
character and the newline is one token, plus the special tokens ``<pad> <bos> <eos> <unk> <think> </think>``
(``<think>``/``</think>`` are single tokens; ``tok(prompt)`` prepends ``<bos>``). It is saved with
``save_pretrained`` next to the model, so a checkpoint loads with
``AutoTokenizer.from_pretrained(dir, local_files_only=True)`` like any HF model.
Invariants: ids are fixed by the code (``CHAR_VOCAB``), so two builds are identical; ``decode(encode(s)) == s``
for any string over the vocabulary.
"""

from __future__ import annotations

import string
from pathlib import Path

from tokenizers import Regex, decoders, models, pre_tokenizers, processors
from tokenizers import Tokenizer as RawTokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

__all__ = ["CHAR_SPECIAL_TOKENS", "CHAR_VOCAB", "Tokenizer", "char_tokenizer", "load_tokenizer"]

Tokenizer = PreTrainedTokenizerBase

CHAR_SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "<unk>", "<think>", "</think>")
_CHARS: tuple[str, ...] = (*(c for c in string.printable if c not in "\t\n\r\x0b\x0c"), "\n")
#: token -> id of the character tokenizer (specials first).
CHAR_VOCAB: dict[str, int] = {tok: i for i, tok in enumerate((*CHAR_SPECIAL_TOKENS, *_CHARS))}


def char_tokenizer() -> PreTrainedTokenizerFast:
    """The built-in character-level tokenizer (102 tokens)."""
    raw = RawTokenizer(models.WordLevel(vocab=dict(CHAR_VOCAB), unk_token="<unk>"))
    raw.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    raw.decoder = decoders.Fuse()
    raw.add_special_tokens(list(CHAR_SPECIAL_TOKENS))
    bos = CHAR_VOCAB["<bos>"]
    raw.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", bos)]
    )
    tok = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=raw,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        additional_special_tokens=["<think>", "</think>"],
        padding_side="left",
    )
    tok.model_max_length = 1 << 20
    return tok


def load_tokenizer(path: str | Path) -> Tokenizer:
    """A tokenizer saved in a local directory; never touches the network. Left padding for generation."""
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise ValueError(f"tokenizer in {path} has neither a pad nor an eos token")
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    return tok
