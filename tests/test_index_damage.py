"""A damaged index never answers: every kind of damage ends in the one ``index damaged`` line.

Each case copies a freshly built index, damages one file the way a bad disk, a bad copy or a
careless hand would, and checks that loading (or, for damage only a full check can see, the search
that would use it and ``arag verify``) fails with ``index damaged: ...; rebuild with ...``: no
traceback, no AttributeError or IndexError, no answer from wrong chunks. The byte-level cases are
the ones that gave exit status 0 and wrong chunks before checksums: permuted keyword arrays,
changed chunk text, a reversed vocabulary, sentence records pointing at another chunk. Damage to
the sentence level is tried on both of its stores: the exact matrix (``sentences.npy``, the default
for small indexes) and Chroma (large indexes).
"""

from __future__ import annotations

import contextlib
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.index import integrity
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.integrity import file_checksum
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import NamedFakeEmbeddings
from tests.reliability import record

PASSAGES = [
    ("curie", "Marie Curie", "Marie Curie was a physicist and chemist. She won the Nobel Prize in Physics in 1903."),
    ("eiffel", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889."),
    ("nile", "Nile", "The Nile is a major river in northeast Africa. It flows into the Mediterranean Sea."),
    ("danube", "Danube", "The Danube flows through Vienna and Budapest. It ends in the Black Sea."),
]


BACKENDS = ("matrix", "chroma")


class _Pristines(dict[str, Path]):
    """The same small index with each sentence store, each built on first use: a test of the matrix
    build starts no Chroma client (which deadlocks in mutmut's forked test process, bench/mutation.py)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        super().__init__()
        self._factory = tmp_path_factory

    def __missing__(self, backend: str) -> Path:
        if backend not in BACKENDS:
            raise KeyError(backend)
        root = self._factory.mktemp(f"pristine-{backend}") / "index"
        docs = [SourceDocument(text, id=i, title=t) for i, t, text in PASSAGES]
        # Bare chunk texts in the keyword index: each damage below has one expected first symptom.
        build_index(
            docs, root, embeddings=NamedFakeEmbeddings(), backend=backend, contextual_headers=False, progress=False
        )
        self[backend] = root
        return root


@pytest.fixture(scope="module")
def pristines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same small index built once with each sentence store (when a test first asks for it)."""
    return _Pristines(tmp_path_factory)


@pytest.fixture
def pristine(pristines: dict[str, Path]) -> Path:
    return pristines["chroma"]


def copy_to(source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(source, target, symlinks=True)
    return target


@pytest.fixture
def copy(pristines: dict[str, Path], tmp_path: Path) -> Path:
    """A copy of the Chroma build (the cases about Chroma's records and files)."""
    return copy_to(pristines["chroma"], tmp_path)


@pytest.fixture
def matrix_copy(pristines: dict[str, Path], tmp_path: Path) -> Path:
    """A copy of the matrix build (the default for indexes of this size)."""
    return copy_to(pristines["matrix"], tmp_path)


def build_of(root: Path) -> Path:
    return root / BUILDS / (root / CURRENT).read_text(encoding="utf-8").strip()


def load(root: Path) -> HierarchicalIndex:
    return load_index(root, embeddings=NamedFakeEmbeddings())


def damaged_line(error: BaseException, root: Path) -> str:
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith("index damaged: "), message
    assert f"rebuild with `arag index CORPUS --out {root}`" in message, message
    return message


def edit_manifest(root: Path, change: Callable[[dict[str, Any]], Any]) -> None:
    """Change the manifest by hand and seal it again (its old seal would refuse any change first, and a
    manifest of this format without one is refused too): the damage under test is what loading meets."""
    path = build_of(root) / MANIFEST
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop("manifest_checksum", None)
    result = change(data)
    edited = data if result is None else result
    if isinstance(edited, dict):
        edited["manifest_checksum"] = integrity.json_checksum(edited)
    path.write_text(json.dumps(edited), encoding="utf-8")


def without_checksums(root: Path) -> None:
    """Make the copy look like an index from before checksums (or whose manifest lost them)."""
    edit_manifest(root, lambda m: m.update(checksums={}, sentence_digest=None))


def resealed(damage: Callable[[Path], Any]) -> Callable[[Path], None]:
    """``damage``, then checksums recomputed over the damaged files, as a build that wrote bad bytes
    would record them: what the structural checks behind the checksums must still refuse."""

    def apply(root: Path) -> None:
        damage(root)
        build = build_of(root)
        edit_manifest(
            root,
            lambda m: m["checksums"].update(
                {name: file_checksum(build / name) for name in m["checksums"] if (build / name).exists()}
            ),
        )

    return apply


def save_array(root: Path, name: str, change: Callable[[np.ndarray], np.ndarray]) -> None:
    path = build_of(root) / f"keywords.{name}.npy"
    np.save(path, change(np.load(path)), allow_pickle=False)


def flip_text_byte(root: Path) -> None:
    """Change one letter of a chunk's text in chunks.jsonl; the file stays valid JSON of the same size."""
    path = build_of(root) / "chunks.jsonl"
    data = path.read_bytes()
    at = data.index(b"Paris")
    path.write_bytes(data[:at] + b"Rome!" + data[at + 5 :])


def permute(array: np.ndarray) -> np.ndarray:
    return np.random.default_rng(3).permutation(array)


def reverse_vocabulary(root: Path) -> None:
    path = build_of(root) / "keywords.vocabulary.txt"
    path.write_text("\n".join(reversed(path.read_text(encoding="utf-8").split("\n"))), encoding="utf-8")


def truncate_sqlite(root: Path) -> None:
    path = build_of(root) / "chroma" / "chroma.sqlite3"
    path.write_bytes(path.read_bytes()[:5000])


def matrix_file(root: Path) -> Path:
    return build_of(root) / "sentences.npy"


def truncate_matrix(root: Path) -> None:
    """Cut the last 100 bytes of sentences.npy, as a copy that ran out of space would."""
    path = matrix_file(root)
    path.write_bytes(path.read_bytes()[:-100])


def change_matrix_value(root: Path) -> None:
    """Overwrite one float of one sentence vector in place; the file keeps its size and header."""
    path = matrix_file(root)
    vectors = np.load(path)
    vectors[2, 5] = 7.0
    np.save(path, vectors, allow_pickle=False)


def drop_matrix_row(root: Path) -> None:
    """A valid .npy of one vector fewer than the chunks have sentences."""
    path = matrix_file(root)
    np.save(path, np.load(path)[:-1], allow_pickle=False)


def matrix_as_float64(root: Path) -> None:
    path = matrix_file(root)
    np.save(path, np.load(path).astype(np.float64), allow_pickle=False)


def replace_matrix_with_link(root: Path) -> None:
    """sentences.npy as a symbolic link to an identical copy outside the build."""
    path = matrix_file(root)
    outside = root.parent / "elsewhere.npy"
    shutil.copyfile(path, outside)
    path.unlink()
    path.symlink_to(outside)


# Damage that loading must refuse: (how, what the line must mention).
AT_LOAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "manifest_empty_list": (lambda r: edit_manifest(r, lambda m: []), "not a JSON object"),
    "manifest_missing_field": (lambda r: edit_manifest(r, lambda m: m.pop("chunks") and None), "'chunks'"),
    "manifest_wrong_type": (lambda r: edit_manifest(r, lambda m: m.update(sentences="many")), "'sentences'"),
    "manifest_not_json": (lambda r: (build_of(r) / MANIFEST).write_bytes(b"{\x00"), "not JSON"),
    "manifest_missing": (lambda r: (build_of(r) / MANIFEST).unlink(), "cannot be read"),
    "current_not_utf8": (lambda r: (r / CURRENT).write_bytes(b"\xff\xfe\xfa\n"), "not UTF-8"),
    "current_names_a_path": (lambda r: (r / CURRENT).write_text("../../elsewhere\n"), "not a build"),
    "current_names_a_missing_build": (lambda r: (r / CURRENT).write_text("20200101T000000-deadbeef\n"), "missing"),
    "chunk_text_changed": (flip_text_byte, "checksum mismatch"),
    "chunks_truncated": (
        lambda r: (build_of(r) / "chunks.jsonl").write_bytes((build_of(r) / "chunks.jsonl").read_bytes()[:-40]),
        "chunks.jsonl",
    ),
    "keyword_arrays_permuted": (lambda r: save_array(r, "occ_chunk", permute), "checksum mismatch"),
    "keyword_positions_permuted": (lambda r: save_array(r, "occ_pos", permute), "checksum mismatch"),
    "vocabulary_reversed": (reverse_vocabulary, "checksum mismatch"),
    "occ_chunk_out_of_range": (lambda r: save_array(r, "occ_chunk", lambda a: a + 1000), "checksum mismatch"),
    "keyword_header_list": (lambda r: (build_of(r) / "keywords.json").write_text("[]"), "keywords.json"),
    "builds_is_a_symlink": (
        lambda r: (shutil.move(r / BUILDS, r.parent / "moved"), (r / BUILDS).symlink_to(r.parent / "moved")),
        "symbolic link",
    ),
    # An index whose manifest records no checksums (from before them, or a planted one) is not
    # loaded unchecked.
    "manifest_without_checksums": (without_checksums, "records no checksum of chunks.jsonl"),
    "manifest_checksums_key_renamed": (
        lambda r: edit_manifest(r, lambda m: m.update(checksumz=m.pop("checksums"))),
        "which no arag manifest has",
    ),
    # The same array damage with checksums that match it (a build that wrote bad bytes): structural checks.
    "resealed_keyword_array_truncated": (resealed(lambda r: save_array(r, "occ_pos", lambda a: a[:-3])), "incomplete"),
    "resealed_keyword_array_wrong_type": (
        resealed(lambda r: save_array(r, "occ_chunk", lambda a: a.astype(np.float64))),
        "float64",
    ),
}


# Damage to one sentence store: (how, what the line must mention).
CHROMA_AT_LOAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "sqlite_truncated": (truncate_sqlite, "sentence"),
    "sentence_store_deleted": (lambda r: shutil.rmtree(build_of(r) / "chroma"), "sentence store"),
}
MATRIX_AT_LOAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "matrix_truncated": (truncate_matrix, "sentences.npy differs from what the build wrote"),
    "matrix_value_changed": (change_matrix_value, "sentences.npy differs from what the build wrote"),
    "matrix_deleted": (lambda r: matrix_file(r).unlink(), "sentences.npy cannot be read"),
    "matrix_row_missing": (drop_matrix_row, "checksum mismatch"),
    "matrix_is_a_symlink": (replace_matrix_with_link, "symbolic link"),
    # The same damage under checksums that match it: the header, size and shape checks still refuse.
    "resealed_matrix_truncated": (resealed(truncate_matrix), "sentences.npy cannot be read"),
    "resealed_matrix_not_npy": (
        resealed(lambda r: matrix_file(r).write_bytes(b"not a matrix" * 10)),
        "sentences.npy cannot be read",
    ),
    "resealed_matrix_row_missing": (resealed(drop_matrix_row), "holds 7 vectors"),
    "resealed_matrix_float64": (resealed(matrix_as_float64), "float32 matrix"),
    "matrix_deleted_unchecked": (
        lambda r: (matrix_file(r).unlink(), edit_manifest(r, lambda m: m["checksums"].pop("sentences.npy") and None)),
        "records no checksum of sentences.npy",
    ),
}
LOAD_CASES = [
    *((case, backend) for case in AT_LOAD for backend in BACKENDS),
    *((case, "chroma") for case in CHROMA_AT_LOAD),
    *((case, "matrix") for case in MATRIX_AT_LOAD),
]


