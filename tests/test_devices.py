"""Encoding on another device than the CPU, tested without a GPU (CI has none).

A model on a GPU refuses any input tensor left on the CPU. No GPU is needed to check that every
input reaches the model's device: :class:`DeviceRecorder` stands for the model, says it lives on
torch's ``meta`` device, and fails on any tensor handed to it from anywhere else, naming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arag_graph.core.errors import AragError
from arag_graph.index import devices
from arag_graph.index import encoders as emb
from arag_graph.index import load as load_module
from arag_graph.index.build import build_index
from arag_graph.index.encoders import SentenceEncoder
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index

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


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message
    return message


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


# -- the device setting ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        (None, "auto"),
        ("AUTO", "auto"),
        (" cpu ", "cpu"),
        ("cuda", "cuda"),
        ("cuda:1", "cuda:1"),
        ("gpu", "cuda"),
        ("mps", "mps"),
    ],
)
def test_device_names_are_accepted_in_any_case(given: str | None, canonical: str) -> None:
    assert devices.check_device(given) == canonical


@pytest.mark.parametrize("bad", ["cuda:", "cuda:x", "tpu", "cpu:0", "", "cuda0"])
def test_unknown_devices_fail_in_one_line(bad: str) -> None:
    with pytest.raises(AragError) as caught:
        devices.resolve_device(bad)
    assert "unknown device" in one_line(caught.value) and "auto, cpu, cuda, cuda:N, mps" in str(caught.value)


def run_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_auto_is_the_cpu_without_torch_and_never_imports_it() -> None:
    """Without torch installed (hidden here) auto is the CPU and an explicit GPU says what to install."""
    out = run_python(
        "import sys; sys.modules['torch'] = None\n"
        "from arag_graph.index import devices\n"
        "from arag_graph.core.errors import AragError\n"
        "print(devices.resolve_device('auto'))\n"
        "try:\n    devices.resolve_device('cuda')\nexcept AragError as e:\n    print(e)\n"
    )
    auto, error = out.splitlines()
    assert auto == "cpu"
    assert "PyTorch, which is not installed" in error and "arag-graph[torch]" in error


def test_auto_without_a_gpu_driver_does_not_import_torch() -> None:
    """Importing torch costs seconds: a machine with no GPU driver answers cpu without it."""
    if devices._gpu_driver_present():
        pytest.skip("this machine has GPU device files")
    out = run_python(
        "import sys\nfrom arag_graph.index import devices\n"
        "print(devices.resolve_device('auto'), 'torch' in sys.modules)"
    )
    assert out == "cpu False"


def test_auto_takes_the_gpu_torch_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "_gpu_driver_present", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert devices.resolve_device("auto") == "cuda:0"
    assert devices.resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(AragError) as caught:
        devices.resolve_device("cuda:2")
    assert "has 2 CUDA GPU(s)" in one_line(caught.value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.resolve_device("auto") in ("cpu", "mps")


def test_an_explicit_gpu_torch_cannot_use_fails_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(AragError) as caught:
        devices.resolve_device("cuda")
    assert "sees no CUDA GPU" in one_line(caught.value) and "device cpu or auto" in str(caught.value)


def pretend_gpu(monkeypatch: pytest.MonkeyPatch, name: str = "cuda:7") -> None:
    """Every device but the CPU resolves to ``name``, as on a machine with a GPU (nothing here runs on it:
    models load at their first use)."""

    def resolve(device: str | None = None) -> str:
        return "cpu" if devices.check_device(device) == "cpu" else name

    for module in (devices, emb, load_module):
        monkeypatch.setattr(module, "resolve_device", resolve, raising=False)


def test_a_gpu_runs_the_default_model_on_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only torch runs on a GPU: with no encoder named it takes over; an ONNX one asked for runs on the
    CPU under auto and is refused with an explicit GPU."""
    pretend_gpu(monkeypatch)
    assert emb.encoder_and_device(None, "auto", "onnx-int8") == ("torch", "cuda:7")
    assert emb.encoder_and_device(None, "cpu", "onnx-int8") == ("onnx-int8", "cpu")
    assert emb.encoder_and_device("torch", None, "onnx-int8") == ("torch", "cuda:7")
    assert emb.encoder_and_device("onnx", "auto", "torch") == ("onnx", "cpu")
    with pytest.raises(AragError) as caught:
        emb.encoder_and_device("onnx-int8", "cuda:0", "torch")
    assert "runs on the CPU only" in one_line(caught.value) and "encoder torch" in str(caught.value)


def tiny_corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.jsonl"
    docs = [
        {
            "id": "alien",
            "title": "Alien",
            "text": "Alien is a 1979 film directed by Ridley Scott. It stars Sigourney Weaver.",
        },
        {"id": "oasis", "title": "Oasis", "text": "Oasis were an English rock band formed in Manchester in 1991."},
        {"id": "sony", "title": "Sony", "text": "Sony was founded in 1946 in Tokyo. It made the Walkman."},
    ]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return corpus


def test_the_device_is_never_written_into_an_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index built on one device loads on another: the manifest names no device."""
    root = tmp_path / "index"
    built = build_index(tiny_corpus(tmp_path), root, encoder="torch", device="cpu", progress=False)
    assert built.device == "cpu" and built.embeddings.device == "cpu"
    text = (root / BUILDS / (root / CURRENT).read_text().strip() / MANIFEST).read_text(encoding="utf-8")
    assert "device" not in text and '"cpu"' not in text
    pretend_gpu(monkeypatch)
    elsewhere = load_index(root, device="cuda")
    assert elsewhere.device == "cuda:7" and elsewhere.embeddings.device == "cuda:7"
    assert elsewhere.embeddings.backend == "torch" and elsewhere.manifest.encoder == "torch"
    monkeypatch.undo()
    here = load_index(root, device="cpu")
    assert here.device == "cpu" and [h.chunk_id for h in here.semantic_search("Who directed Alien?", 1)] == ["alien"]
