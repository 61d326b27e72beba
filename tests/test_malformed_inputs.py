"""Malformed corpora and question files, by hand and generated: one-line errors, nothing left behind.

tests/test_corpus.py and tests/test_datasets.py pin down the loaders' messages case by case. Here
the same kinds of damage go through the commands users run, ``arag index`` and ``arag eval
--dataset``, and hypothesis generates many more: arbitrary bytes, arbitrary JSON shapes with
plausible and implausible field names, half surrogate pairs. What must hold for every input:

- a loader either returns usable documents / questions or raises its ``AragError`` subclass with
  one line that names the file and stays short (a 10 MB line must not flood the terminal);
- documents it returns survive the next step (chunking, token counting, UTF-8 encoding);
- the command exits with status 2, prints exactly one ``arag: error:`` line, and leaves ``--out``
  as it was: not created when it did not exist, byte for byte the same index when it did.
"""

from __future__ import annotations

import contextlib
import io
import json
import string
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from arag_graph.cli.main import main as cli_main
from arag_graph.core.chunking import chunk_documents
from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import CorpusError, DatasetError
from arag_graph.index.build import build_index
from arag_graph.index.corpus import load_corpus
from arag_graph.index.load import load_index
from arag_graph.index.sample import sample_corpus_path
from arag_graph.qa.datasets import load_questions
from tests.fakes import NamedFakeEmbeddings
from tests.reliability import record

TEN_MB = 10 * 1024 * 1024
MESSAGE_LIMIT = 600  # characters of an error line beyond the file name


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(argv)
    return code, out.getvalue(), err.getvalue()


def check_one_line(message: str, path: Path) -> None:
    assert message and "\n" not in message.strip() and "Traceback" not in message, message
    assert path.name in message, f"the message does not name the file {path.name}: {message}"
    assert len(message) <= MESSAGE_LIMIT + len(str(path)), f"{len(message)} characters: {message[:200]}..."


def snapshot(root: Path) -> dict[str, bytes] | None:
    """Every file under ``root`` with its bytes (None when ``root`` does not exist)."""
    if not root.exists():
        return None
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -----------------------------------------------------------------------------------------------
# Hand-made corpora through `arag index`


def _write(name: str, data: bytes | str) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        path = d / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
        return path

    return make


def _directory(files: dict[str, bytes]) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        root = d / "notes"
        for name, data in files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        root.mkdir(exist_ok=True)
        return root

    return make


