"""The exact sentence matrix, the Chroma backend beside it, streamed builds and the torch-free encoder.

Small indexes keep their sentence vectors in one memory-mapped matrix (``sentences.npy``), large
ones in Chroma's HNSW; both must answer ``semantic_search`` exactly as a brute force over the stored
vectors does, on real data. Builds must encode and store one block of sentences at a time, and
indexes from before the matrix must keep loading and answering as they did.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError, IndexNotFoundError
from arag_graph.index import encoders as emb
from arag_graph.index import sentence_vectors as vectors_module
from arag_graph.index import text as text_module
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from arag_graph.index.sample import sample_corpus_path
from arag_graph.index.sentencematrix import (
    MATRIX_FILE,
    DeviceMatrix,
    MatrixWriter,
    SentenceLayout,
    SentenceMatrix,
    top_rows,
)
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run
from tests.conftest import data_file
from tests.fakes import WordHashEmbeddings, encodings_remembered

REPO = Path(__file__).resolve().parents[1]


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def build_dir(root: Path) -> Path:
    return root / BUILDS / (root / CURRENT).read_text(encoding="utf-8").strip()


def hits(index: HierarchicalIndex, query: str, top_k: int = 5) -> list[dict[str, Any]]:
    return [h.to_dict() for h in index.semantic_search(query, top_k)]


def brute_force(index: HierarchicalIndex, query: str, top_k: int = 5) -> list[tuple[str, float]]:
    """Max cosine per chunk over every stored sentence vector (A-RAG's semantic score)."""
    vectors, rows = index.sentences.all_vectors()
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    q = np.asarray(index.embeddings.embed_query(query), dtype=np.float64)
    best: dict[str, float] = {}
    for (chunk_id, _), s in zip(rows, unit.astype(np.float64) @ q, strict=True):
        best[chunk_id] = max(best.get(chunk_id, -2.0), float(s))
    return sorted(best.items(), key=lambda kv: -kv[1])[:top_k]


# --------------------------------------------------------------------------------------------
# Same rankings as brute force and as Chroma, on real data


@pytest.fixture(scope="module")
def hotpot_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[HierarchicalIndex, HierarchicalIndex, list[str]]:
    """HotpotQA-100 (994 passages) built twice with the default encoder: matrix and Chroma."""
    corpus = data_file("hotpotqa-100/corpus.json")
    questions = json.loads(data_file("hotpotqa-100/questions.json").read_text(encoding="utf-8"))
    root = tmp_path_factory.mktemp("hotpot-pair")
    with encodings_remembered() as encoded:  # one encoding of the corpus, stored by both backends
        matrix = build_index(corpus, root / "matrix", progress=False)
        chroma = build_index(corpus, root / "chroma", backend="chroma", progress=False)
    assert sum(encoded) == matrix.manifest.sentences, encoded  # each sentence encoded once for both builds
    return matrix, chroma, [q["question"] for q in questions]


@pytest.mark.integration
def test_matrix_search_equals_brute_force_and_chroma_on_hotpotqa(
    hotpot_pair: tuple[HierarchicalIndex, HierarchicalIndex, list[str]],
) -> None:
    matrix, chroma, questions = hotpot_pair
    assert isinstance(matrix.sentences, SentenceMatrix) and matrix.manifest.chroma["mode"] == "matrix"
    assert chroma.manifest.chroma["mode"] == "persistent" and chroma.manifest.chroma["ids"] == "rows"
    assert matrix.manifest.sentences == chroma.manifest.sentences > 4000
    for question in questions:
        got = hits(matrix, question)
        expected = brute_force(matrix, question)
        assert [h["chunk_id"] for h in got] == [c for c, _ in expected], question
        assert [h["score"] for h in got] == pytest.approx([s for _, s in expected], abs=1e-5)
        in_chroma = hits(chroma, question)
        assert [h["chunk_id"] for h in in_chroma] == [h["chunk_id"] for h in got], question
        assert [h["snippets"] for h in in_chroma] == [h["snippets"] for h in got], question
        assert [h["score"] for h in in_chroma] == pytest.approx([h["score"] for h in got], abs=1e-5)
    # The sentence level agrees too: same sentences, same order, for sentence windows.
    for question in questions[:10]:
        top = matrix.top_sentences(question, 8)
        assert [(c, p) for c, p, _ in top] == [(c, p) for c, p, _ in chroma.top_sentences(question, 8)]


@pytest.mark.integration
def test_an_index_from_before_the_matrix_loads_and_answers_as_it_did(
    hotpot_pair: tuple[HierarchicalIndex, HierarchicalIndex, list[str]], tmp_path: Path
) -> None:
    """Indexes built before this change name no sentence ids in their manifest: their Chroma
    records are read through each record's chunk metadata, as then, with the same answers."""
    _, chroma, questions = hotpot_pair
    assert chroma.path is not None
    old = tmp_path / "old"
    shutil.copytree(chroma.path, old)
    manifest = build_dir(old) / MANIFEST
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["chroma"] = {"mode": "persistent", "path": "chroma", "collection": "sentences"}  # as builds wrote it
    data.pop("manifest_checksum")  # nor did they seal the manifest (format 1)
    data["format_version"] = 1
    manifest.write_text(json.dumps(data), encoding="utf-8")
    loaded = load_index(old)
    assert loaded.sentences.layout is None  # type: ignore[union-attr]
    for question in questions[:25]:
        assert hits(loaded, question) == hits(chroma, question)


# --------------------------------------------------------------------------------------------
# Which backend, and what is on disk


def test_the_default_index_is_onnx_int8_with_an_exact_matrix(sample_index: HierarchicalIndex) -> None:
    assert sample_index.path is not None
    assert sample_index.manifest.encoder == emb.DEFAULT_ENCODER == "onnx-int8"
    assert sample_index.manifest.chroma == {"mode": "matrix", "path": MATRIX_FILE}
    files = {p.name for p in build_dir(sample_index.path).iterdir()}
    assert MATRIX_FILE in files and "chroma" not in files
    matrix = np.load(build_dir(sample_index.path) / MATRIX_FILE, mmap_mode="r")
    assert matrix.dtype == np.float32 and matrix.shape == (sample_index.manifest.sentences, 384)
    assert np.allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=1e-5)