@pytest.mark.parametrize(("case", "backend"), LOAD_CASES)
def test_damage_is_refused_at_load_in_one_line(
    case: str, backend: str, pristines: dict[str, Path], tmp_path: Path
) -> None:
    target = copy_to(pristines[backend], tmp_path)
    damage, needle = {**AT_LOAD, **CHROMA_AT_LOAD, **MATRIX_AT_LOAD}[case]
    damage(target)
    with pytest.raises(AragError) as caught:
        load(target)
    assert needle in damaged_line(caught.value, target)
    record("index_damage", f"load: {case} ({backend})", faults=1, survived=1)


def test_a_manifest_cannot_point_the_matrix_outside_its_build(matrix_copy: Path, tmp_path: Path) -> None:
    outside = tmp_path / "x.npy"
    np.save(outside, np.load(matrix_file(matrix_copy)), allow_pickle=False)
    for path in ("../../x.npy", str(outside), "sub/../sentences.npy", "..", ""):
        edit_manifest(matrix_copy, lambda m, p=path: m["chroma"].update(path=p))
        with pytest.raises(AragError) as caught:
            load(matrix_copy)
        assert "outside its build" in damaged_line(caught.value, matrix_copy)
    record("index_damage", "load: matrix path outside the build", faults=5, survived=5)


def test_verify_finds_a_changed_matrix_row_under_matching_checksums(matrix_copy: Path) -> None:
    """A changed row whose checksum was recorded with it loads (the shape fits); the full check reads every row."""
    from arag_graph.index.load import verify_index

    resealed(change_matrix_value)(matrix_copy)
    with pytest.raises(AragError) as caught:
        verify_index(load(matrix_copy))
    assert "sentence vector 2 " in damaged_line(caught.value, matrix_copy)
    record("index_damage", "verify: a matrix row changed (no checksums)", faults=1, survived=1)


