"""Encoding on another device than the CPU, tested without a GPU (CI has none).

A model on a GPU refuses any input tensor left on the CPU. No GPU is needed to check that every
input reaches the model's device: :class:`DeviceRecorder` stands for the model, says it lives on
torch's ``meta`` device, and fails on any tensor handed to it from anywhere else, naming it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arag_graph.core.errors import AragError
from arag_graph.index import devices, streaming
from arag_graph.index import encoders as emb
from arag_graph.index import load as load_module
from arag_graph.index.build import build_index
from arag_graph.index.corpus import load_corpus
from arag_graph.index.encoders import SentenceEncoder
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from arag_graph.index.sample import sample_corpus_path
from tests.cli_run import assert_one_error_line, run_cli

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


# -- the GPU's path, run on the CPU ------------------------------------------------------------


@pytest.fixture(scope="module")
def cpu_model() -> Any:
    return SentenceEncoder().model


def streamed(cpu_model: Any, **kwargs: Any) -> SentenceEncoder:
    """An encoder set up as on a GPU (the streaming path), on the CPU, sharing the loaded model."""
    encoder = SentenceEncoder(stream=True, **kwargs)
    if encoder.dtype == "float32":
        encoder._model = cpu_model
    return encoder


def test_the_streamed_path_gives_the_cpu_vectors_in_input_order(
    cpu_model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several tokenizer windows, length-sorted batches, the producer thread: same vectors, same order."""
    monkeypatch.setattr(streaming, "STREAM_WINDOW", 4)
    monkeypatch.setattr(streaming, "FLUSH_BATCHES", 2)
    texts = [*SENTENCES, "An \ud800 unpaired surrogate.", *reversed(SENTENCES)]
    reference = SentenceEncoder()
    reference._model = cpu_model
    expected = reference.encode(texts)
    vectors = encode_all(streamed(cpu_model, batch_size=2), texts)
    assert vectors.dtype == np.float32 and vectors.shape == expected.shape
    assert np.sum(vectors * expected, axis=1).min() > 0.99999
    one = streamed(cpu_model)  # fewer texts than a batch: no thread
    assert np.sum(encode_all(one, texts[:3]) * expected[:3], axis=1).min() > 0.99999


def test_the_streamed_path_moves_every_input_to_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(streaming, "STREAM_WINDOW", 3)
    encoder = SentenceEncoder(stream=True, batch_size=2)
    recorder = on_meta(encoder)
    encode_all(encoder, SENTENCES * 3)
    assert len(recorder.batches) == 10  # five windows of 3 texts, each in batches of 2 and 1


class _Broken(Exception):
    pass


def test_a_failing_producer_or_model_ends_the_encode_with_its_error(cpu_model: Any) -> None:
    """An error on either side of the stream is raised by encode, and the tokenizing thread ends."""
    encoder = streamed(cpu_model, batch_size=2)

    def broken(texts: Sequence[str]) -> list[list[int]]:
        raise _Broken("tokenizer failed")

    encoder._stream_tokenizer = (broken, 0)
    with pytest.raises(_Broken):
        encoder.encode(SENTENCES * 4)
    encoder = SentenceEncoder(stream=True, batch_size=1)
    recorder = on_meta(encoder)

    def failing(features: dict[str, Any]) -> dict[str, Any]:
        raise _Broken("model failed")

    recorder.forward = failing  # type: ignore[method-assign]
    with pytest.raises(_Broken):
        encoder.encode(SENTENCES * 40)
    assert not [t for t in threading.enumerate() if t.name == "arag-tokenize"]


def test_a_gpu_build_gives_the_cpu_builds_vectors(tmp_path: Path) -> None:
    """What a GPU build changes (float16 weights, large length-sorted batches, the streaming thread),
    run on the CPU: every sentence vector within cosine 0.999 of the float32 CPU build's.

    torch runs float16 on the CPU too (slowly), so the numerics are the GPU's; which device the
    tensors are on is the recorder tests' business.
    """
    corpus = load_corpus(sample_corpus_path())[:8]  # real passages: 30-odd sentences
    cpu = build_index(corpus, tmp_path / "cpu", encoder="torch", device="cpu", progress=False)
    gpu_like = SentenceEncoder(stream=True, dtype="float16", batch_size=4)
    assert gpu_like.dtype == "float16"
    gpu = build_index(corpus, tmp_path / "gpu", embeddings=gpu_like, progress=False)
    assert next(gpu_like.model.parameters()).dtype == torch.float16
    ours, rows = gpu.sentences.all_vectors()
    theirs, same_rows = cpu.sentences.all_vectors()
    assert rows == same_rows and len(rows) >= 30
    cosine = np.sum(ours * theirs, axis=1)
    assert cosine.min() >= 0.999, cosine.min()


def test_precision_defaults_to_float16_on_cuda_only() -> None:
    assert emb.check_dtype("auto", "cuda:0") == "float16"
    assert emb.check_dtype(None, "cpu") == emb.check_dtype("auto", "mps") == "float32"
    assert emb.check_dtype("FP16", "cpu") == "float16"
    with pytest.raises(AragError) as caught:
        emb.check_dtype("int4", "cpu")
    assert "unknown precision" in one_line(caught.value)


def test_a_run_that_names_no_device_takes_arag_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """How `arag serve --device` reaches the graphs, which load their index themselves."""
    monkeypatch.setenv("ARAG_DEVICE", "cpu")
    assert devices.check_device(None) == "cpu"
    monkeypatch.setenv("ARAG_DEVICE", "tpu")
    with pytest.raises(AragError) as caught:
        devices.resolve_device(None)
    assert "unknown device 'tpu' (from $ARAG_DEVICE)" in one_line(caught.value)
    monkeypatch.delenv("ARAG_DEVICE")
    assert devices.check_device(None) == "auto"


# -- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["index", "search", "ask", "eval", "mcp"])
def test_the_commands_that_encode_take_device(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0 and "--device" in out and "never written into an index" in " ".join(out.split())


def test_device_on_the_command_line_is_the_runs_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--device` reaches every index the run loads (and a server's graphs) through $ARAG_DEVICE."""
    monkeypatch.setenv("ARAG_DEVICE", "auto")  # restored after the test, which the CLI sets
    root = tmp_path / "index"
    build_index(tiny_corpus(tmp_path), root, encoder="torch", device="cpu", progress=False)
    seen: list[str | None] = []
    real = load_module.load_index

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(devices.check_device(kwargs.get("device")))
        return real(*args, **kwargs)

    monkeypatch.setattr(load_module, "load_index", recording)
    query = ["--query", "Who directed Alien?"]
    code, out, _ = run_cli(["search", "--index", str(root), *query, "--device", "CPU"], capsys)
    assert code == 0 and "alien" in out
    assert seen == ["cpu"]
    code, out, err = run_cli(["search", "--index", str(root), "--query", "x", "--device", "tpu"], capsys)
    assert "unknown device 'tpu'" in assert_one_error_line(code, out, err)