def test_the_chroma_store_answers_as_the_matrix_does(tmp_path: Path) -> None:
    """What an index over the switch (test_auto_switches_to_chroma_above_100000_sentences) gets: the
    same answers from Chroma as from the matrix. 40 sentences: every search fetches all of them, so
    ties cannot pick different snippets."""
    documents = [
        SourceDocument(f"Island {n} has a lighthouse. Ferries call at island {n}.", id=f"i{n}") for n in range(20)
    ]
    small = build_index(documents, tmp_path / "small", embeddings=WordHashEmbeddings(), progress=False)
    embeddings = WordHashEmbeddings()
    large = build_index(documents, tmp_path / "large", embeddings=embeddings, backend="chroma", progress=False)
    assert small.manifest.chroma["mode"] == "matrix" and small.manifest.sentences == 40
    assert large.manifest.chroma["mode"] == "persistent"
    for query in ("lighthouse on island 7", "ferries", "island 12"):
        assert [(h.chunk_id, h.snippets) for h in large.semantic_search(query, 5)] == [
            (h.chunk_id, h.snippets) for h in small.semantic_search(query, 5)
        ]


class _StoreSeen(Exception):
    """Raised by :class:`StoreProbe` to end a build once its sentence store is chosen."""


class StoreProbe(WordHashEmbeddings):
    """Stops a build at its first embedding call, noting which sentence store it opened by then:
    the real threshold is tested on a real corpus without encoding 100,000 sentences."""

    def __init__(self, root: Path) -> None:
        super().__init__(dim=8)
        self.root = root
        self.store = ""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        (build,) = (self.root / BUILDS).iterdir()
        self.store = "chroma" if (build / "chroma").exists() else "matrix"
        raise _StoreSeen


@pytest.mark.parametrize("extra", [0, 1], ids=["at-the-limit", "one-over"])
def test_auto_switches_to_chroma_above_100000_sentences(extra: int, tmp_path: Path) -> None:
    """The switch at its real value, unpatched: 100,000 sentences stay a matrix, 100,001 go to Chroma."""
    from arag_graph.core.chunking import chunk_documents
    from arag_graph.index.sentencematrix import MATRIX_MAX_SENTENCES

    assert MATRIX_MAX_SENTENCES == 100_000
    ten = " ".join(f"Quay {{n}} has berth {k}." for k in range(10))
    documents = [SourceDocument(ten.format(n=n), id=f"q{n}") for n in range(10_000)]
    documents += [SourceDocument(f"Buoy {n} is red.", id=f"b{n}") for n in range(extra)]
    assert sum(len(c.sentences) for c in chunk_documents(documents)) == MATRIX_MAX_SENTENCES + extra
    probe = StoreProbe(tmp_path / "index")
    with pytest.raises(_StoreSeen):
        build_index(documents, probe.root, embeddings=probe, progress=False)
    assert probe.store == ("chroma" if extra else "matrix")