def test_a_manifest_cannot_point_the_sentence_store_outside_its_build(copy: Path, tmp_path: Path) -> None:
    """A crafted ``chroma.path`` of ``../../x`` once made a plain search create a database there."""
    outside = tmp_path / "x"
    for path in ("../../x", str(outside), "chroma/../../../x", ".."):
        edit_manifest(copy, lambda m, p=path: m["chroma"].update(path=p))
        with pytest.raises(AragError) as caught:
            load(copy)
        assert "outside its build" in damaged_line(caught.value, copy)
    assert not outside.exists() and not (copy / "x").exists() and not (copy.parent / "x").exists()
    record("index_damage", "load: chroma.path outside the build", faults=4, survived=4)


@contextlib.contextmanager
def chroma_collection(root: Path) -> Iterator[Any]:
    """The store's collection, edited in place; its file checksums are then recorded anew, as a
    crafted manifest would, so that the checks behind them are what the test meets."""
    import chromadb
    from chromadb.config import Settings

    from arag_graph.index import integrity

    store = build_of(root) / "chroma"
    client = chromadb.PersistentClient(path=str(store), settings=Settings(anonymized_telemetry=False))
    try:
        yield client.get_collection("sentences", embedding_function=None)
    finally:
        client.close()
    edit_manifest(root, lambda m: m.update(store_checksums=integrity.tree_checksums(store)))


def reassign_records(root: Path) -> None:
    """Point every sentence record of one chunk at another existing chunk (Chroma metadata only)."""
    with chroma_collection(root) as collection:
        got = collection.get(include=["metadatas"])
        ids = [i for i, m in zip(got["ids"], got["metadatas"], strict=True) if m["chunk_id"] == "eiffel"]
        collection.update(ids=ids, metadatas=[{"chunk_id": "nile", "position": p} for p in range(len(ids))])


def as_metadata_collection(root: Path) -> None:
    """Make the copy read its records through their metadata, as builds before row ids did."""
    edit_manifest(root, lambda m: m["chroma"].pop("ids") and None)


PROBE = "The Eiffel Tower is a wrought-iron lattice tower in Paris."


@pytest.mark.parametrize("legacy", [False, True], ids=["checksums", "no-checksums"])
def test_sentence_records_pointing_at_another_chunk_never_answer(legacy: bool, copy: Path) -> None:
    """The search that would show the wrong chunk fails, and `verify` finds every such record
    (a collection whose records name their chunk in metadata, as builds before row ids wrote)."""
    from arag_graph.index.load import verify_index

    if legacy:  # a build from before the sentence digest
        edit_manifest(copy, lambda m: m.update(sentence_digest=None))
    as_metadata_collection(copy)
    reassign_records(copy)
    index = load(copy)  # a cheap load cannot read every record
    with pytest.raises(AragError) as caught:
        index.semantic_search(PROBE, 3)
    assert "does not hold that sentence" in damaged_line(caught.value, copy)
    with pytest.raises(AragError) as caught:
        verify_index(index)
    assert "not at sentence" in damaged_line(caught.value, copy)
    record(
        "index_damage",
        f"query: sentence records reassigned ({'legacy' if legacy else 'checksums'})",
        faults=2,
        survived=2,
    )


def test_row_numbered_records_find_their_chunk_in_the_chunk_store(copy: Path) -> None:
    """Builds with row ids never read a record's chunk from its metadata, so reassigned metadata
    cannot show the wrong chunk; `verify` still finds it."""
    from arag_graph.index.load import verify_index

    reassign_records(copy)
    index = load(copy)
    hits = index.semantic_search(PROBE, 1)
    assert hits[0].chunk_id == "eiffel" and PROBE in hits[0].snippets
    with pytest.raises(AragError) as caught:
        verify_index(index)
    assert "not at sentence" in damaged_line(caught.value, copy)
    record("index_damage", "query: sentence metadata reassigned (row ids)", faults=2, survived=2)


def test_a_record_id_that_is_not_a_row_never_answers(copy: Path) -> None:
    """A record renumbered outside the chunk store's rows is refused by the search that meets it."""
    with chroma_collection(copy) as collection:
        got = collection.get(ids=["2"], include=["embeddings", "metadatas", "documents"])
        collection.delete(ids=["2"])
        collection.add(
            ids=["999"], embeddings=got["embeddings"], metadatas=got["metadatas"], documents=got["documents"]
        )
    index = load(copy)  # the count still agrees
    with pytest.raises(AragError) as caught:
        index.semantic_search(got["documents"][0], 3)
    assert "not rows of the index" in damaged_line(caught.value, copy)
    record("index_damage", "query: a record id outside the rows", faults=1, survived=1)


def test_verify_finds_a_changed_sentence_vector(copy: Path) -> None:
    """Behind the store's file checksums (recorded anew here), `verify` still compares every vector."""
    from arag_graph.index.load import verify_index

    with chroma_collection(copy) as collection:
        vector = np.asarray(collection.get(ids=["2"], include=["embeddings"])["embeddings"][0])
        collection.update(ids=["2"], embeddings=[(vector[::-1]).tolist()])
    with pytest.raises(AragError) as caught:
        verify_index(load(copy))
    assert "vector of sentence record 2" in damaged_line(caught.value, copy)
    record("index_damage", "verify: a sentence vector changed", faults=1, survived=1)


@pytest.mark.parametrize(
    ("case", "damage", "needle"),
    [
        ("occ_chunk_permuted", lambda r: save_array(r, "occ_chunk", permute), "corpus order"),
        ("vocabulary_reversed", reverse_vocabulary, "not sorted"),
        ("occ_pos_out_of_range", lambda r: save_array(r, "occ_pos", lambda a: a + 5000), "outside its chunk"),
    ],
)
def test_verify_finds_array_damage_under_matching_checksums(
    case: str, damage: Callable[[Path], None], needle: str, copy: Path
) -> None:
    from arag_graph.index.load import verify_index

    resealed(damage)(copy)
    with pytest.raises(AragError) as caught:
        verify_index(load(copy))
    assert needle in damaged_line(caught.value, copy)
    record("index_damage", f"verify: {case} (no checksums)", faults=1, survived=1)


