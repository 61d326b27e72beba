"""A damaged index never answers: every kind of damage ends in the one ``index damaged`` line.

Each case copies a freshly built index, damages one file the way a bad disk, a bad copy or a
careless hand would, and checks that loading (or, for damage only a full check can see, the search
that would use it and ``arag verify``) fails with ``index damaged: ...; rebuild with ...``: no
traceback, no AttributeError or IndexError, no answer from wrong chunks. The byte-level cases are
the ones that gave exit status 0 and wrong chunks before checksums: permuted keyword arrays,
changed chunk text, a reversed vocabulary, sentence records pointing at another chunk.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arag_graph.documents import Document
from arag_graph.errors import AragError
from arag_graph.index import BUILDS, CURRENT, MANIFEST, HierarchicalIndex, build_index, load_index
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import NamedFakeEmbeddings
from tests.reliability import record

PASSAGES = [
    ("curie", "Marie Curie", "Marie Curie was a physicist and chemist. She won the Nobel Prize in Physics in 1903."),
    ("eiffel", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was completed in 1889."),
    ("nile", "Nile", "The Nile is a major river in northeast Africa. It flows into the Mediterranean Sea."),
    ("danube", "Danube", "The Danube flows through Vienna and Budapest. It ends in the Black Sea."),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pristine") / "index"
    docs = [Document(text, id=i, title=t) for i, t, text in PASSAGES]
    build_index(docs, root, embeddings=NamedFakeEmbeddings(), progress=False)
    return root


@pytest.fixture
def copy(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(pristine, target, symlinks=True)
    return target


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
    path = build_of(root) / MANIFEST
    data = json.loads(path.read_text(encoding="utf-8"))
    result = change(data)
    path.write_text(json.dumps(data if result is None else result), encoding="utf-8")


def without_checksums(root: Path) -> None:
    """Make the copy look like an index from before checksums, to test the checks that remain."""
    edit_manifest(root, lambda m: m.update(checksums={}, sentence_digest=None))


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
    "sqlite_truncated": (truncate_sqlite, "sentence"),
    "sentence_store_deleted": (lambda r: shutil.rmtree(build_of(r) / "chroma"), "sentence store"),
    "builds_is_a_symlink": (
        lambda r: (shutil.move(r / BUILDS, r.parent / "moved"), (r / BUILDS).symlink_to(r.parent / "moved")),
        "symbolic link",
    ),
    # The same array damage without checksums (an index from before them): structural checks.
    "legacy_keyword_array_truncated": (
        lambda r: (without_checksums(r), save_array(r, "occ_pos", lambda a: a[:-3])),
        "incomplete",
    ),
    "legacy_keyword_array_wrong_type": (
        lambda r: (without_checksums(r), save_array(r, "occ_chunk", lambda a: a.astype(np.float64))),
        "float64",
    ),
}


@pytest.mark.parametrize("case", list(AT_LOAD))
def test_damage_is_refused_at_load_in_one_line(case: str, copy: Path) -> None:
    damage, needle = AT_LOAD[case]
    damage(copy)
    with pytest.raises(AragError) as caught:
        load(copy)
    assert needle in damaged_line(caught.value, copy)
    record("index_damage", f"load: {case}", faults=1, survived=1)


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


def reassign_records(root: Path) -> None:
    """Point every sentence record of one chunk at another existing chunk (Chroma metadata only)."""
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(build_of(root) / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    collection = client.get_collection("sentences", embedding_function=None)
    got = collection.get(include=["metadatas"])
    ids = [i for i, m in zip(got["ids"], got["metadatas"], strict=True) if m["chunk_id"] == "eiffel"]
    collection.update(ids=ids, metadatas=[{"chunk_id": "nile", "position": p} for p in range(len(ids))])


@pytest.mark.parametrize("legacy", [False, True], ids=["checksums", "no-checksums"])
def test_sentence_records_pointing_at_another_chunk_never_answer(legacy: bool, copy: Path) -> None:
    """The search that would show the wrong chunk fails, and `verify` finds every such record."""
    from arag_graph.index import verify_index

    if legacy:
        without_checksums(copy)
    reassign_records(copy)
    index = load(copy)  # a cheap load cannot read every record
    probe = "The Eiffel Tower is a wrought-iron lattice tower in Paris."
    with pytest.raises(AragError) as caught:
        index.semantic_search(probe, 3)
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


def test_verify_finds_a_changed_sentence_vector(copy: Path) -> None:
    import chromadb
    from chromadb.config import Settings

    from arag_graph.index import verify_index

    path = build_of(copy) / "chroma"
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    collection = client.get_collection("sentences", embedding_function=None)
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
def test_verify_finds_array_damage_without_checksums(
    case: str, damage: Callable[[Path], None], needle: str, copy: Path
) -> None:
    from arag_graph.index import verify_index

    without_checksums(copy)
    damage(copy)
    with pytest.raises(AragError) as caught:
        verify_index(load(copy))
    assert needle in damaged_line(caught.value, copy)
    record("index_damage", f"verify: {case} (no checksums)", faults=1, survived=1)


def test_out_of_range_keyword_occurrences_are_checked_as_they_are_read(copy: Path) -> None:
    """Without checksums the arrays load (lengths agree), and the search that reads them refuses."""
    without_checksums(copy)
    save_array(copy, "occ_chunk", lambda a: a + 1000)
    index = load(copy)
    for keywords in (["Paris"], ["Nobel Prize"], ["the Black Sea"]):
        with pytest.raises(AragError) as caught:
            index.keyword_search(keywords, 3)
        assert "does not exist" in damaged_line(caught.value, copy)
    record("index_damage", "query: occ_chunk out of range (no checksums)", faults=3, survived=3)


def test_verify_passes_a_sound_index(pristine: Path) -> None:
    from arag_graph.index import verify_index

    report = verify_index(load(pristine))
    assert report["sentences"] == load(pristine).manifest.sentences and report["checksums"]


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
    "sqlite_truncated": truncate_sqlite,
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
def test_verify_command_reports_a_sound_index(sample_copy_source: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["verify", "--index", str(sample_copy_source), "--json"], capsys)
    assert code == 0 and err == ""
    report = json.loads(out)
    assert report["ok"] is True and report["chunks"] == 100 and report["sentences"] > 100
    code, out, _ = run_cli(["verify", "--index", str(sample_copy_source)], capsys)
    assert code == 0 and out.startswith("ok: ") and "sentence records" in out