def test_bad_backend_values_fail_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(AragError) as caught:
        build_index(sample_corpus_path(), tmp_path / "a", backend="faiss", embeddings=WordHashEmbeddings())
    assert "auto, matrix, chroma" in one_line(caught.value)
    with pytest.raises(AragError) as caught:
        build_index(sample_corpus_path(), tmp_path / "b", backend="matrix", chroma_url="http://127.0.0.1:9")
    assert "--backend chroma" in one_line(caught.value)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    line = assert_one_error_line(
        *run(["index", str(sample_corpus_path()), "--out", str(tmp_path / "c"), "--backend", "x"], capsys)
    )
    assert "backend 'x'" in line and "auto, matrix, chroma" in line


def test_cli_backend_flag_builds_into_chroma(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "index"
    code, stdout, err = run(
        ["index", str(sample_corpus_path()), "--out", str(out), "--backend", "chroma", "--json"], capsys
    )
    assert code == 0 and err == "", err
    assert json.loads(stdout)["encoder"] == "onnx-int8"
    manifest = json.loads((build_dir(out) / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["chroma"]["mode"] == "persistent" and (build_dir(out) / "chroma").is_dir()


def test_a_damaged_matrix_fails_in_one_line(sample_index: HierarchicalIndex, tmp_path: Path) -> None:
    assert sample_index.path is not None
    copy = tmp_path / "copy"
    shutil.copytree(sample_index.path, copy)
    path = build_dir(copy) / MATRIX_FILE
    rows = sample_index.manifest.sentences
    np.save(path, np.zeros((rows - 1, 384), dtype=np.float32))  # one sentence short
    with pytest.raises(IndexNotFoundError) as caught:
        load_index(copy)
    assert "rebuild" in one_line(caught.value) and MATRIX_FILE in str(caught.value)
    path.write_bytes(b"not a matrix")
    with pytest.raises(IndexNotFoundError) as caught:
        load_index(copy)
    assert "rebuild" in one_line(caught.value)
    path.unlink()
    with pytest.raises(IndexNotFoundError) as caught:
        load_index(copy)
    assert "rebuild" in one_line(caught.value)


def test_the_matrix_writer_refuses_a_short_or_long_write(tmp_path: Path) -> None:
    writer = MatrixWriter(tmp_path / "m.npy", rows=5)
    writer.add(np.ones((3, 4), dtype=np.float32))
    with pytest.raises(ValueError):
        writer.add(np.ones((1, 5), dtype=np.float32))  # another dimension
    with pytest.raises(ValueError):
        writer.close()  # 3 of 5 rows
    writer = MatrixWriter(tmp_path / "n.npy", rows=2)
    with pytest.raises(ValueError):
        writer.add(np.ones((3, 4), dtype=np.float32))
    writer = MatrixWriter(tmp_path / "o.npy", rows=3)
    writer.add(np.asarray([[3, 4], [0, 0]], dtype=np.float64))
    writer.add(np.asarray([[0, 2]], dtype=np.float32))
    writer.close()
    saved = np.load(tmp_path / "o.npy")
    assert saved.dtype == np.float32 and np.allclose(saved, [[0.6, 0.8], [0, 0], [0, 1]])  # unit rows, zero kept


# --------------------------------------------------------------------------------------------
# Streaming: one block of vectors at a time


class RecordingEncoder(WordHashEmbeddings):
    """Word-hash vectors that record each call's size and how much of the matrix was on disk."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.calls: list[int] = []
        self.on_disk: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        matrices = list(self.root.glob(f"{BUILDS}/*/{MATRIX_FILE}"))
        self.on_disk.append(matrices[0].stat().st_size if matrices else 0)
        self.calls.append(len(texts))
        return super().embed_documents(texts)


@pytest.mark.parametrize("backend", ["matrix", "chroma"])
def test_a_build_encodes_and_stores_one_block_at_a_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, backend: str
) -> None:
    block = 64
    monkeypatch.setattr(text_module, "BUILD_BLOCK", block)
    stored: list[int] = []
    for cls in (vectors_module.MatrixWriter, vectors_module.SentenceStore):
        method = "add" if cls is vectors_module.MatrixWriter else "add_rows"
        original = getattr(cls, method)

        def spy(self: Any, *args: Any, _original: Any = original, **kwargs: Any) -> None:
            stored.append(len(args[-1]))
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, method, spy)
    documents = [
        SourceDocument(f"Station {n} opened in {1900 + n}. Stop {n} has {n % 4 + 1} lines.", id=f"s{n}")
        for n in range(150)
    ]
    root = tmp_path / "index"
    encoder = RecordingEncoder(root)
    index = build_index(documents, root, embeddings=encoder, backend=backend, progress=False)
    sentences = index.manifest.sentences
    assert sentences == 300
    assert max(encoder.calls) <= block and sum(encoder.calls) == sentences  # never the whole corpus at once
    assert stored and max(stored) <= block and sum(stored) == sentences  # stored block by block
    if backend == "matrix":
        # Each block was on disk before the next one was encoded: the build held one block of vectors.
        sizes = encoder.on_disk
        row_bytes = 64 * 4  # WordHashEmbeddings: 64 float32 per sentence
        assert sizes[0] == 0 and len(sizes) == -(-sentences // block), sizes
        assert [x - sizes[1] for x in sizes[1:]] == [k * block * row_bytes for k in range(len(sizes) - 1)], sizes
    reference = build_index(
        documents, tmp_path / "whole", embeddings=WordHashEmbeddings(), backend=backend, progress=False
    )
    for query in ("station 17 lines", "opened in 1942"):
        got, expected = hits(index, query), hits(reference, query)
        assert [h["chunk_id"] for h in got] == [h["chunk_id"] for h in expected], query
        assert [h["score"] for h in got] == pytest.approx([h["score"] for h in expected], abs=1e-6)
        if backend == "matrix":  # exact and deterministic: the snippets too
            assert got == expected


def test_the_real_build_block_is_4096_sentences(tmp_path: Path) -> None:
    """The block size at its real value, unpatched: of 4,200 sentences, 4,096 are stored before the rest."""
    from arag_graph.index.text import BUILD_BLOCK

    assert BUILD_BLOCK == 4096
    documents = [SourceDocument(f"Pier {n} is long. Gulls rest on pier {n}.", id=f"p{n}") for n in range(2100)]
    root = tmp_path / "index"
    encoder = RecordingEncoder(root)
    index = build_index(documents, root, embeddings=encoder, backend="matrix", progress=False)
    assert index.manifest.sentences == 4200
    assert encoder.calls == [512] * 8 + [104]  # embed_texts' own batches of 512 within each block
    # The first block (4,096 rows of 64 float32) was written before the 4,097th sentence was encoded.
    row_bytes = 64 * 4
    assert encoder.on_disk[:8] == [0] * 8, encoder.on_disk
    assert 4096 * row_bytes <= encoder.on_disk[8] < 4097 * row_bytes, encoder.on_disk


def test_every_build_phase_shows_a_progress_bar(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    documents = [
        SourceDocument(f"Harbour {n} has a crane. Boats unload at harbour {n}.", id=f"h{n}") for n in range(40)
    ]
    for backend, store_bar in (("matrix", "writing vectors"), ("chroma", "inserting into Chroma")):
        capfd.readouterr()
        build_index(documents, tmp_path / backend, embeddings=WordHashEmbeddings(), backend=backend, progress=True)
        err = capfd.readouterr().err
        for bar in ("splitting documents", "embedding sentences", store_bar, "keyword index"):
            assert bar in err, (backend, bar, err[-500:])
    build_index(documents, tmp_path / "quiet", embeddings=WordHashEmbeddings(), progress=False)
    assert capfd.readouterr().err == ""


# --------------------------------------------------------------------------------------------
# The ONNX encoder needs no torch once exported


def test_onnx_tokenisation_equals_the_models_own(sample_index: HierarchicalIndex) -> None:
    texts: list[str] = [s for c in sample_index.store.chunks[:30] for s in c.sentence_texts()]
    texts += [" ".join(texts[:60]), "", "naïve café – 東京 ½"]  # longer than 256 tokens; empty; non-ASCII
    reference = emb.default_embeddings("torch")._tokenize(texts)
    int8 = emb.default_embeddings("onnx-int8")
    got = int8._tokenize(texts)
    assert set(got) <= set(reference)
    for name, values in got.items():
        assert values == reference[name], name
    assert len(got["input_ids"][-3]) == 256  # truncated where sentence-transformers truncates


@pytest.mark.integration
def test_the_default_encoder_runs_without_torch_once_exported(sample_index: HierarchicalIndex) -> None:
    """A process that loads an index built with the default encoder and searches it never imports
    torch, sentence-transformers or transformers (the ONNX export is cached by the sample build)."""
    assert sample_index.path is not None
    script = (
        "import json, sys\n"
        "from arag_graph.index.load import load_index\n"
        f"index = load_index({str(sample_index.path)!r})\n"
        "hits = index.semantic_search('Who directed Maximum Overdrive?', 3)\n"
        "print(json.dumps({'hits': [h.chunk_id for h in hits], "
        "'loaded': [m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules]}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []
    assert result["hits"] == [h.chunk_id for h in sample_index.semantic_search("Who directed Maximum Overdrive?", 3)]


def test_an_int8_vector_never_depends_on_its_batch(sample_index: HierarchicalIndex) -> None:
    """int8 quantises activations with one scale per call: encoding one text per call keeps each
    sentence's vector the same whether it is encoded in a block of the build, alone, or as a query."""
    texts: Sequence[str] = [s for c in sample_index.store.chunks for s in c.sentence_texts()]
    encoder = emb.default_embeddings("onnx-int8")
    whole = encoder.encode(texts)
    parts = np.vstack([encoder.encode(texts[i : i + 50]) for i in range(0, len(texts), 50)])
    assert np.array_equal(whole, parts)
    for i in (0, 17, 123):
        assert np.array_equal(np.asarray(encoder.embed_documents([texts[i]])[0], dtype=np.float32), whole[i])


# --------------------------------------------------------------------------------------------
# Exact, position-independent scores; the same answers from a matrix on a GPU


def unit(rng: np.random.Generator, rows: int, dim: int = 48) -> np.ndarray:
    vectors = rng.standard_normal((rows, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_equal_sentences_score_equal_wherever_they_sit() -> None:
    """A BLAS product scores the last rows of a matrix with another kernel than the rest, so a
    sentence repeated there scored a last bit apart from its first copy and the tie fell to the
    later row. Scores now come from a row's values alone: copies tie, and rank in row order."""
    from arag_graph.core.documents import Chunk

    rng = np.random.default_rng(7)
    rows = 4099  # not a multiple of 4: three rows fall in the products' remainder
    vectors = unit(rng, rows, 384)
    copies = [0, 1, 2, 4097, 4098]
    vectors[copies] = vectors[3]
    chunks = [Chunk(id=f"c{i}", text="x", sentences=((0, 1),)) for i in range(rows)]
    matrix = SentenceMatrix(vectors, SentenceLayout(chunks), {"mode": "matrix"})
    for query in [vectors[3] + 0.3 * v for v in unit(rng, 20, 384)]:
        found = matrix.query(query, 6)
        assert [c for c, _, _ in found] == ["c0", "c1", "c2", "c3", "c4097", "c4098"]
        assert len({s for _, _, s in found}) == 1


def test_a_cut_through_a_tie_keeps_the_first_rows_of_the_tie() -> None:
    """The top n in rank order, ties in row order, also where the n-th place falls inside a tie."""
    rng = np.random.default_rng(3)
    scores = rng.choice(np.array([0.1, 0.2, 0.3, 0.4, 0.5], dtype=np.float32), 1000)
    reference = np.lexsort((np.arange(len(scores)), -scores))
    for n in (1, 5, 150, 199, 200, 201, 555, 999, 1000, 1200):
        assert top_rows(scores, n).tolist() == reference[:n].tolist()


class DesignedEmbeddings(WordHashEmbeddings):
    """Vectors from a pool of eight directions, so that many sentences are equal (exact ties) and
    some differ from their direction by 1e-5 (closer than float16 can tell apart)."""

    model_id = "test/designed-48"

    def __init__(self) -> None:
        super().__init__(48)
        rng = np.random.default_rng(11)
        self.pool = unit(rng, 8)
        self.nudge = unit(rng, 8)

    def _vector(self, text: str) -> list[float]:
        import hashlib

        digest = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=4).digest(), "little")
        vector = self.pool[digest % 8].astype(np.float64)
        if digest % 3 == 0:
            vector = vector + 1e-5 * self.nudge[(digest // 8) % 8] * (1 + digest % 5)
        return (vector / np.linalg.norm(vector)).tolist()


@pytest.fixture(scope="module")
def designed_index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    docs = [
        SourceDocument(
            id=f"d{i}",
            title=f"Document {i}",
            text=" ".join(f"Sentence {j} of document {i} says {i * j % 7}." for j in range(1 + i % 6)),
            metadata={"part": i % 3},
        )
        for i in range(80)
    ]
    root = tmp_path_factory.mktemp("designed") / "index"
    build_index(docs, root, embeddings=DesignedEmbeddings(), progress=False)
    return load_index(root, embeddings=DesignedEmbeddings(), device="cpu")


def queries() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    pool = DesignedEmbeddings().pool
    return [*pool, *(pool[:4] + 1e-4 * unit(rng, 4)), *unit(rng, 12)]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_matrix_on_a_device_answers_exactly_as_the_cpu_matrix(
    designed_index: HierarchicalIndex, dtype: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The torch path (device "cpu" here; a GPU runs the same code) against the NumPy path: the same
    chunks in the same order with the same scores and snippets, ties and near-ties included, with
    and without a filter, and the same top sentences. float16 selects with a margin and ranks by
    the exact scores, which is why it matches too."""
    import torch

    matrix = designed_index.sentences
    assert type(matrix) is SentenceMatrix
    on_device = HierarchicalIndex(
        designed_index.path,
        designed_index.manifest,
        designed_index.store,
        designed_index.keywords,
        DeviceMatrix(matrix, "cpu", dtype),
        designed_index.embeddings,
        designed_index.build_dir,
    )
    assert on_device.sentences.tensors()[0].dtype == getattr(torch, dtype)
    covered = 0
    for vector in queries():
        for top_k in (1, 3, 5, 12):
            expected = [h.to_dict() for h in designed_index.semantic_search("q", top_k, query_vector=vector.tolist())]
            found = [h.to_dict() for h in on_device.semantic_search("q", top_k, query_vector=vector.tolist())]
            assert found == expected
            kept = {"part": 1}
            assert on_device.semantic_search("q", top_k, query_vector=vector.tolist(), metadata_filter=kept) == (
                designed_index.semantic_search("q", top_k, query_vector=vector.tolist(), metadata_filter=kept)
            )
            covered += len({h["score"] for h in expected}) < len(expected)  # a tie among the chunks
        for n in (1, 7, 40):
            assert on_device.sentences.query(vector, n) == matrix.query(vector, n)
    assert covered > 10  # the queries did meet ties


def test_covering_is_a_prefix_of_the_full_ranking(designed_index: HierarchicalIndex) -> None:
    matrix = designed_index.sentences
    device = DeviceMatrix(matrix, "cpu", "float16")
    total = matrix.count()
    for vector in queries()[:10]:
        full = matrix.query(vector, total)
        for chunks, n in ((1, 1), (5, 50), (30, 10), (200, 1)):
            prefix = device.covering(vector, chunks, n)
            assert prefix == full[: len(prefix)] and len(prefix) >= min(n, total)
            assert len({c for c, _, _ in prefix}) >= min(chunks, len({c for c, _, _ in full}))


def test_an_index_on_a_gpu_searches_its_matrix_there(designed_index: HierarchicalIndex) -> None:
    """The device is the index's run setting; the matrix moves there at the first search, in float16."""
    index = HierarchicalIndex(
        designed_index.path,
        designed_index.manifest,
        designed_index.store,
        designed_index.keywords,
        designed_index.sentences,
        designed_index.embeddings,
        designed_index.build_dir,
        device="cuda:3",
    )
    assert isinstance(index.sentences, DeviceMatrix)
    assert index.sentences.device == "cuda:3" and index.sentences.dtype == "float16"
    assert type(designed_index.sentences) is SentenceMatrix
