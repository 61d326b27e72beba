"""The hierarchical index built for real: every corpus format, the manifest, model mismatches,
contextual headers, rebuilds that survive being killed, and retrieval quality on HotpotQA.

Builds use the real encoder where semantics matter and fast fake ``Embeddings`` (tests/fakes.py)
where only the plumbing does; Chroma is always the real persistent one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from filelock import FileLock

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError, IndexMismatchError, IndexNotFoundError
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from arag_graph.index.manifest import FORMAT_VERSION, corpus_hash
from tests.fakes import NamedFakeEmbeddings, WordHashEmbeddings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]

PASSAGES = [
    (
        "curie",
        "Marie Curie",
        "Marie Curie was a physicist and chemist. She won the Nobel Prize in Physics in 1903.",
    ),
    (
        "eiffel",
        "Eiffel Tower",
        "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889.",
    ),
    ("nile", "Nile", "The Nile is a major river in northeast Africa. It flows into the Mediterranean Sea."),
]


def one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message and "Traceback" not in message
    return message


def active_build(root: Path) -> Path:
    return root / BUILDS / (root / CURRENT).read_text(encoding="utf-8").strip()


def answers(index: HierarchicalIndex, keywords: list[str], query: str) -> dict[str, Any]:
    """Everything a search shows, for comparing two loads of an index."""
    return {
        "keyword": [h.to_dict() for h in index.keyword_search(keywords, 5)],
        "semantic": [h.to_dict() for h in index.semantic_search(query, 5)],
    }


# --------------------------------------------------------------------------------------------
# Corpus formats


def _write_chunk_strings(d: Path) -> Path:
    path = d / "chunks.json"
    path.write_text(json.dumps([f"{i}:{text}" for i, _, text in PASSAGES]), encoding="utf-8")
    return path


def _write_chunk_objects(d: Path) -> Path:
    path = d / "chunks.json"
    path.write_text(json.dumps([{"id": i, "title": t, "text": x} for i, t, x in PASSAGES]), encoding="utf-8")
    return path


def _write_hipporag_object(d: Path) -> Path:
    path = d / "corpus.json"
    # HotpotQA's shape: sentences joined as they are, so all but the first start with a space.
    body = {t: [first + ".", " " + rest] for _, t, x in PASSAGES for first, rest in [x.split(". ", 1)]}
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


def _write_hipporag_list(d: Path) -> Path:
    path = d / "corpus.json"
    path.write_text(json.dumps([{"title": t, "text": x} for _, t, x in PASSAGES]), encoding="utf-8")
    return path


def _write_jsonl(d: Path) -> Path:
    path = d / "corpus.jsonl"
    path.write_text("\n".join(json.dumps({"id": i, "title": t, "text": x}) for i, t, x in PASSAGES) + "\n")
    return path


def _write_dir(d: Path) -> Path:
    root = d / "notes"
    root.mkdir()
    for i, t, x in PASSAGES:
        if i == "eiffel":
            (root / f"{i}.md").write_text(f"# {t}\n\n{x}\n", encoding="utf-8")
        else:
            (root / f"{i}.txt").write_text(x + "\n", encoding="utf-8")
    (root / ".hidden.txt").write_text("Never indexed.", encoding="utf-8")
    return root


FORMATS: dict[str, tuple[Callable[[Path], Path], str, list[str]]] = {
    "chunk-strings": (_write_chunk_strings, "chunks", ["curie", "eiffel", "nile"]),
    "chunk-objects": (_write_chunk_objects, "chunks", ["curie", "eiffel", "nile"]),
    "hipporag-object": (_write_hipporag_object, "hipporag", ["0", "1", "2"]),
    "hipporag-list": (_write_hipporag_list, "hipporag", ["0", "1", "2"]),
    "jsonl": (_write_jsonl, "jsonl", ["curie", "eiffel", "nile"]),
    "dir": (_write_dir, "dir", ["curie.txt", "eiffel.md", "nile.txt"]),
}


@pytest.mark.parametrize("name", list(FORMATS))
@pytest.mark.parametrize("detect", [True, False], ids=["detected", "explicit"])
def test_every_corpus_format_builds_an_index_that_answers(tmp_path: Path, name: str, detect: bool) -> None:
    write, fmt, ids = FORMATS[name]
    corpus = write(tmp_path)
    index = build_index(corpus, tmp_path / "index", corpus_format=None if detect else fmt, progress=False)
    assert [c.id for c in index.store.chunks] == ids
    assert [(c.prev_id, c.next_id) for c in index.store.chunks] == [
        (None, ids[1]),
        (ids[0], ids[2]),
        (ids[1], None),
    ]
    assert index.manifest.chunks == 3 and index.manifest.sentences == index.sentences.count() >= 6
    curie, eiffel, nile = ids
    assert [h.chunk_id for h in index.keyword_search(["Eiffel"], 5)] == [eiffel]
    assert index.semantic_search("Which river flows into the Mediterranean?", 1)[0].chunk_id == nile
    assert index.semantic_search("Who won a Nobel Prize for physics?", 1)[0].chunk_id == curie
    reloaded = load_index(tmp_path / "index")
    assert answers(reloaded, ["Paris", "1903"], "famous towers") == answers(index, ["Paris", "1903"], "famous towers")


def test_documents_and_chunks_build_without_a_file(tmp_path: Path) -> None:
    documents = [SourceDocument(x, id=i, title=t) for i, t, x in PASSAGES]
    from_docs = build_index(documents, tmp_path / "a", embeddings=NamedFakeEmbeddings(), progress=False)
    chunks = from_docs.store.chunks
    from_chunks = build_index(chunks, tmp_path / "b", embeddings=NamedFakeEmbeddings(), progress=False)
    assert from_chunks.store.chunks == chunks
    assert from_chunks.manifest.corpus_hash == from_docs.manifest.corpus_hash


def test_an_empty_corpus_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(AragError) as caught:
        build_index([SourceDocument("   ", id="x")], tmp_path / "index", embeddings=NamedFakeEmbeddings())
    assert "no text" in one_line(caught.value)
    assert not (tmp_path / "index").exists()


def test_a_misspelt_setting_is_refused_in_one_line_before_anything_is_written(tmp_path: Path) -> None:
    """The settings are keyword parameters (issue 37): ``progres=True`` is a type error
    (tests/typed_rejected/build_mistakes.py) and, at run time, Python's one-line TypeError naming it."""
    documents = [SourceDocument(x, id=i, title=t) for i, t, x in PASSAGES]
    with pytest.raises(TypeError) as caught:
        build_index(documents, tmp_path / "index", embeddings=NamedFakeEmbeddings(), progres=True)  # type: ignore[call-arg]
    assert "'progres'" in one_line(caught.value)
    assert not (tmp_path / "index").exists()