def test_out_of_range_keyword_occurrences_are_checked_as_they_are_read(copy: Path) -> None:
    """Under checksums that match them the arrays load (lengths agree), and the search that reads them refuses."""
    resealed(lambda r: save_array(r, "occ_chunk", lambda a: a + 1000))(copy)
    index = load(copy)
    for keywords in (["Paris"], ["Nobel Prize"], ["the Black Sea"]):
        with pytest.raises(AragError) as caught:
            index.keyword_search(keywords, 3)
        assert "does not exist" in damaged_line(caught.value, copy)
    record("index_damage", "query: occ_chunk out of range (no checksums)", faults=3, survived=3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_verify_passes_a_sound_index(backend: str, pristines: dict[str, Path]) -> None:
    from arag_graph.index.load import verify_index

    report = verify_index(load(pristines[backend]))
    assert report["sentences"] == load(pristines[backend]).manifest.sentences == 8 and report["checksums"]


# ---------------------------------------------------------------------------------------------
# Through the CLI, with the default encoder (what `arag search`, `ask` and `verify` load)


@pytest.fixture(scope="module")
def sample_copy_source(sample_index: HierarchicalIndex) -> Path:
    assert sample_index.path is not None
    return sample_index.path


@pytest.fixture
def cli_copy(sample_copy_source: Path, tmp_path: Path) -> Path:
    target = tmp_path / "sample"
    shutil.copytree(sample_copy_source, target, symlinks=True)
    return target


CLI_DAMAGE: dict[str, Callable[[Path], None]] = {
    "manifest_empty_list": lambda r: edit_manifest(r, lambda m: []),
    "chunk_text_changed": lambda r: _replace_in_chunks(r),
    "keyword_arrays_permuted": lambda r: save_array(r, "occ_chunk", permute),
    "current_not_utf8": lambda r: (r / CURRENT).write_bytes(b"\xff\xfe\n"),
    "sentence_vectors_truncated": truncate_matrix,  # the sample index is small: a matrix
}


def _replace_in_chunks(root: Path) -> None:
    path = build_of(root) / "chunks.jsonl"
    data = path.read_bytes()
    at = data.index(b"Leland")
    path.write_bytes(data[:at] + b"Lexand" + data[at + 6 :])


@pytest.mark.integration
@pytest.mark.parametrize("case", list(CLI_DAMAGE))
def test_search_ask_and_verify_on_a_damaged_index_fail_in_one_line(
    case: str, cli_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`arag ask` once answered from a damaged index with exit 0 (arag) or a traceback (naive_rag)."""
    CLI_DAMAGE[case](cli_copy)
    where = str(cli_copy)
    commands = [
        ["search", "--index", where, "--keywords", "Leland"],
        ["search", "--index", where, "--query", "Who founded the company?", "--json"],
        ["read", "--index", where, "0"],
        ["verify", "--index", where],
        ["ask", "Where is Leland?", "--index", where, "--model", "offline"],
        ["ask", "Where is Leland?", "--index", where, "--model", "offline", "--graph", "naive_rag", "--json"],
    ]
    for argv in commands:
        line = assert_one_error_line(*run_cli(argv, capsys))
        assert line.startswith("arag: error: index damaged: ") and "rebuild with" in line, (argv, line)
    record("index_damage", f"cli: {case}", trials=len(commands), faults=len(commands), survived=len(commands))


@pytest.mark.integration
def test_demo_refuses_a_damaged_index_it_was_given_instead_of_replacing_it(
    cli_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`arag demo --index DIR` once rebuilt a damaged user index over it, silently. Only the sample
    in arag's own cache is rebuilt when damaged; a directory the user named is theirs."""
    _replace_in_chunks(cli_copy)
    damaged = (build_of(cli_copy) / "chunks.jsonl").read_bytes()
    line = assert_one_error_line(*run_cli(["demo", "--index", str(cli_copy), "--questions", "1", "--json"], capsys))
    assert line.startswith("arag: error: index damaged: ") and "checksum mismatch" in line, line
    assert (build_of(cli_copy) / "chunks.jsonl").read_bytes() == damaged  # nothing replaced
    record("index_damage", "cli: demo --index on a damaged index", faults=1, survived=1)


@pytest.mark.integration
def test_verify_command_reports_a_sound_index(sample_copy_source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["verify", "--index", str(sample_copy_source), "--json"], capsys)
    assert code == 0 and err == ""
    report = json.loads(out)
    assert report["ok"] is True and report["chunks"] == 100 and report["sentences"] > 100
    code, out, _ = run_cli(["verify", "--index", str(sample_copy_source)], capsys)
    assert code == 0 and out.startswith("ok: ") and "sentence vectors" in out


# ---------------------------------------------------------------------------------------------
# The file rule: inside an index, arag opens only regular files it wrote, never a link


def link_to_identical_copy(relative: str) -> Callable[[Path], None]:
    """Replace a file of the build with a link to a byte-identical copy outside the index: what an
    index planted under a server's root, linking to a private index elsewhere, looks like. The
    checksums still match, so only the rule itself can refuse it."""

    def apply(root: Path) -> None:
        path = build_of(root) / relative
        outside = root.parent / f"private-{path.name}"
        shutil.copyfile(path, outside)
        path.unlink()
        path.symlink_to(outside)

    return apply


LINKED_FILES = [
    *((name, backend) for name in ("chunks.jsonl", "keywords.json", "keywords.vocabulary.txt",
                                   "keywords.occ_chunk.npy", "manifest.json") for backend in BACKENDS),
    ("sentences.npy", "matrix"),
    ("chroma/chroma.sqlite3", "chroma"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "backend"), LINKED_FILES)
def test_a_build_file_that_is_a_symbolic_link_is_never_followed(
    name: str, backend: str, pristines: dict[str, Path], tmp_path: Path
) -> None:
    target = copy_to(pristines[backend], tmp_path)
    link_to_identical_copy(name)(target)
    with pytest.raises(AragError) as caught:
        load(target)
    assert "is a symbolic link, which arag does not follow" in damaged_line(caught.value, target)
    record("index_damage", f"load: {name} is a link to an identical file ({backend})", faults=1, survived=1)


def test_a_build_directory_below_a_link_is_never_followed(pristines: dict[str, Path], tmp_path: Path) -> None:
    """A link anywhere on the way counts, not only at the last component (the build directory itself)."""
    target = copy_to(pristines["matrix"], tmp_path)
    build = build_of(target)
    moved = tmp_path / "private-build"
    shutil.move(build, moved)
    build.symlink_to(moved, target_is_directory=True)
    with pytest.raises(AragError) as caught:
        load(target)
    assert "is a symbolic link" in damaged_line(caught.value, target)


def test_the_index_directory_itself_may_be_reached_through_a_link(pristines: dict[str, Path], tmp_path: Path) -> None:
    """The user names the index; a link to it is their choice. Only what lies inside it is ruled."""
    link = tmp_path / "via-link"
    link.symlink_to(pristines["matrix"], target_is_directory=True)
    assert load(link).keyword_search(["Paris"], 1)[0].chunk_id == "eiffel"


# The manifest itself: strict keys and its seal over its own content


def test_a_flipped_bit_in_the_checksums_key_is_refused(copy: Path) -> None:
    """``checksums`` with one bit flipped (``checksuls``) once read as a manifest from before
    checksums, loaded unchecked; then any other damage answered."""
    path = build_of(copy) / MANIFEST
    data = path.read_bytes()
    at = data.index(b'"checksums"') + len('"checksu')
    path.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :])
    flip_text_byte(copy)  # damage the unchecked load would have served
    with pytest.raises(AragError) as caught:
        load(copy)
    assert "which no arag manifest has" in damaged_line(caught.value, copy)
    record("index_damage", "load: one bit of the manifest's 'checksums' key", faults=1, survived=1)


