"""Tokenizing a sentence-transformers folder's texts without torch: its Rust ``tokenizer.json``.

Shared by the ONNX encoder (:mod:`arag_graph.index.encoders`) and the GPU's streaming path
(:mod:`arag_graph.index.streaming`), both of which tokenize whole windows of texts at once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer as FastTokenizer


def valid_utf8(texts: Sequence[str]) -> list[str]:
    """``texts`` with lone surrogates replaced: a ``"\\ud800"`` (from a model's or a caller's JSON) is
    valid Python text but no UTF-8, and the Rust tokenizer raises TypeError on it. It stands for
    nothing, so it is replaced."""
    return [t.encode("utf-8", "replace").decode("utf-8") for t in texts]


def fast_tokenizer(model_path: str) -> tuple[FastTokenizer, int, int] | None:
    """The model's Rust tokenizer set up as sentence-transformers uses it, without loading torch.

    ``tokenizer.json`` carries a fixed padding and a truncation length of its own; the model's
    ``sentence_bert_config.json`` gives the length sentence-transformers truncates to. ``None`` when
    either file is missing, and the caller falls back to the model's transformers tokenizer.
    """
    root = Path(model_path)
    try:
        config = json.loads((root / "sentence_bert_config.json").read_text(encoding="utf-8"))
        max_length = int(config["max_seq_length"])
        tokenizer = FastTokenizer.from_file(str(root / "tokenizer.json"))
    except Exception:  # unreadable or missing files; tokenizers raises plain Exception
        return None
    padding = tokenizer.padding or {}
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    pad_token = str(padding.get("pad_token", "[PAD]"))
    pad_id = tokenizer.token_to_id(pad_token)
    return tokenizer, max_length, int(padding.get("pad_id", 0) if pad_id is None else pad_id)