def test_build_index_takes_every_build_option_by_name_and_none_keeps_the_options_value(tmp_path: Path) -> None:
    """One keyword parameter per BuildOptions field, so a field added there cannot be missed here; a
    setting given replaces the one in ``options``, one left None keeps it."""
    import dataclasses
    import inspect

    from arag_graph.index.build import BuildOptions

    parameters = inspect.signature(build_index).parameters
    for field in dataclasses.fields(BuildOptions):
        assert parameters[field.name].kind is inspect.Parameter.KEYWORD_ONLY, field.name
        assert parameters[field.name].default is None, field.name
    documents = [SourceDocument(x, id=i, title=t) for i, t, x in PASSAGES]
    options = BuildOptions(chunk_size=200, keyword_match="substring")
    index = build_index(
        documents, tmp_path / "index", options, embeddings=NamedFakeEmbeddings(), chunk_size=300, progress=False
    )
    assert (index.manifest.chunk_size, index.manifest.keyword_match) == (300, "substring")


# --------------------------------------------------------------------------------------------
# What is on disk


@pytest.fixture(scope="module")
def fake_index(tmp_path_factory: pytest.TempPathFactory) -> HierarchicalIndex:
    documents = [SourceDocument(x, id=i, title=t) for i, t, x in PASSAGES]
    out = tmp_path_factory.mktemp("fake-index") / "index"
    # Bare sentences: the tests below query with a stored sentence and expect cosine 1.
    return build_index(documents, out, embeddings=NamedFakeEmbeddings(), contextual_headers=False, progress=False)