def test_the_manifest_reader_names_each_problem_in_its_exact_line(
    matrix_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Manifest.from_file's own lines, each whole (the damage cases above check a phrase of some): what
    cannot be read (missing, or a read that fails after the open, with or without strerror), a format
    this version does not read (an integer of any size), a field no manifest has (its name cut to 40
    characters), a field of the wrong type deep in a record (its whole path); and a manifest without
    ``format_version`` is of the current format."""
    import errno

    from arag_graph.core.errors import IndexDamagedError, IndexMismatchError
    from arag_graph.index import manifest as manifest_module
    from arag_graph.index.manifest import FORMAT_VERSION, Manifest

    build = build_of(matrix_copy)
    path = build / MANIFEST

    def refusal(edit: Callable[[dict[str, Any]], Any] | None = None, target: Path = path) -> str:
        if edit is not None:
            edit_manifest(matrix_copy, edit)
        with pytest.raises(AragError) as caught:
            Manifest.from_file(target)
        return str(caught.value)

    gone = build / "gone.json"
    assert refusal(target=gone) == str(IndexDamagedError(build, f"{gone} cannot be read (it is missing)"))
    for error, shown in ((OSError(errno.EIO, "Input/output error"), "Input/output error"), (OSError("gone"), "gone")):
        with monkeypatch.context() as patch:
            patch.setattr(manifest_module, "read_index_bytes", lambda root, p, e=error: (_ for _ in ()).throw(e))
            assert refusal() == str(IndexDamagedError(build, f"{path} cannot be read ({shown})"))
    for version in (99, 10**30):
        unsupported = (
            f"{path}: index format {str(version)[:20]} is not supported by this version (reads 1 and 2); rebuild "
            "the index with `arag index`"
        )
        assert refusal(lambda m, v=version: m.update(format_version=v)) == str(IndexMismatchError(unsupported))
    long_name = "x" * 50
    line = refusal(lambda m: m.update({long_name: 1, "format_version": FORMAT_VERSION}))
    assert line == str(IndexDamagedError(build, f"{path} has the field {'x' * 40!r}, which no arag manifest has"))
    line = refusal(lambda m: m.pop(long_name) and m["checksums"].update({"chunks.jsonl": 5}))
    assert line.startswith(f"index damaged: {path}: field 'checksums.chunks.jsonl': "), line
    edit_manifest(matrix_copy, lambda m: m["checksums"].update({"chunks.jsonl": "x"}))
    edit_manifest(matrix_copy, lambda m: m.pop("format_version") and None)
    assert Manifest.from_file(path).format_version == FORMAT_VERSION


def test_the_seal_is_required_in_this_format_and_manifests_of_format_1_still_load(matrix_copy: Path) -> None:
    """Deleting ``manifest_checksum`` once made a manifest load unsealed, so "any changed byte refuses"
    held only while the seal was there. Manifests of this format must have it; those of format 1
    (written before it was required) load without one, and are checked by it when they have it."""
    from arag_graph.index.manifest import FORMAT_VERSION, SEALED_FROM

    path = build_of(matrix_copy) / MANIFEST
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["format_version"] == FORMAT_VERSION >= SEALED_FROM and data["manifest_checksum"]
    del data["manifest_checksum"]
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(AragError) as caught:
        load(matrix_copy)
    assert "has no manifest_checksum" in damaged_line(caught.value, matrix_copy)
    older = {**data, "format_version": 1}
    path.write_text(json.dumps(older), encoding="utf-8")
    assert load(matrix_copy).keyword_search(["Paris"], 1)[0].chunk_id == "eiffel"
    path.write_text(json.dumps({**older, "manifest_checksum": "0" * 64}), encoding="utf-8")
    with pytest.raises(AragError) as caught:
        load(matrix_copy)
    assert "its checksum of itself fails" in damaged_line(caught.value, matrix_copy)
    record("index_damage", "load: a manifest of this format without its seal", faults=1, survived=1)


def test_a_flipped_bit_in_every_byte_of_the_manifest_is_refused(pristines: dict[str, Path]) -> None:
    """One bit of each byte of the manifest (the bit cycles with the offset) flipped alone: the
    manifest is refused in one line. (Every bit of every byte passed too, eight times as long.)"""
    from arag_graph.index.manifest import Manifest

    backend = "chroma"  # the larger manifest: it records the store's files too
    path = build_of(pristines[backend]) / MANIFEST
    original = path.read_bytes()
    sound = Manifest.from_file(path)
    target = pristines[backend].parent / "flipped.json"
    refused = 0
    for offset in range(len(original)):
        flipped = bytearray(original)
        flipped[offset] ^= 1 << (offset % 8)
        target.write_bytes(bytes(flipped))
        try:
            Manifest.from_file(target)
        except AragError as exc:
            assert "\n" not in str(exc)
            refused += 1
            continue
        raise AssertionError(f"a flipped bit at byte {offset} of the manifest loaded")
    assert refused == len(original) and Manifest.from_file(path) == sound
    record("index_damage", f"load: every bit of the manifest ({backend})", faults=refused, survived=refused)


def test_verify_reports_an_overflowing_vector_without_a_numpy_warning(
    copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vector read back with its exponent bits flipped (infinite values: what a server's damaged
    store answers, whose files arag cannot checksum) overflowed `verify`'s fingerprint, and numpy
    printed a RuntimeWarning beside the one error line."""
    import warnings

    from arag_graph.index.load import verify_index

    index = load(copy)
    read = index.sentences.records

    def damaged(ids: Any) -> Any:
        got = read(ids)
        metadata, document, vector = got["2"]
        vector = vector.copy()
        vector[:2] = (np.inf, -np.inf)
        got["2"] = (metadata, document, vector)
        return got

    monkeypatch.setattr(index.sentences, "records", damaged)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AragError) as caught:
            verify_index(index)
    assert "vector of sentence record 2" in damaged_line(caught.value, copy)


# Files larger than the checksum's read block (1 MiB)


def test_a_checksum_covers_every_byte_of_a_multi_mib_file(tmp_path: Path) -> None:
    """A change anywhere in a file changes its checksum: the last byte of 3 MiB, and one past 1 MiB."""
    from arag_graph.index.integrity import check_file, file_checksum

    path = tmp_path / "big.bin"
    data = bytes(range(256)) * (3 * 4096)  # 3 MiB
    path.write_bytes(data)
    recorded = file_checksum(path)
    for at in (len(data) - 1, (1 << 20) + 17, (2 << 20) + 3):
        path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
        assert file_checksum(path) != recorded, at
        with pytest.raises(AragError, match="checksum mismatch"):
            check_file(tmp_path, tmp_path, "big.bin", recorded)
    path.write_bytes(data)
    check_file(tmp_path, tmp_path, "big.bin", recorded)  # the same bytes pass