BAD_CORPORA: dict[str, tuple[Callable[[Path], Path], str]] = {
    "empty_file": (_write("corpus.json", b""), "is empty"),
    "whitespace_only": (_write("corpus.jsonl", b" \n\t\n"), "is empty"),
    "binary": (_write("corpus.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))), "binary"),
    "invalid_utf8": (_write("corpus.jsonl", b'{"id": "a", "text": "caf\xe9"}\n'), "not UTF-8"),
    "invalid_utf8_txt": (_write("notes.txt", b"Caf\xe9 au lait.\n"), "not UTF-8"),
    "ten_mb_single_line_json": (_write("corpus.json", "[" + '"a:word word", ' * (TEN_MB // 15)), "not valid JSON"),
    "ten_mb_single_line_jsonl": (_write("corpus.jsonl", '{"text": "' + "word " * (TEN_MB // 5)), "not valid JSON"),
    "duplicate_ids": (_write("chunks.json", json.dumps([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])), "twice"),
    "duplicate_ids_int_and_str": (_write("c.jsonl", '{"id": 1, "text": "x"}\n{"id": "1", "text": "y"}\n'), "twice"),
    "duplicate_titles": (_write("corpus.json", '{"T": ["One."], "T": ["Two."]}'), "appears twice"),
    "missing_id": (_write("chunks.json", json.dumps([{"id": "a", "text": "x"}, {"text": "y"}])), "no id"),
    "chunk_string_without_id": (_write("chunks.json", json.dumps(["a:fine", "no colon here"])), '"id:'),
    "wrong_text_field_jsonl": (_write("corpus.jsonl", '{"id": "a", "body_text": "x"}\n'), "no text field"),
    "wrong_text_field_json": (
        _write("corpus.json", json.dumps([{"title": "T", "content_text": "x"}])),
        "no text field",
    ),
    "question_file_as_corpus": (
        _write("corpus.json", json.dumps([{"question": "q?", "answer": "a"}])),
        "question file",
    ),
    "wrong_types": (_write("corpus.jsonl", '{"id": "a", "text": 42}\n'), "must be a string"),
    "json_scalar": (_write("corpus.json", "42"), "not a list or object"),
    "all_documents_empty": (_write("corpus.jsonl", '{"text": ""}\n{"text": "  "}\n'), "has any text"),
    "unpaired_surrogate": (_write("corpus.jsonl", '{"id": "a", "text": "Half \\ud800 a pair."}\n'), "surrogate"),
    "unpaired_surrogate_title": (_write("corpus.json", '{"T\\udfff": ["A sentence."]}'), "surrogate"),
    "unknown_extension": (_write("corpus.dat", "just some words"), "--format"),
    "dir_without_text_files": (
        _directory({"a.docx": b"PK", "data.json": b"[]", ".hidden.txt": b"x"}),
        "no .txt",
    ),
    "dir_with_a_damaged_pdf": (_directory({"a.pdf": b"%PDF-1.4", "b.txt": b"Fine."}), "not a readable PDF"),
    "dir_with_only_empty_files": (_directory({"a.txt": b"", "sub/b.md": b"  \n"}), "has any text"),
    "dir_with_invalid_utf8_file": (_directory({"ok.txt": b"Fine.", "bad.txt": b"\xff\xfe\xfd"}), "bad.txt"),
    "missing_path": (lambda d: d / "nowhere.json", "no such file"),
}


@pytest.mark.parametrize("case", list(BAD_CORPORA))
def test_arag_index_refuses_a_bad_corpus_in_one_line_and_creates_nothing(case: str, tmp_path: Path) -> None:
    make, needle = BAD_CORPORA[case]
    corpus = make(tmp_path)
    out = tmp_path / "index"
    code, stdout, stderr = run_cli(["index", str(corpus), "--out", str(out), "--quiet"])
    assert code == 2, (code, stderr)
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arag: error: "), stderr
    check_one_line(lines[0], corpus)
    assert needle in lines[0], lines[0]
    assert not out.exists(), f"{case}: --out was created: {sorted(p.name for p in out.rglob('*'))}"
    record("malformed_inputs", f"arag index {case}", inputs=1, faults=1, survived=1)


@pytest.fixture(scope="module")
def existing_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("existing") / "index"
    build_index(sample_corpus_path(), root, embeddings=NamedFakeEmbeddings(), progress=False)
    return root


@pytest.mark.parametrize("case", ["binary", "duplicate_ids", "ten_mb_single_line_jsonl", "dir_without_text_files"])
def test_a_bad_corpus_leaves_an_existing_index_byte_for_byte(case: str, existing_index: Path, tmp_path: Path) -> None:
    before = snapshot(existing_index)
    corpus = BAD_CORPORA[case][0](tmp_path)
    code, _, stderr = run_cli(["index", str(corpus), "--out", str(existing_index), "--quiet"])
    assert code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert snapshot(existing_index) == before
    assert len(load_index(existing_index, embeddings=NamedFakeEmbeddings())) == 100
    record("malformed_inputs", f"arag index over an index: {case}", inputs=1, faults=1, survived=1)


def test_a_failed_first_build_leaves_no_directory(tmp_path: Path) -> None:
    """Failures after the corpus loaded (here: the embedding model) remove what the build created."""

    class Broken(NamedFakeEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            raise RuntimeError("encoder crashed")

    out = tmp_path / "deep" / "index"
    with pytest.raises(RuntimeError, match="encoder crashed"):
        build_index([SourceDocument("Some text.", id="a")], out, embeddings=Broken(), progress=False)
    assert not out.exists()


@pytest.mark.integration
def test_odd_but_valid_unicode_builds_and_answers(tmp_path: Path) -> None:
    """NUL and control characters, right-to-left text, emoji, combining marks and zero-width spaces
    are valid text: they index with the real encoder and can be found."""
    corpus = tmp_path / "odd.jsonl"
    texts = {
        "nul": "A line with a \u0000 NUL and a \u0007 bell inside. Second sentence.",
        "rtl": "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd is Hebrew for hello world.",
        "emoji": "The rocket \U0001f680 launched at dawn.\u200b Zero width space before this.",
        "combining": "Cafe\u0301 and nai\u0308ve use combining marks.",
    }
    corpus.write_text("\n".join(json.dumps({"id": k, "text": v}) for k, v in texts.items()), encoding="utf-8")
    out = tmp_path / "index"
    code, _, stderr = run_cli(["index", str(corpus), "--out", str(out), "--quiet", "--json"])
    assert code == 0, stderr
    index = load_index(out)
    assert index.keyword_search(["rocket"], 3)[0].chunk_id == "emoji"
    assert index.semantic_search("a rocket launch", 1)[0].chunk_id == "emoji"
    assert index.get_chunk("nul").text == texts["nul"]
    record("malformed_inputs", "odd but valid unicode", inputs=len(texts))


# -----------------------------------------------------------------------------------------------
# Hand-made question files through `arag eval --dataset` (fail fast: before any index or run)


BAD_QUESTIONS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "empty_file": (_write("questions.json", b""), "is empty"),
    "binary": (_write("questions.json", b"\x89PNG\r\n\x1a\n\x00\x00" + bytes(range(256))), "UTF-8"),
    "invalid_utf8": (_write("questions.json", b'[{"question": "caf\xe9?", "answer": "x"}]'), "UTF-8"),
    "ten_mb_single_line": (_write("questions.json", '[{"question": "' + "word " * (TEN_MB // 5)), "invalid JSON"),
    "duplicate_ids": (
        _write("questions.json", json.dumps([{"id": "a", "question": "q?", "answer": "x"}] * 2)),
        "repeats question id",
    ),
    "missing_answer": (_write("questions.json", json.dumps([{"id": "a", "question": "q?"}])), "no 'answer'"),
    "missing_question": (_write("questions.json", json.dumps([{"id": "a", "answer": "x"}])), "question"),
    "wrong_field_names": (_write("questions.jsonl", '{"query": "q?", "gold": "x"}\n'), "no 'question'"),
    "corpus_as_questions": (_write("questions.json", json.dumps({"Title": ["A sentence."]})), "not a list"),
    "a_directory": (lambda d: (d / "adir").mkdir() or d / "adir", "is a directory"),
    "missing_path": (lambda d: d / "nowhere.json", "not found"),
}


@pytest.mark.parametrize("case", list(BAD_QUESTIONS))
def test_arag_eval_refuses_a_bad_question_file_in_one_line_before_any_work(
    case: str, tmp_path: Path, _isolated_cache: Path
) -> None:
    make, needle = BAD_QUESTIONS[case]
    dataset = make(tmp_path)
    out = tmp_path / "run"
    cached = snapshot(_isolated_cache / "indexes")
    argv = ["eval", "--dataset", str(dataset), "--corpus", str(sample_corpus_path()), "--graphs", "arag,naive_rag"]
    code, stdout, stderr = run_cli([*argv, "--model", "offline", "--out", str(out), "--no-upload", "--quiet"])
    assert code == 2, (code, stderr)
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("arag: error: "), stderr
    check_one_line(lines[0], dataset)
    assert needle in lines[0], lines[0]
    assert not out.exists()
    assert snapshot(_isolated_cache / "indexes") == cached  # no index was built for a run that cannot start
    record("malformed_inputs", f"arag eval --dataset {case}", inputs=1, faults=1, survived=1)


# -----------------------------------------------------------------------------------------------
# Generated inputs (hypothesis)

FIELD_NAMES = [
    *("id", "_id", "idx", "docid", "doc_id", "title", "text", "contents", "content", "paragraph_text", "passage"),
    *("body", "question", "answer", "answers", "answer_aliases", "supporting_facts", "context", "paragraphs"),
    *("evidences", "type", "is_supporting", "question_decomposition"),
]
_text = st.text(
    st.characters(codec="utf-8") | st.sampled_from(list(string.punctuation + " .\n")), max_size=40
) | st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2)  # half surrogate pairs, escaped in JSON
_scalars = st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | _text
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELD_NAMES) | _text, inner, max_size=5)
    ),
    max_leaves=20,
)
# Values shaped like the three JSON corpus layouts, with the same hostile text inside. Arbitrary JSON is
# almost never a corpus (about one value in a hundred), so with json_values alone whether any of the
# derandomized examples loads depends on the seed, which any change to the test's source moves: the
# "loaded" branch must be reached by construction, as test_generated_records_with_plausible_fields does.
corpus_shaped = (
    st.dictionaries(_text, st.lists(_text, min_size=1, max_size=3), min_size=1, max_size=3)  # {title: [sentence]}
    | st.lists(st.fixed_dictionaries({"title": _text, "text": _text}), min_size=1, max_size=3)  # passages
    | st.lists(st.builds("{}:{}".format, st.integers(0, 9), _text), min_size=1, max_size=3)  # "id:text" chunks
)
SUFFIXES = [".json", ".jsonl", ".ndjson", ".txt", ".md", ".dat", ""]
# Derandomized (the same inputs on every run, so CI failures reproduce) and no example database on disk.
GENERATED = settings(
    max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


def _dump(value: Any, lines: bool) -> bytes:
    if lines and isinstance(value, list):
        return "\n".join(json.dumps(v) for v in value).encode("utf-8")
    return json.dumps(value).encode("utf-8")


def _corpus_holds(path: Path) -> str:
    """load_corpus returns usable documents or raises a one-line CorpusError naming the file.

    Returns which of the two happened, so a test can show its generator reaches both branches.
    """
    try:
        documents = load_corpus(path)
    except CorpusError as exc:
        check_one_line(str(exc), path)
        return "corpus rejected"
    assert documents and all(d.text.strip() for d in documents)
    ids = [d.id for d in documents if d.id is not None]
    assert len(ids) == len(set(ids))
    for d in documents:
        for value in (d.text, d.title, d.id):
            if value is not None:
                value.encode("utf-8")  # what the encoder, Chroma and the token counter need
    chunks = chunk_documents(documents, chunk_size=64)
    for c in chunks:
        assert all(0 <= s < e <= len(c.text) for s, e in c.sentences)
    return "corpus loaded"


def _questions_hold(path: Path) -> str:
    try:
        questions = load_questions(path)
    except DatasetError as exc:
        check_one_line(str(exc), path)
        return "questions rejected"
    assert all(q.question.strip() and q.answers for q in questions)
    assert len({q.id for q in questions}) == len(questions)
    return "questions loaded"


def _both_hold(path: Path, seen: Counter[str]) -> None:
    seen[_corpus_holds(path)] += 1
    seen[_questions_hold(path)] += 1


# Each property test runs its hypothesis search inside the test and then checks what the generator
# reached, so it is self-contained (alone, in any order, in parallel) and a generator that only ever
# produced rejected inputs (so the "loaded" assertions never ran) fails instead of passing silently.


def test_generated_bytes_as_corpus_or_questions() -> None:
    seen: Counter[str] = Counter()

    @given(data=st.binary(max_size=3000), suffix=st.sampled_from(SUFFIXES))
    @GENERATED
    def check(data: bytes, suffix: str) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"input{suffix}"
            path.write_bytes(data)
            _both_hold(path, seen)

    check()
    assert seen["corpus loaded"] > 0 and seen["corpus rejected"] > 0, seen
    record("malformed_inputs", "generated bytes", inputs=seen["corpus loaded"] + seen["corpus rejected"])


def test_generated_json_as_corpus_or_questions() -> None:
    seen: Counter[str] = Counter()

    @given(value=json_values | corpus_shaped, suffix=st.sampled_from([".json", ".jsonl"]), lines=st.booleans())
    @GENERATED
    def check(value: Any, suffix: str, lines: bool) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"input{suffix}"
            path.write_bytes(_dump(value, lines))
            _both_hold(path, seen)

    check()
    assert seen["corpus loaded"] > 0 and seen["corpus rejected"] > 0, seen
    record("malformed_inputs", "generated json", inputs=seen["corpus loaded"] + seen["corpus rejected"])


def test_generated_records_with_plausible_fields() -> None:
    """Records that look almost right (known field names, wrong types, gaps) are the likely mistakes."""
    seen: Counter[str] = Counter()

    @given(
        records=st.lists(
            st.dictionaries(st.sampled_from(FIELD_NAMES), _text | st.integers(0, 5) | st.none(), min_size=1, max_size=5)
            # and question records with both required fields, so the "loaded" branch runs too
            | st.fixed_dictionaries(
                {"question": _text, "answer": _text | st.lists(_text, max_size=3)},
                optional={"id": _text | st.integers(0, 5), "answer_aliases": st.lists(_text, max_size=2)},
            ),
            min_size=1,
            max_size=6,
        ),
        suffix=st.sampled_from([".json", ".jsonl"]),
    )
    @GENERATED
    def check(records: list[dict[str, Any]], suffix: str) -> None:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / f"input{suffix}"
            path.write_bytes(_dump(records, suffix == ".jsonl"))
            _both_hold(path, seen)

    check()
    assert seen["corpus loaded"] > 0 and seen["corpus rejected"] > 0, seen
    assert seen["questions loaded"] > 0 and seen["questions rejected"] > 0, seen
    record("malformed_inputs", "generated records", inputs=seen["corpus loaded"] + seen["corpus rejected"])


def test_generated_bad_corpora_through_arag_index() -> None:
    tried: list[str] = []

    @given(
        data=st.binary(min_size=1, max_size=400) | json_values.map(lambda v: _dump(v, False)),
        suffix=st.sampled_from(SUFFIXES),
    )
    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    def check(data: bytes, suffix: str) -> None:
        with tempfile.TemporaryDirectory() as d:
            corpus = Path(d) / f"corpus{suffix}"
            corpus.write_bytes(data)
            try:
                load_corpus(corpus)
            except CorpusError:
                pass
            else:
                assume(False)  # a loadable corpus would start a real build: only failures are tried here
            out = Path(d) / "index"
            code, stdout, stderr = run_cli(["index", str(corpus), "--out", str(out), "--quiet"])
            assert code == 2 and stdout == ""
            lines = stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("arag: error: ")
            check_one_line(lines[0], corpus)
            assert not out.exists()
        tried.append(suffix)

    check()
    assert len(set(tried)) > 1, tried  # the CLI saw bad corpora under more than one file suffix
    record("malformed_inputs", "generated cli", inputs=len(tried))