def test_manifest_records_what_the_index_was_built_from(fake_index: HierarchicalIndex) -> None:
    assert fake_index.path is not None
    build = active_build(fake_index.path)
    assert {"sentences.npy", "chunks.jsonl", MANIFEST} <= {p.name for p in build.iterdir()}
    raw = json.loads((build / MANIFEST).read_text(encoding="utf-8"))
    chunks = fake_index.store.chunks
    assert raw["format_version"] == FORMAT_VERSION
    assert raw["embedding_model"] == "test/fake-hash-32" and raw["embedding_dim"] == 32
    assert (raw["documents"], raw["chunks"]) == (3, 3)
    assert raw["sentences"] == sum(len(c.sentences) for c in chunks) == 6
    assert raw["corpus_hash"] == corpus_hash(chunks) and len(raw["corpus_hash"]) == 64
    assert raw["contextual_headers"] is False and raw["keyword_match"] == "word"
    assert raw["chunk_size"] == 1000
    assert raw["chroma"] == {"mode": "matrix", "path": "sentences.npy"}  # a small index: exact search
    assert set(raw["extra"]["timings"]) == {
        "split_seconds",
        "encode_seconds",
        "insert_seconds",
        "keyword_seconds",
        "checksum_seconds",
    }
    assert raw["build_seconds"] > 0
    # Every file the build wrote but the manifest itself and Chroma's own (which change on open).
    written = {p.name for p in build.iterdir() if p.is_file() and p.name != MANIFEST}
    assert set(raw["checksums"]) == written and all(v.startswith("sha256:") for v in raw["checksums"].values())
    assert "sentences.npy" in raw["checksums"]  # the vectors themselves are checksummed
    assert raw["sentence_digest"] is None  # no sentence records to digest: the matrix holds vectors only


def test_corpus_hash_changes_with_text_title_or_id(fake_index: HierarchicalIndex) -> None:
    chunks = fake_index.store.chunks
    base = corpus_hash(chunks)
    first = chunks[0]
    for changed in (
        first.__class__(first.id, first.text + " ", first.title, first.prev_id, first.next_id, first.sentences),
        first.__class__(first.id, first.text, "Other", first.prev_id, first.next_id, first.sentences),
        first.__class__("other", first.text, first.title, first.prev_id, first.next_id, first.sentences),
    ):
        assert corpus_hash([changed, *chunks[1:]]) != base


def test_sentence_records_point_at_their_chunk(tmp_path: Path) -> None:
    documents = [SourceDocument(x, id=i, title=t) for i, t, x in PASSAGES]
    index = build_index(documents, tmp_path / "index", embeddings=NamedFakeEmbeddings(), backend="chroma")
    assert index.manifest.chroma == {"mode": "persistent", "path": "chroma", "collection": "sentences", "ids": "rows"}
    assert (active_build(tmp_path / "index") / "chroma").is_dir()
    # Chroma's files change when opened: its records are checked by digest and vector fingerprint.
    assert index.manifest.sentence_digest is not None and index.manifest.sentence_digest.startswith("sha256:")
    assert {"sentences.fingerprint.npy", "chunks.jsonl"} <= set(index.manifest.checksums)
    stored = index.sentences.collection.get(include=["documents", "metadatas"])
    records = sorted(
        (int(i), m["chunk_id"], m["position"], d)
        for i, m, d in zip(stored["ids"], stored["metadatas"], stored["documents"], strict=True)
    )
    expected = [(c.id, p, s) for c in index.store.chunks for p, s in enumerate(c.sentence_texts())]
    assert records == [(row, *record) for row, record in enumerate(expected)]  # ids are row numbers
    assert index.sentences.collection.configuration["hnsw"]["space"] == "cosine"
    assert index.sentences.client.get_settings().anonymized_telemetry is False