def test_damage_past_the_first_mib_of_the_vectors_file_is_refused_at_load(tmp_path: Path) -> None:
    """A 1.6 MB sentences.npy (400 sentences of 1,024 dimensions) changed 1.5 MB in never answers."""
    docs = [
        SourceDocument(
            f"Lighthouse {i} stands on cape {i % 13}. Its lamp was lit in {1800 + i}.", id=f"l{i}", title=f"L{i}"
        )
        for i in range(200)
    ]
    wide = NamedFakeEmbeddings(size=1024, model_id="test/fake-hash-1024")
    root = tmp_path / "index"
    build_index(docs, root, embeddings=wide, backend="matrix", progress=False)
    path = matrix_file(root)
    data = path.read_bytes()
    assert len(data) > 3 * (1 << 19)  # over 1.5 MiB
    at = len(data) - 4 * 1024 * 50 + 1  # a low mantissa byte of sentence 350's vector, 1.4 MiB in
    assert at > 1 << 20
    path.write_bytes(data[:at] + bytes([data[at] ^ 1]) + data[at + 1 :])
    with pytest.raises(AragError) as caught:
        load_index(root, embeddings=wide)
    assert "sentences.npy differs from what the build wrote" in damaged_line(caught.value, root)
    record("index_damage", "load: matrix changed past its first MiB", faults=1, survived=1)


# ---------------------------------------------------------------------------------------------
# The checks themselves (arag_graph.index.integrity), on files and records made here: what
# mutation testing runs


def damage_line(root: Path, problem: str) -> str:
    return f"index damaged: {problem}; rebuild with `arag index CORPUS --out {root}`"


def test_checksums_are_tagged_sorted_and_name_what_differs(tmp_path: Path) -> None:
    import hashlib

    from arag_graph.index.integrity import check_file, check_recorded, checksums, json_checksum, tree_checksums

    (tmp_path / "b.txt").write_bytes(b"bee")
    (tmp_path / "a.txt").write_bytes(b"")
    assert list(checksums(tmp_path, ["b.txt", "a.txt"])) == ["a.txt", "b.txt"]
    assert checksums(tmp_path, ["b.txt"])["b.txt"] == "sha256:" + hashlib.sha256(b"bee").hexdigest()
    assert json_checksum({"b": 1, "a": "é"}) == "sha256:" + hashlib.sha256(b'{"a":"\\u00e9","b":1}').hexdigest()
    with pytest.raises(AragError) as caught:
        check_file(tmp_path, tmp_path, "b.txt", "sha256:0")
    assert str(caught.value) == damage_line(
        tmp_path, f"{tmp_path / 'b.txt'} differs from what the build wrote (checksum mismatch)"
    )
    with pytest.raises(AragError) as caught:
        check_file(tmp_path, tmp_path, "gone.txt", "sha256:0")
    assert str(caught.value) == damage_line(tmp_path, f"{tmp_path / 'gone.txt'} cannot be read (it is missing)")
    check_recorded(tmp_path, tmp_path, {}, "sha256:1", "x")  # nothing recorded: nothing to compare
    check_recorded(tmp_path, tmp_path, {"x": "sha256:1"}, "sha256:1", "x")
    with pytest.raises(AragError) as caught:
        check_recorded(tmp_path, tmp_path, {"x": "sha256:1"}, "sha256:2", "x")
    assert str(caught.value) == damage_line(
        tmp_path, f"{tmp_path / 'x'} differs from what the build wrote (checksum mismatch)"
    )
    (tmp_path / "z" / "y").mkdir(parents=True)
    (tmp_path / "z" / "y" / "c.bin").write_bytes(b"sea")
    (tmp_path / "z" / "d.bin").write_bytes(b"dee")
    tree = tree_checksums(tmp_path / "z")
    assert list(tree) == ["d.bin", "y/c.bin"] and tree["y/c.bin"] == "sha256:" + hashlib.sha256(b"sea").hexdigest()


