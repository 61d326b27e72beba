"""Encoding on another device than the CPU, tested without a GPU (CI has none).

A model on a GPU refuses any input tensor left on the CPU. No GPU is needed to check that every
input reaches the model's device: :class:`DeviceRecorder` stands for the model, says it lives on
torch's ``meta`` device, and fails on any tensor handed to it from anywhere else, naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from arag_graph.index.encoders import SentenceEncoder

torch = pytest.importorskip("torch")

SENTENCES = [
    "Who directed the film Alien, released in 1979?",
    "The band is from Manchester.",
    "x",
    "When was the company that makes the Walkman founded, and by whom?",
    "Short one.",
]


class DeviceRecorder(torch.nn.Module):
    """The real model's stand-in on the ``meta`` device: every input must be there.

    A GPU model raises on a tensor left on the CPU; this one raises on any tensor not on ``meta``,
    with the names of those left behind, so a test fails the same way a GPU run would. It answers
    a constant vector per text (meta tensors hold no values, so nothing real can be computed).
    """

    def __init__(self, real: Any) -> None:
        super().__init__()
        self.tokenizer = real.tokenizer
        self.max_seq_length = real.max_seq_length
        self.width = int(real.get_embedding_dimension())
        self.batches: list[dict[str, str]] = []

    @property
    def device(self) -> torch.device:
        return torch.device("meta")

    def get_embedding_dimension(self) -> int:
        return self.width

    def forward(self, features: dict[str, Any]) -> dict[str, Any]:
        behind = {name: str(t.device) for name, t in features.items() if t.device.type != "meta"}
        if behind:
            raise AssertionError(f"inputs left off the model's device: {behind}")
        self.batches.append({name: str(t.device) for name, t in features.items()})
        rows = features["input_ids"].shape[0]
        return {"sentence_embedding": torch.ones(rows, self.width)}


def on_meta(encoder: SentenceEncoder) -> DeviceRecorder:
    recorder = DeviceRecorder(SentenceEncoder().model)
    encoder._model = recorder
    return recorder


def encode_all(encoder: SentenceEncoder, texts: Sequence[str]) -> np.ndarray:
    seen: list[int] = []
    vectors = encoder.encode(list(texts), on_batch=seen.append)
    assert sum(seen) == len(texts)
    return vectors


def test_every_input_reaches_the_models_device() -> None:
    """The crash of issue 36: the padded batch stayed on the CPU while the model was on the GPU."""
    encoder = SentenceEncoder(batch_size=2)
    recorder = on_meta(encoder)
    vectors = encode_all(encoder, SENTENCES)
    assert vectors.shape == (len(SENTENCES), recorder.width)
    assert len(recorder.batches) == 3  # five texts in batches of two
    assert all(set(batch) >= {"input_ids", "attention_mask"} for batch in recorder.batches)