# --------------------------------------------------------------------------------------------
# Embedding models


def test_a_fake_embeddings_index_works_end_to_end(fake_index: HierarchicalIndex) -> None:
    assert fake_index.path is not None
    index = load_index(fake_index.path, embeddings=NamedFakeEmbeddings())
    sentence = "It flows into the Mediterranean Sea."
    hit = index.semantic_search(sentence, 1)[0]
    assert hit.chunk_id == "nile" and hit.score == pytest.approx(1.0, abs=1e-5)
    assert sentence in hit.snippets
    assert [h.chunk_id for h in index.keyword_search(["Paris"], 5)] == ["eiffel"]


def test_keyword_search_takes_a_string_as_one_keyword(fake_index: HierarchicalIndex) -> None:
    """A ``str`` is a ``Sequence[str]``: the library once searched "Eiffel Tower"'s single characters
    and returned every chunk. A string is one keyword, as the ``keyword_search`` tool takes it."""
    as_string = fake_index.keyword_search("Eiffel Tower", 5)
    assert as_string == fake_index.keyword_search(["Eiffel Tower"], 5)
    assert [h.chunk_id for h in as_string] == ["eiffel"]


def test_loading_with_another_embedding_model_fails_in_one_line(fake_index: HierarchicalIndex) -> None:
    assert fake_index.path is not None
    with pytest.raises(IndexMismatchError) as caught:
        load_index(fake_index.path, embeddings=NamedFakeEmbeddings(model_id="test/other-model"))
    message = one_line(caught.value)
    assert "test/fake-hash-32" in message and "test/other-model" in message and str(fake_index.path) in message
    with pytest.raises(IndexMismatchError) as caught:
        load_index(fake_index.path)  # the default encoder is not what this index was built with
    assert "test/fake-hash-32" in one_line(caught.value) and "embeddings=" in str(caught.value)


def test_loading_a_default_model_index_with_a_fake_fails(sample_index: HierarchicalIndex) -> None:
    assert sample_index.path is not None
    with pytest.raises(IndexMismatchError) as caught:
        load_index(sample_index.path, embeddings=NamedFakeEmbeddings())
    assert "all-MiniLM-L6-v2" in one_line(caught.value)


def test_unsupported_format_version_is_a_mismatch(fake_index: HierarchicalIndex, tmp_path: Path) -> None:
    import shutil

    assert fake_index.path is not None
    copy = tmp_path / "copy"
    shutil.copytree(fake_index.path, copy)
    manifest = active_build(copy) / MANIFEST
    data = json.loads(manifest.read_text(encoding="utf-8"))
    manifest.write_text(json.dumps({**data, "format_version": FORMAT_VERSION + 1}), encoding="utf-8")
    with pytest.raises(IndexMismatchError) as caught:
        load_index(copy, embeddings=NamedFakeEmbeddings())
    assert "arag index" in one_line(caught.value)


def test_contextual_headers_change_what_is_embedded_not_what_is_shown(tmp_path: Path) -> None:
    documents = [SourceDocument(x, id=i, title=t) for i, t, x in PASSAGES]
    plain = build_index(documents, tmp_path / "plain", embeddings=NamedFakeEmbeddings(), contextual_headers=False)
    headed = build_index(
        documents, tmp_path / "cch", embeddings=NamedFakeEmbeddings(), contextual_headers=True, progress=False
    )
    assert headed.manifest.contextual_headers is True and plain.manifest.contextual_headers is False
    assert headed.manifest.corpus_hash == plain.manifest.corpus_hash
    sentence = "It flows into the Mediterranean Sea."
    # The fake maps equal texts to equal vectors: cosine 1 shows exactly which text was embedded.
    assert plain.semantic_search(sentence, 1)[0].score == pytest.approx(1.0, abs=1e-5)
    assert headed.semantic_search(sentence, 1)[0].score < 0.9
    hit = headed.semantic_search(f"Nile: {sentence}", 1)[0]
    assert hit.chunk_id == "nile" and hit.score == pytest.approx(1.0, abs=1e-5)
    assert sentence in hit.snippets and not any(s.startswith("Nile:") for s in hit.snippets)
    in_chroma = build_index(
        documents, tmp_path / "chroma", embeddings=NamedFakeEmbeddings(), contextual_headers=True, backend="chroma"
    )
    stored = in_chroma.sentences.collection.get(include=["documents"])["documents"]  # type: ignore[union-attr]
    assert sorted(stored) == sorted(s for c in in_chroma.store.chunks for s in c.sentence_texts())
    assert in_chroma.semantic_search(f"Nile: {sentence}", 1) == headed.semantic_search(f"Nile: {sentence}", 1)
    reloaded = load_index(tmp_path / "cch", embeddings=NamedFakeEmbeddings())
    assert reloaded.manifest.contextual_headers is True