def store(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A two-level store of three files, and its recorded checksums."""
    from arag_graph.index.integrity import tree_checksums

    source = tmp_path / "store"
    (source / "seg").mkdir(parents=True)
    (source / "chroma.sqlite3").write_bytes(b"db" * 1000)
    (source / "seg" / "header.bin").write_bytes(b"h" * 10)
    (source / "seg" / "data.bin").write_bytes(bytes(range(256)) * 5000)  # over one read block
    return source, tree_checksums(source)


def test_copy_verified_copies_exactly_what_the_build_recorded(tmp_path: Path) -> None:
    from arag_graph.index.integrity import copy_verified, tree_checksums

    source, recorded = store(tmp_path)
    copy_verified(tmp_path, source, tmp_path / "copy", recorded)
    assert tree_checksums(tmp_path / "copy") == recorded
    # private to this process (0o700), into a new directory below missing ones or an empty one made for it
    assert {(p / ".").stat().st_mode & 0o777 for p in (tmp_path / "copy", tmp_path / "copy" / "seg")} == {0o700}
    copy_verified(tmp_path, source, tmp_path / "a" / "b" / "copy", recorded)
    assert tree_checksums(tmp_path / "a" / "b" / "copy") == recorded
    (tmp_path / "made").mkdir()
    copy_verified(tmp_path, source, tmp_path / "made", recorded)
    assert tree_checksums(tmp_path / "made") == recorded


@pytest.mark.parametrize("case", ["changed", "unrecorded", "missing", "linked_file", "linked_dir", "unreadable_dir"])
def test_copy_verified_refuses_every_difference_in_one_line(case: str, tmp_path: Path) -> None:
    import os

    from arag_graph.index.integrity import copy_verified

    source, recorded = store(tmp_path)
    data = source / "seg" / "data.bin"
    problem = {
        "changed": f"the sentence store file {data} differs from what the build wrote (checksum mismatch)",
        "unrecorded": f"{source / 'seg' / 'extra.bin'} is not a file the build wrote into the sentence store",
        "missing": f"the sentence store {source} lacks seg/header.bin, which the build wrote",
        "linked_file": f"{source / 'seg' / 'header.bin'} is a symbolic link, which arag does not follow",
        "linked_dir": f"{source / 'other'} is a symbolic link, which arag does not follow",
        "unreadable_dir": f"the sentence store {tmp_path / 'nowhere'} cannot be read (No such file or directory)",
    }[case]
    if case == "changed":
        raw = bytearray(data.read_bytes())
        raw[(1 << 20) + 5] ^= 1
        data.write_bytes(bytes(raw))
    elif case == "unrecorded":
        (source / "seg" / "extra.bin").write_bytes(b"")
    elif case == "missing":
        (source / "seg" / "header.bin").unlink()
    elif case == "linked_file":
        (tmp_path / "outside").write_bytes(b"h" * 10)
        (source / "seg" / "header.bin").unlink()
        (source / "seg" / "header.bin").symlink_to(tmp_path / "outside")
    elif case == "linked_dir":
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "elsewhere", source / "other", target_is_directory=True)
    else:
        source = tmp_path / "nowhere"
    with pytest.raises(AragError) as caught:
        copy_verified(tmp_path, source, tmp_path / "copy", recorded)
    assert str(caught.value) == damage_line(tmp_path, problem)


def test_copy_verified_names_tmpdir_when_the_copy_cannot_be_written(tmp_path: Path) -> None:
    from arag_graph.index.integrity import copy_verified

    source, recorded = store(tmp_path)
    (tmp_path / "copy" / "seg").mkdir(parents=True)
    (tmp_path / "copy" / "seg" / "data.bin").write_bytes(b"")  # the copy's file exists already
    with pytest.raises(AragError) as caught:
        copy_verified(tmp_path, source, tmp_path / "copy", recorded)
    assert str(caught.value) == (
        f"{source}: the sentence store could not be copied to {tmp_path} (File exists); Chroma opens a "
        "private copy of it in each process: give TMPDIR room for it (or point TMPDIR elsewhere)"
    )
    (tmp_path / "blocked").write_bytes(b"")  # a file where the copy's directory must go
    with pytest.raises(AragError) as caught:
        copy_verified(tmp_path, source, tmp_path / "blocked" / "copy", recorded)
    assert str(caught.value).startswith(
        f"{source}: the sentence store could not be copied to {tmp_path / 'blocked'} (Not a directory); "
    )


class FakeRecords:
    """Sentence records as a Chroma store returns them, in batches, with what a test changes."""

    def __init__(self, rows: list[tuple[dict[str, Any], str, np.ndarray]]) -> None:
        self.rows = rows
        self.batches: list[list[str]] = []

    def count(self) -> int:
        return len(self.rows)

    def records(self, ids: Any) -> dict[str, tuple[dict[str, Any], str, np.ndarray]]:
        self.batches.append(list(ids))
        return {i: self.rows[int(i)] for i in ids if int(i) < len(self.rows)}

    def row_ids(self, rows: Any) -> list[str]:
        return [str(r) for r in rows]  # record ids are row numbers, as in a full build


def sentence_records(count: int) -> tuple[list[Any], list[tuple[dict[str, Any], str, np.ndarray]]]:
    from arag_graph.core.documents import Chunk

    chunks = []
    for c in range(count // 2):
        text = f"Cape {c} has a lamp. It was lit in {1800 + c}."
        chunks.append(
            Chunk(id=f"c{c}", text=text, sentences=[(0, text.index(".") + 1), (text.index(".") + 2, len(text))])
        )
    vectors = np.random.default_rng(7).standard_normal((count, 8)).astype(np.float32)
    rows = []
    for c, chunk in enumerate(chunks):
        for position, (start, end) in enumerate(chunk.sentences):
            rows.append(
                ({"chunk_id": chunk.id, "position": position}, chunk.text[start:end], vectors[2 * c + position])
            )
    return chunks, rows


def test_verify_sentences_reads_every_record_in_batches(tmp_path: Path) -> None:
    from arag_graph.index import integrity

    chunks, rows = sentence_records(4002)
    fingerprint = integrity.vector_fingerprint(np.stack([r[2] for r in rows]))
    records = FakeRecords(rows)
    expected = integrity.sentence_digest(chunks)
    assert integrity.verify_sentences(tmp_path, records, chunks, expected, fingerprint) == 4002
    assert [len(b) for b in records.batches] == [2000, 2000, 2]
    assert records.batches[1][0] == "2000" and records.batches[2] == ["4000", "4001"]
    assert integrity.verify_sentences(tmp_path, FakeRecords(rows), chunks, None, None) == 4002


def test_verify_sentences_shows_long_chunk_ids_cut_to_40_characters(tmp_path: Path) -> None:
    """A record pointing at the wrong chunk is named with both chunk IDs, each cut to 40 characters
    (IDs come from corpus files: a line stays short whatever they hold)."""
    from arag_graph.core.documents import Chunk
    from arag_graph.index import integrity

    long_a, long_b = "a" * 30 + "-" + "x" * 30, "b" * 30 + "-" + "y" * 30
    chunks = [Chunk(id=long_a, text="One. Two.", sentences=[(0, 4), (5, 9)])]
    rows = [({"chunk_id": long_a, "position": 0}, "One.", np.ones(4, np.float32))]
    rows.append(({"chunk_id": long_b, "position": 1}, "Two.", np.ones(4, np.float32)))
    with pytest.raises(AragError) as caught:
        integrity.verify_sentences(tmp_path, FakeRecords(rows), chunks, None, None)
    assert str(caught.value) == damage_line(
        tmp_path,
        f"sentence record 1 points at chunk {long_b[:40]!r} position 1, not at sentence 1 of chunk {long_a[:40]!r}",
    )


@pytest.mark.parametrize(
    "case", ["count", "fingerprint_shape", "missing", "chunk", "position", "text", "vector", "digest"]
)
def test_verify_sentences_names_the_first_difference(case: str, tmp_path: Path) -> None:
    from arag_graph.index import integrity

    chunks, rows = sentence_records(6)
    fingerprint = integrity.vector_fingerprint(np.stack([r[2] for r in rows]))
    expected = integrity.sentence_digest(chunks)
    records = FakeRecords(rows)
    metadata, text, vector = rows[3]
    problem = {
        "count": "the sentence store holds 5 sentences, the chunks have 6",
        "fingerprint_shape": "the vector fingerprint has shape (5, 2), not (6, 2)",
        "missing": "sentence record 5 is missing from the sentence store",
        "chunk": "sentence record 3 points at chunk 'c0' position 1, not at sentence 1 of chunk 'c1'",
        "position": "sentence record 3 points at chunk 'c1' position 0, not at sentence 1 of chunk 'c1'",
        "text": "sentence record 3 points at chunk 'c1' position 1, not at sentence 1 of chunk 'c1'",
        "vector": "the vector of sentence record 3 differs from what the build stored",
        "digest": "the sentence records differ from what the build stored (checksum mismatch)",
    }[case]
    if case == "count":
        rows.pop()
    elif case == "fingerprint_shape":
        fingerprint = fingerprint[:5]
    elif case == "missing":
        records.records = lambda ids: {i: rows[int(i)] for i in ids if i != "5"}  # type: ignore[method-assign]
    elif case == "chunk":
        rows[3] = ({**metadata, "chunk_id": "c0"}, text, vector)
    elif case == "position":
        rows[3] = ({**metadata, "position": 0}, text, vector)
    elif case == "text":
        rows[3] = (metadata, text + " ", vector)
    elif case == "vector":
        rows[3] = (metadata, text, vector * 1.01)
    else:
        expected = integrity.sentence_digest(chunks[:2])
    with pytest.raises(AragError) as caught:
        integrity.verify_sentences(tmp_path, records, chunks, expected, fingerprint)
    assert str(caught.value) == damage_line(tmp_path, problem)


def test_vector_fingerprints_tolerate_rounding_but_not_damage() -> None:
    from arag_graph.index.integrity import _close, vector_fingerprint

    vectors = np.array([[3.0, 4.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    got = vector_fingerprint(vectors)
    assert got.shape == (2, 2) and got.dtype == np.float32
    assert got[0, 0] == pytest.approx(5.0) and got[1].tolist() == [0.0, 0.0]
    assert abs(got[0, 1]) > 0.1  # the projection on the fixed direction tells vectors of one length apart
    assert np.array_equal(vector_fingerprint(vectors), got)  # the direction is fixed
    assert vector_fingerprint(np.zeros((0, 3), np.float32)).shape == (0, 2)
    assert vector_fingerprint(np.zeros(4, np.float32)).shape == (4, 2)
    assert _close(vector_fingerprint(vectors * (1 + 5e-4)), got)
    assert not _close(vector_fingerprint(vectors * 1.01), got)
    assert not _close(vector_fingerprint(np.array([[3e38, 3e38, 0], [0, 0, 0]], np.float32)), got)


def test_vector_fingerprints_stay_what_earlier_builds_stored() -> None:
    """A Chroma build stores its vectors' fingerprints and every later version verifies them: the
    fixed direction (its seed, its unit length) is part of the index format, so a fixed vector's
    fingerprint is pinned here (values this version stores). Always float32, two per vector, and
    a damaged (overflowing) vector gives inf quietly, without a numpy warning beside the error."""
    import warnings

    from arag_graph.index.integrity import vector_fingerprint

    vectors = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [0.5, -1, 0, 0, 0, 0, 0, 2]], np.float32)
    got = vector_fingerprint(vectors)
    assert got.dtype == np.float32
    assert got.ravel().tolist() == pytest.approx([14.2828569, -10.2237244, 2.2912879, -0.0829681], rel=1e-6)
    for empty in (np.zeros((0, 8), np.float64), np.zeros((3, 0), np.float64), np.zeros(2, np.float64)):
        fingerprint = vector_fingerprint(empty)
        assert fingerprint.dtype == np.float32 and not fingerprint.any(), empty.shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        damaged = vector_fingerprint(np.array([[3e38, 3e38, 0]], np.float32))
    assert np.isinf(damaged[0, 0])


def test_check_file_opens_under_the_index_root_and_names_a_read_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from arag_graph.index import integrity

    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.bin").write_bytes(b"a")
    recorded = integrity.file_checksum(tmp_path / "elsewhere" / "a.bin")
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "build").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(AragError, match="symbolic link"):  # the link is below the root: not followed
        integrity.check_file(tmp_path / "index", tmp_path / "index" / "build", "a.bin", recorded)

    def failing(root: Path, path: Path) -> Any:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(integrity, "open_index_file", failing)
    with pytest.raises(AragError) as caught:
        integrity.check_file(tmp_path, tmp_path, "a.bin", recorded)
    assert str(caught.value) == damage_line(tmp_path, f"{tmp_path / 'a.bin'} cannot be read (Input/output error)")


def test_copy_verified_names_a_store_file_that_cannot_be_opened(tmp_path: Path) -> None:
    import socket

    from arag_graph.index.integrity import copy_verified

    source, recorded = store(tmp_path)
    header = source / "seg" / "header.bin"
    header.unlink()
    with socket.socket(socket.AF_UNIX) as listener:  # a socket file: opening it fails with ENXIO
        listener.bind(str(header))
        with pytest.raises(AragError) as caught:
            copy_verified(tmp_path, source, tmp_path / "copy", recorded)
    assert str(caught.value) == damage_line(tmp_path, f"{header} cannot be read (No such device or address)")


def test_the_sentence_digest_covers_chunk_position_and_text_of_every_record() -> None:
    import hashlib

    from arag_graph.core.documents import Chunk
    from arag_graph.index.integrity import sentence_digest

    chunk = Chunk(id="c7", text="A lamp. B lamp.", sentences=[(0, 7), (8, 15)])
    manual = hashlib.sha256(b"c7\x000\x00A lamp.\x00c7\x001\x00B lamp.\x00").hexdigest()
    assert sentence_digest([chunk]) == f"sha256:{manual}"
    half = Chunk(id="c8", text="Half \ud800.", sentences=[(0, 7)])  # a lone surrogate still has a digest
    manual = hashlib.sha256(b"c8\x000\x00Half \xed\xa0\x80.\x00").hexdigest()
    assert sentence_digest([half]) == f"sha256:{manual}"


def test_vector_fingerprints_near_zero_compare_within_the_absolute_tolerance() -> None:
    import warnings

    from arag_graph.index.integrity import _close

    assert _close(np.array([1e-5, 0.0], np.float32), np.array([0.0, 0.0], np.float32))
    assert not _close(np.array([1e-2, 0.0], np.float32), np.array([0.0, 0.0], np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # damage is a failed comparison, not a numpy warning
        assert not _close(np.array([np.inf, np.nan], np.float32), np.array([1.0, 1.0], np.float32))


def test_copy_verified_names_the_store_file_whose_read_fails_midway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk error while copying a store file (after it opened, as a failing sector would) is the
    damage line naming that file and the index, not the TMPDIR line of a copy that cannot be written.
    The error is injected at the one place no file on disk can produce it on demand: the read."""
    import builtins
    import errno

    from arag_graph.index import integrity

    source, recorded = store(tmp_path)

    class FailingReads:
        """The opened store file, whose reads fail."""

        def __init__(self, file: Any) -> None:
            self.file = file

        def __enter__(self) -> FailingReads:
            return self

        def __exit__(self, *exc: object) -> None:
            self.file.close()

        def fileno(self) -> int:
            return self.file.fileno()

        def read(self, size: int = -1) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

    def failing_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        opened = builtins.open(file, mode, *args, **kwargs)  # noqa: SIM115 - the caller closes it, as open()'s
        return FailingReads(opened) if mode == "rb" else opened

    monkeypatch.setattr(integrity, "open", failing_open, raising=False)
    with pytest.raises(AragError) as caught:
        integrity.copy_verified(tmp_path / "index", source, tmp_path / "copy", recorded)
    first = source / "chroma.sqlite3"  # the first file copied
    assert str(caught.value) == damage_line(tmp_path / "index", f"{first} cannot be read (Input/output error)")


def test_store_files_that_are_devices_or_fail_to_read_are_named(tmp_path: Path) -> None:
    import errno
    import os
    import stat

    from arag_graph.index import integrity

    source, recorded = store(tmp_path)
    header = source / "seg" / "header.bin"
    header.unlink()
    with contextlib.suppress(PermissionError):  # making a device node needs root (CAP_MKNOD)
        os.mknod(header, stat.S_IFCHR | 0o600, os.makedev(1, 3))  # a character device (/dev/null's)
    if header.exists():
        with pytest.raises(AragError) as caught:
            integrity.copy_verified(tmp_path, source, tmp_path / "copy", recorded)
        assert str(caught.value) == damage_line(tmp_path, f"{header} is not a regular file")

    class Failing:
        def read(self, size: int) -> bytes:
            raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(AragError) as caught:
        integrity._read(tmp_path, header, Failing())
    assert str(caught.value) == damage_line(tmp_path, f"{header} cannot be read (Input/output error)")
    failure = integrity._copy_failure(source, tmp_path / "copy" / "x", OSError())
    assert str(failure).startswith(
        f"{source}: the sentence store could not be copied to {tmp_path / 'copy'} (OSError);"
    )
