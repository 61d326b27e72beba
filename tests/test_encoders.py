"""Encoder backends: the default model on torch, ONNX Runtime float32 and ONNX Runtime int8.

The ONNX model is exported for real from the packaged weights into the session's isolated cache
(the first test to need it pays the export, about 20 s); vectors are compared with the torch ones,
and indexes record and honour their backend.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from arag_graph.core.errors import AragError, IndexMismatchError
from arag_graph.index import encoders as emb
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from arag_graph.index.sample import sample_corpus_path
from tests.fakes import NamedFakeEmbeddings, current_manifest

pytestmark = pytest.mark.integration

QUERIES = [
    "Who directed Alien?",
    "Which film came out first?",
    "What nationality was the director?",
    "Where is the band from?",
    "When was the company founded?",
]


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def ranked(index: HierarchicalIndex, query: str) -> list[str]:
    return [h.chunk_id for h in index.semantic_search(query, 5)]


@pytest.fixture(scope="module")
def sentences(sample_index: HierarchicalIndex) -> list[str]:
    return [s for c in sample_index.store.chunks[:40] for s in c.sentence_texts()]


@pytest.fixture(scope="module")
def onnx_index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    """The bundled sample (461 sentences) built with the float32 ONNX backend."""
    return build_index(sample_corpus_path(), tmp_path_factory.mktemp("onnx") / "index", encoder="onnx", progress=False)


def test_onnx_float32_gives_the_torch_vectors(sample_index: HierarchicalIndex, sentences: list[str]) -> None:
    reference = emb.default_embeddings("torch").encode(sentences)
    onnx = emb.default_embeddings("onnx")
    seen: list[int] = []
    vectors = onnx.encode(sentences, on_batch=seen.append)
    assert vectors.shape == reference.shape and vectors.dtype == np.float32
    assert sum(seen) == len(sentences)  # progress callbacks work on this backend too
    cosine = np.sum(vectors * reference, axis=1)
    assert cosine.min() > 0.999, cosine.min()
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert onnx.onnx_path is not None and onnx.onnx_path.is_file()
    # Single queries go through the same graph (and the per-process query cache).
    query = onnx.embed_query(sentences[3])
    assert float(np.dot(query, reference[3])) > 0.999
    before = onnx.query_encodings
    assert onnx.embed_query(sentences[3]) == query and onnx.query_encodings == before


def test_onnx_int8_stays_close_to_the_torch_vectors(sentences: list[str]) -> None:
    reference = emb.default_embeddings("torch").encode(sentences)
    int8 = emb.default_embeddings("onnx-int8")
    vectors = int8.encode(sentences)
    cosine = np.sum(vectors * reference, axis=1)
    # Quantised weights: close, not equal (bench/results/quality.md measures what it does to recall).
    assert cosine.min() > 0.97 and cosine.mean() > 0.985, (cosine.min(), cosine.mean())
    assert not np.allclose(vectors, reference, atol=1e-4)  # it really is a different computation
    assert int8.onnx_path is not None and int8.onnx_path.name.endswith("-int8.onnx")
    assert int8.onnx_path.stat().st_size < 0.8 * emb.default_embeddings("onnx").onnx_path.stat().st_size


def test_the_export_is_cached_on_disk(monkeypatch: pytest.MonkeyPatch, sentences: list[str]) -> None:
    first = emb.default_embeddings("onnx")
    first.encode(sentences[:4])
    assert first.onnx_path is not None and first.onnx_path.parent == emb.onnx_cache_dir()

    def no_export(*args: object, **kwargs: object) -> None:
        raise AssertionError("exported again although the cache holds the model")

    monkeypatch.setattr(emb, "_export_onnx", no_export)
    monkeypatch.setattr(emb, "_quantize_onnx", no_export)
    fresh = emb.OnnxSentenceEncoder()  # a new process would start like this
    assert np.allclose(fresh.encode(sentences[:4]), first.encode(sentences[:4]), atol=1e-6)
    assert fresh.onnx_path == first.onnx_path


def test_manifest_records_the_backend_and_loading_honours_it(onnx_index: HierarchicalIndex) -> None:
    assert onnx_index.path is not None
    assert current_manifest(onnx_index.path)["encoder"] == "onnx" and onnx_index.manifest.encoder == "onnx"
    assert current_manifest(onnx_index.path)["embedding_model"] == emb.DEFAULT_MODEL_ID  # same model, other backend
    loaded = load_index(onnx_index.path)
    assert isinstance(loaded.embeddings, emb.OnnxSentenceEncoder) and loaded.embeddings.backend == "onnx"
    cached = load_index(onnx_index.path, cache=True)
    assert cached.embeddings.backend == "onnx"
    assert load_index(onnx_index.path, encoder="torch", cache=True).embeddings.backend == "torch"


@pytest.fixture(scope="module")
def torch_index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    """The bundled sample built with the PyTorch backend."""
    return build_index(
        sample_corpus_path(), tmp_path_factory.mktemp("torch") / "index", encoder="torch", progress=False
    )


def test_torch_and_onnx_indexes_answer_alike(torch_index: HierarchicalIndex, onnx_index: HierarchicalIndex) -> None:
    """Backends of one model are interchangeable: an index built with torch and queried with ONNX
    (and the other way round) returns the same chunks in the same order."""
    assert torch_index.path is not None and onnx_index.path is not None
    assert torch_index.manifest.encoder == "torch"
    torch_built_onnx_queries = load_index(torch_index.path, encoder="onnx")
    onnx_built_torch_queries = load_index(onnx_index.path, encoder="torch")
    assert torch_built_onnx_queries.embeddings.backend == "onnx"
    for query in QUERIES:
        expected = ranked(torch_index, query)
        assert ranked(torch_built_onnx_queries, query) == expected
        assert ranked(onnx_index, query) == expected
        assert ranked(onnx_built_torch_queries, query) == expected


def test_an_index_from_before_the_encoder_field_loads_with_torch(
    sample_index: HierarchicalIndex, tmp_path: Path
) -> None:
    assert sample_index.path is not None
    copy = tmp_path / "old"
    shutil.copytree(sample_index.path, copy)
    build = (copy / CURRENT).read_text(encoding="utf-8").strip()
    path = copy / BUILDS / build / MANIFEST
    data = json.loads(path.read_text(encoding="utf-8"))
    del data["encoder"]
    del data["manifest_checksum"]  # as manifests from before the encoder field were: no seal, format 1
    data["format_version"] = 1
    path.write_text(json.dumps(data), encoding="utf-8")
    assert load_index(copy).embeddings.backend == "torch"


@pytest.mark.parametrize("value", ["fast", "", "onnx_int8", "cuda"])
def test_bad_encoder_values_fail_in_one_line(tmp_path: Path, value: str, sample_index: HierarchicalIndex) -> None:
    with pytest.raises(AragError) as caught:
        build_index(sample_corpus_path(), tmp_path / "index", encoder=value, progress=False)
    message = one_line(caught.value)
    assert "torch, onnx, onnx-int8" in message
    assert not (tmp_path / "index").exists()  # refused before anything was written
    assert sample_index.path is not None
    with pytest.raises(AragError) as caught:
        load_index(sample_index.path, encoder=value)
    assert "torch, onnx, onnx-int8" in one_line(caught.value)


def test_encoder_and_embeddings_together_are_refused(tmp_path: Path, sample_index: HierarchicalIndex) -> None:
    with pytest.raises(AragError) as caught:
        build_index(sample_corpus_path(), tmp_path / "i", embeddings=NamedFakeEmbeddings(), encoder="onnx")
    assert "not both" in one_line(caught.value)
    assert sample_index.path is not None
    with pytest.raises(AragError) as caught:
        load_index(sample_index.path, embeddings=NamedFakeEmbeddings(), encoder="onnx")
    assert "not both" in one_line(caught.value)


def test_another_model_still_fails_whatever_the_backend(tmp_path: Path) -> None:
    fake = build_index(sample_corpus_path(), tmp_path / "fake", embeddings=NamedFakeEmbeddings(), progress=False)
    assert fake.path is not None and fake.manifest.encoder is None  # not one of our backends
    with pytest.raises(IndexMismatchError) as caught:
        load_index(fake.path, encoder="onnx")
    assert "test/fake-hash-32" in one_line(caught.value)


def test_a_missing_optional_package_fails_in_one_line_with_the_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, onnx_index: HierarchicalIndex
) -> None:
    # An empty cache means the float32 model must be exported, which needs onnxscript: pretend it is
    # absent. Drop the process-wide encoders: one that is loaded already needs nothing more.
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "onnxscript", None)
    emb._default_encoder.cache_clear()
    assert emb.missing_onnx_packages(export=True) == ["onnxscript>=0.5"]
    with pytest.raises(AragError) as caught:
        build_index(sample_corpus_path(), tmp_path / "index", encoder="onnx", progress=False)
    message = one_line(caught.value)
    assert "onnx encoder needs onnxscript>=0.5" in message and "pip install 'arag-graph[torch]'" in message
    assert "--encoder onnx-int8" in message and "--encoder torch" in message
    assert not (tmp_path / "index").exists()
    # The default encoder's graph ships in the wheel: it needs no export, so nothing is missing for it.
    assert build_index(sample_corpus_path(), tmp_path / "int8", encoder="onnx-int8", progress=False).sentences
    assert onnx_index.path is not None
    with pytest.raises(AragError) as caught:  # an index built with ONNX says the same when loaded
        load_index(onnx_index.path)
    assert "pip install" in one_line(caught.value)
    assert load_index(onnx_index.path, encoder="torch").embeddings.backend == "torch"  # the way out works


def test_cli_index_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arag_graph.cli.main import main

    capsys.readouterr()
    out = tmp_path / "index"
    assert main(["index", str(sample_corpus_path()), "--out", str(out), "--encoder", "bogus"]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("arag: error: unknown encoder 'bogus'")
    assert main(["index", str(sample_corpus_path()), "--out", str(out), "--encoder", "onnx", "--json"]) == 0
    stdout, err = capsys.readouterr()
    summary = json.loads(stdout)
    assert summary["encoder"] == "onnx" and summary["sentences"] > 400
    assert err == ""  # the export (already cached here) and the build print nothing with --json
    assert current_manifest(out)["encoder"] == "onnx"


def test_query_embeddings_are_cached_per_process() -> None:
    """The same query twice is encoded once; the cache is a bounded LRU."""
    encoder = emb.SentenceEncoder(query_cache_size=2)
    encoder._model = emb.default_embeddings("torch").model  # share the loaded model
    first = encoder.embed_query("Who directed Alien?")
    assert encoder.query_encodings == 1
    assert encoder.embed_query("Who directed Alien?") == first and encoder.query_encodings == 1
    encoder.embed_query("Where is the Eiffel Tower?")
    encoder.embed_query("Who directed Alien?")  # refreshed: now the most recent
    encoder.embed_query("When did the Nile flood?")  # evicts the Eiffel query, the oldest
    assert encoder.query_encodings == 3
    encoder.embed_query("Who directed Alien?")
    assert encoder.query_encodings == 3
    encoder.embed_query("Where is the Eiffel Tower?")
    assert encoder.query_encodings == 4
    assert np.allclose(first, encoder.encode(["Who directed Alien?"])[0], atol=1e-6)


def test_indexes_built_before_the_graph_shipped_answer_the_same(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sentences: list[str]
) -> None:
    """Before the default's int8 graph shipped in the wheel, every process exported it from the
    packaged weights; indexes built then hold those vectors. The shipped graph must give the same ones:
    another int8 graph of the same model (an embedding table in float16, say) moves every vector to
    cosine ~0.99, because activation quantisation magnifies any change."""

    def exporting(encoder: str, device: str) -> emb.SentenceEncoder:
        old = emb.OnnxSentenceEncoder(quantized=True)
        old.packaged = False  # the default as it ran before: exported from the weights into the cache
        return old

    emb._default_encoder.cache_clear()
    with monkeypatch.context() as patch:
        patch.setattr(emb, "_default_encoder", exporting)
        before = build_index(sample_corpus_path(), tmp_path / "index", progress=False)
        exported = before.embeddings
    assert isinstance(exported, emb.OnnxSentenceEncoder) and exported.onnx_path is not None
    assert "packaged" not in exported.onnx_path.name
    emb._default_encoder.cache_clear()
    now = load_index(tmp_path / "index", cache=False)
    shipped = now.embeddings
    assert isinstance(shipped, emb.OnnxSentenceEncoder) and shipped.packaged
    assert np.allclose(shipped.encode(sentences), exported.encode(sentences), atol=1e-6)
    for query in QUERIES:
        assert [(h.chunk_id, round(h.score, 5)) for h in now.semantic_search(query, 5)] == [
            (h.chunk_id, round(h.score, 5)) for h in before.semantic_search(query, 5)
        ]