# --------------------------------------------------------------------------------------------
# Missing and damaged indexes


def test_missing_index_is_one_line(tmp_path: Path) -> None:
    for path in (tmp_path / "nowhere", tmp_path):
        with pytest.raises(IndexNotFoundError) as caught:
            load_index(path)
        message = one_line(caught.value)
        assert str(path) in message and "arag index" in message


def test_damaged_index_is_one_line(fake_index: HierarchicalIndex, tmp_path: Path) -> None:
    import shutil

    assert fake_index.path is not None
    copy = tmp_path / "copy"
    shutil.copytree(fake_index.path, copy)
    (active_build(copy) / "chunks.jsonl").write_text("{not json\n", encoding="utf-8")
    with pytest.raises(IndexNotFoundError) as caught:
        load_index(copy, embeddings=NamedFakeEmbeddings())
    assert "rebuild" in one_line(caught.value)
    (copy / CURRENT).write_text("no-such-build\n", encoding="utf-8")
    with pytest.raises(IndexNotFoundError) as caught:
        load_index(copy, embeddings=NamedFakeEmbeddings())
    assert "arag index" in one_line(caught.value)


def test_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x", encoding="utf-8")
    with pytest.raises(AragError) as caught:
        build_index([SourceDocument("Some text.", id="a")], target, embeddings=NamedFakeEmbeddings())
    assert "not a directory" in one_line(caught.value)


# --------------------------------------------------------------------------------------------
# Rebuilding


class _FailingEmbeddings(NamedFakeEmbeddings):
    """Fails part-way through embedding, like a build interrupted by an error."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("embedding service went away")


def test_a_failed_rebuild_keeps_the_old_index_and_leaves_nothing(fake_index: HierarchicalIndex, tmp_path: Path) -> None:
    import shutil

    assert fake_index.path is not None
    root = tmp_path / "index"
    shutil.copytree(fake_index.path, root)
    before = answers(load_index(root, embeddings=NamedFakeEmbeddings()), ["Paris"], "a river")
    builds = sorted(p.name for p in (root / BUILDS).iterdir())
    with pytest.raises(RuntimeError, match="went away"):
        build_index([SourceDocument("New text.", id="n")], root, embeddings=_FailingEmbeddings(), progress=False)
    assert sorted(p.name for p in (root / BUILDS).iterdir()) == builds
    assert answers(load_index(root, embeddings=NamedFakeEmbeddings()), ["Paris"], "a river") == before


def test_a_second_build_into_the_same_directory_fails_fast(tmp_path: Path) -> None:
    root = tmp_path / "index"
    build_index([SourceDocument("Some text.", id="a")], root, embeddings=NamedFakeEmbeddings(), progress=False)
    with FileLock(str(root / ".lock")):  # what a running build holds
        with pytest.raises(AragError) as caught:
            build_index([SourceDocument("Some text.", id="a")], root, embeddings=NamedFakeEmbeddings(), progress=False)
        assert "another `arag index`" in one_line(caught.value)


def test_rebuild_replaces_the_cached_index(tmp_path: Path) -> None:
    root = tmp_path / "index"
    build_index([SourceDocument("The Nile is a river.", id="a")], root, progress=False)
    first = load_index(root, cache=True)
    assert load_index(root, cache=True) is first
    build_index([SourceDocument("The Danube is a river.", id="b")], root, progress=False)
    second = load_index(root, cache=True)
    assert second is not first and [c.id for c in second.store.chunks] == ["b"]
    assert sorted(p.name for p in (root / BUILDS).iterdir()) == [active_build(root).name]


# A rebuild in a subprocess that SIGKILLs itself at a named point (sys.argv[3]): no clock decides
# where a kill lands. "encoding": on its first embedding call (a build directory half written);
# "before_switch": as it is about to point CURRENT at the finished build; "after_switch": right after.
_BUILD_SCRIPT = """
import os, signal, sys
from arag_graph.index.build import build_index
from tests.fakes import NamedFakeEmbeddings

where = sys.argv[3]

def die():
    os.kill(os.getpid(), signal.SIGKILL)

class DyingEmbeddings(NamedFakeEmbeddings):
    def embed_documents(self, texts):
        if where == "encoding":
            die()
        return super().embed_documents(texts)

real_replace = os.replace

def replace(src, dst, *args, **kwargs):
    switching = os.path.basename(os.fspath(dst)) == "CURRENT"
    if switching and where == "before_switch":
        die()
    real_replace(src, dst, *args, **kwargs)
    if switching and where == "after_switch":
        die()

os.replace = replace
build_index(sys.argv[1], sys.argv[2], embeddings=DyingEmbeddings(), progress=False)
print("not killed", flush=True)
"""


def _big_corpus(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            text = (
                f"Station {i} lies on the line to Harbour {i % 37}. It opened in {1850 + i % 150} "
                f"with {i % 9 + 1} platforms. The keeper of station {i} was named Keeper{i}."
            )
            fh.write(json.dumps({"id": f"s{i}", "title": f"Station {i}", "text": text}) + "\n")
    return path


@pytest.mark.parametrize(
    ("where", "survivor"), [("encoding", "old"), ("before_switch", "old"), ("after_switch", "new")]
)
def test_a_killed_rebuild_leaves_the_previous_index_loadable(where: str, survivor: str, tmp_path: Path) -> None:
    """SIGKILL a rebuild at each step that matters: the index loads and answers as before (or, when the
    kill came after the switch, as the finished new build), and the next build clears leftovers."""
    root = tmp_path / "index"
    old_docs = [SourceDocument(x, id=i, title=t) for i, t, x in PASSAGES]
    build_index(old_docs, root, embeddings=NamedFakeEmbeddings(), progress=False)
    probe = (["Paris", "Harbour 3"], "It flows into the Mediterranean Sea.")
    old = load_index(root, embeddings=NamedFakeEmbeddings())
    expected = {"old": (old.manifest.corpus_hash, answers(old, *probe))}
    old_build = active_build(root).name

    corpus = _big_corpus(tmp_path / "big.jsonl", 300)
    new = build_index(corpus, tmp_path / "reference", embeddings=NamedFakeEmbeddings(), progress=False)
    expected["new"] = (new.manifest.corpus_hash, answers(new, *probe))
    assert expected["new"] != expected["old"]

    script = tmp_path / "build.py"
    script.write_text(_BUILD_SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(script), str(corpus), str(root), where],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, (done.stdout, done.stderr[-2000:])
    builds = sorted(p.name for p in (root / BUILDS).iterdir())
    assert len(builds) == 2, (
        builds
    )  # the active build and one leftover: the killed one, or the old one after the switch
    loaded = load_index(root, embeddings=NamedFakeEmbeddings())
    assert (loaded.manifest.corpus_hash, answers(loaded, *probe)) == expected[survivor]
    assert (active_build(root).name == old_build) == (survivor == "old")

    build_index(old_docs, root, embeddings=NamedFakeEmbeddings(), progress=False)
    assert sorted(p.name for p in (root / BUILDS).iterdir()) == [active_build(root).name]
    assert not list(root.glob(f".{CURRENT}.*"))
    assert answers(load_index(root, embeddings=NamedFakeEmbeddings()), *probe) == expected["old"][1]


# --------------------------------------------------------------------------------------------
# The encoder


def test_parallel_encoding_gives_the_sequential_vectors(sample_index: HierarchicalIndex) -> None:
    import threading

    import torch

    from arag_graph.index.encoders import SentenceEncoder, default_embeddings

    encoder = default_embeddings("torch")
    assert isinstance(encoder, SentenceEncoder)
    texts = [s for c in sample_index.store.chunks[:20] for s in c.sentence_texts()]
    threads = torch.get_num_threads()
    seen: list[int] = []
    parallel = encoder.encode(texts, on_batch=seen.append)
    assert torch.get_num_threads() == threads  # restored
    assert sum(seen) == len(texts) and len(seen) == -(-len(texts) // encoder.batch_size)
    torch.set_num_threads(1)  # one thread: the plain sequential loop
    try:
        sequential = encoder.encode(texts)
    finally:
        torch.set_num_threads(threads)
    assert parallel.shape == (len(texts), sample_index.manifest.embedding_dim)
    assert np.allclose(parallel, sequential, atol=1e-5)
    assert np.allclose(np.linalg.norm(parallel, axis=1), 1.0, atol=1e-5)

    # Concurrent callers (graph runs embedding queries during a build) share the tokenizer safely.
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            if n % 2:
                results[n] = np.asarray([encoder.embed_query(f"{texts[n]} ({n})")])
            else:
                results[n] = encoder.encode(texts[:64])
        except BaseException as exc:  # collected, re-raised below
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors, errors
    assert torch.get_num_threads() == threads
    for n in (0, 2, 4):
        assert np.allclose(results[n], parallel[:64], atol=1e-5)


# --------------------------------------------------------------------------------------------
# Semantic search semantics


def test_semantic_search_is_max_aggregation_over_all_sentences(sample_index: HierarchicalIndex) -> None:
    """Brute force over every stored sentence vector gives the same chunks in the same order."""
    stored, rows = sample_index.sentences.all_vectors()
    vectors, owners = stored.astype(np.float64), [chunk_id for chunk_id, _ in rows]
    for query in (
        "Who directed Maximum Overdrive?",
        "a politician who was governor of North Carolina",
        "martial arts technical advisor",
    ):
        q = np.asarray(sample_index.embeddings.embed_query(query), dtype=np.float64)
        best: dict[str, float] = {}
        for owner, similarity in zip(owners, vectors @ q, strict=True):
            best[owner] = max(best.get(owner, -2.0), float(similarity))
        expected = sorted(best.items(), key=lambda kv: -kv[1])[:5]
        hits = sample_index.semantic_search(query, 5)
        assert [h.chunk_id for h in hits] == [cid for cid, _ in expected], query
        assert [h.score for h in hits] == pytest.approx([s for _, s in expected], abs=1e-4)


def test_semantic_search_snippets_are_the_chunks_sentences_among_the_top_3_top_k(
    sample_index: HierarchicalIndex,
) -> None:
    """The paper's snippet pool: a chunk's sentences among the query's 3*top_k nearest, in chunk order
    (its best sentence alone when it was ranked by one outside that pool), whatever pool ranks chunks."""
    stored, rows = sample_index.sentences.all_vectors()
    vectors = stored.astype(np.float64)
    wider = 0
    for query, top_k in (
        ("Who directed Maximum Overdrive?", 5),
        ("a politician who was governor of North Carolina", 5),
        ("martial arts technical advisor", 3),
    ):
        q = np.asarray(sample_index.embeddings.embed_query(query), dtype=np.float64)
        order = [rows[i] for i in np.argsort(-(vectors @ q), kind="stable")]
        pool = order[: 3 * top_k]
        hits = sample_index.semantic_search(query, top_k)
        assert len(hits) == top_k
        for hit in hits:
            expected = sorted({p for cid, p in pool if cid == hit.chunk_id})
            best = next(p for cid, p in order if cid == hit.chunk_id)
            assert list(hit.positions) == (expected or [best]), (query, hit.chunk_id)
            chunk = sample_index.get_chunk(hit.chunk_id)
            assert chunk is not None
            assert list(hit.snippets) == [chunk.text[slice(*chunk.sentences[p])] for p in hit.positions]
            wider += len({p for cid, p in order[:50] if cid == hit.chunk_id}) - len(hit.positions)
        assert sum(len(h.positions) for h in hits) <= 3 * top_k + top_k
    assert wider > 0  # the old pool (top 50 sentences) would have shown more on these queries


def test_semantic_search_fetches_more_when_best_sentences_share_a_chunk(tmp_path: Path) -> None:
    crowded = " ".join(f"Lighthouse keepers log the lighthouse lamp number {n}." for n in range(80))
    documents = [SourceDocument(crowded, id="crowded")] + [
        SourceDocument(f"A lighthouse stands on island {n}. Ferries call twice a day.", id=f"island{n}")
        for n in range(8)
    ]
    index = build_index(documents, tmp_path / "index", embeddings=WordHashEmbeddings(), progress=False)
    assert len(index.store.get("crowded").sentences) == 80  # type: ignore[union-attr]
    hits = index.semantic_search("lighthouse keepers log the lighthouse lamp", 5)
    assert hits[0].chunk_id == "crowded"
    assert len(hits) == 5 and len({h.chunk_id for h in hits}) == 5
    assert index.semantic_search("lighthouse", 0) == []
    assert len(index.semantic_search("lighthouse", 50)) == 9  # never more than the corpus holds


# --------------------------------------------------------------------------------------------
# HotpotQA slice: real encoder, real corpus


def _questions(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def test_semantic_search_finds_gold_passages_on_hotpotqa(
    hotpot_index: HierarchicalIndex, hotpot_slice: tuple[Path, Path]
) -> None:
    questions = _questions(hotpot_slice[1])
    recalls = []
    for q in questions:
        gold = {cid for title, _ in q["supporting_facts"] for cid in hotpot_index.ids_for_title(title)}
        assert gold, q["question"]
        found = {h.chunk_id for h in hotpot_index.semantic_search(q["question"], 5)}
        recalls.append(len(gold & found) / len(gold))
    # Loose on purpose (the full benchmark is bench/bench_quality.py), but it fails if ranking breaks.
    assert sum(r > 0 for r in recalls) >= len(questions) * 0.75, recalls
    assert sum(recalls) / len(recalls) >= 0.5, recalls


def test_results_are_identical_after_a_reload(hotpot_index: HierarchicalIndex, hotpot_slice: tuple[Path, Path]) -> None:
    assert hotpot_index.path is not None
    reloaded = load_index(hotpot_index.path)
    for q in _questions(hotpot_slice[1]):
        question = q["question"]
        before = [h.to_dict() for h in hotpot_index.semantic_search(question, 5)]
        fresh_vector = reloaded.embeddings.embed_documents([question])[0]  # not from the query cache
        after = [h.to_dict() for h in reloaded.semantic_search(question, 5, query_vector=fresh_vector)]
        assert [h["chunk_id"] for h in after] == [h["chunk_id"] for h in before]
        assert [h["snippets"] for h in after] == [h["snippets"] for h in before]
        assert [h["score"] for h in after] == pytest.approx([h["score"] for h in before], abs=1e-5)
        keywords = q["question"].split()[:3]
        assert reloaded.keyword_search(keywords, 5) == hotpot_index.keyword_search(keywords, 5)


def test_every_title_maps_to_chunks(hotpot_index: HierarchicalIndex, hotpot_slice: tuple[Path, Path]) -> None:
    corpus = json.loads(hotpot_slice[0].read_text(encoding="utf-8"))
    assert hotpot_index.manifest.chunks == len(corpus)
    for title in corpus:
        ids = hotpot_index.ids_for_title(title)
        assert len(ids) == 1 and hotpot_index.get_chunk(ids[0]).title == title  # type: ignore[union-attr]
    assert hotpot_index.ids_for_title("No Such Title") == []
