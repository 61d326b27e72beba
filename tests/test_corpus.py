"""Corpus loading: every format, format detection, and a readable one-line error for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError, CorpusError
from arag_graph.index.corpus import CORPUS_FORMATS, detect_format, load_corpus
from tests.conftest import data_file


def write(path: Path, content: str | bytes | Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")
    return path


def load_error(path: Path, format: str | None = None) -> str:
    """The message of the CorpusError that loading ``path`` raises, checked to be one useful line."""
    with pytest.raises(CorpusError) as caught:
        load_corpus(path, format)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert str(path) in message, message
    assert ";" in message, f"no fix suggested: {message}"
    return message


# --- formats -------------------------------------------------------------------------------------


def test_chunks_strings_split_at_the_first_colon(tmp_path: Path) -> None:
    path = write(tmp_path / "chunks.json", ["0:Paris is the capital: of France.", " b :Rome.", "c:"])
    docs = load_corpus(path)
    assert docs == [SourceDocument("Paris is the capital: of France.", id="0"), SourceDocument("Rome.", id="b")]
    assert detect_format(path) == "chunks"


def test_chunks_objects_keep_ids_and_titles(tmp_path: Path) -> None:
    path = write(
        tmp_path / "chunks.json",
        [{"id": 7, "text": "Seven.", "title": "T"}, {"id": "x", "text": "Ex."}],
    )
    assert load_corpus(path) == [SourceDocument("Seven.", id="7", title="T"), SourceDocument("Ex.", id="x")]


def test_hipporag_object_joins_sentences(tmp_path: Path) -> None:
    path = write(tmp_path / "corpus.json", {"Ed Wood": ["Ed Wood is a film.", " It stars Depp."], "Empty": []})
    assert load_corpus(path) == [SourceDocument("Ed Wood is a film. It stars Depp.", title="Ed Wood")]
    assert detect_format(path) == "hipporag"


def test_hipporag_list_with_optional_ids_and_musique_text(tmp_path: Path) -> None:
    path = write(
        tmp_path / "corpus.json",
        [
            {"title": "A", "text": "Alpha."},
            {"title": "B", "paragraph_text": "Beta.", "idx": 3},
            {"title": "C", "text": "Gamma.", "_id": "c1"},
        ],
    )
    assert load_corpus(path) == [
        SourceDocument("Alpha.", title="A"),
        SourceDocument("Beta.", id="3", title="B"),
        SourceDocument("Gamma.", id="c1", title="C"),
    ]
    assert detect_format(path) == "hipporag"


def test_jsonl_with_text_aliases(tmp_path: Path) -> None:
    lines = [
        {"id": "a", "title": "A", "text": "Alpha."},
        {"contents": "Beta."},
        {"_id": "c", "passage": "Gamma \u2028 line."},
    ]
    path = write(tmp_path / "c.jsonl", "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n\n")
    assert load_corpus(path) == [
        SourceDocument("Alpha.", id="a", title="A"),
        SourceDocument("Beta."),
        SourceDocument("Gamma \u2028 line.", id="c"),
    ]
    assert detect_format(path) == "jsonl"


def test_jsonl_saved_as_json_is_detected(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", '{"text": "One."}\n{"text": "Two."}\n')
    assert detect_format(path) == "jsonl"
    assert [d.text for d in load_corpus(path)] == ["One.", "Two."]


def test_directory_of_text_files(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    write(root / "b.txt", "Bee text.")
    write(root / "a" / "z.md", "\n# The Zed Note #\n\nZed text.")
    write(root / "a" / "y.md", "No heading here.\n# Later heading")
    write(root / "empty.txt", "")
    write(root / "image.png", b"\x89PNG\x00\x00")
    write(root / ".hidden.txt", "secret")
    write(root / ".git" / "HEAD.txt", "ref")
    docs = load_corpus(root)
    assert [(d.id, d.title) for d in docs] == [("a/y.md", "y"), ("a/z.md", "The Zed Note"), ("b.txt", "b")]
    assert docs[1].text == "\n# The Zed Note #\n\nZed text."
    assert detect_format(root) == "dir"
    assert load_corpus(root, "dir") == docs


def test_single_text_file_is_one_document(tmp_path: Path) -> None:
    path = write(tmp_path / "book.md", "# Title\n\nBody.")
    assert load_corpus(path) == [SourceDocument("# Title\n\nBody.", id="book.md", title="Title")]
    assert detect_format(path) == "text"


def test_big_single_line_text_is_one_document(tmp_path: Path) -> None:
    text = "word " * 2_000_000  # 10 MB, one line
    path = write(tmp_path / "big.txt", text)
    (doc,) = load_corpus(path)
    assert len(doc.text) == len(text)
    path = write(tmp_path / "big.jsonl", json.dumps({"id": "big", "text": text}))
    assert len(load_corpus(path)[0].text) == len(text)


def test_explicit_format_overrides_detection(tmp_path: Path) -> None:
    path = write(tmp_path / "corpus.data", [{"id": "1", "title": "T", "text": "One."}])
    assert load_corpus(path, "hipporag") == [SourceDocument("One.", id="1", title="T")]
    assert load_corpus(path, "chunks") == [SourceDocument("One.", id="1", title="T")]
    assert load_corpus(path) == [SourceDocument("One.", id="1", title="T")]  # content sniffed
    assert load_corpus(path, "auto") == load_corpus(path)
    assert load_corpus(path, " HippoRAG ") == load_corpus(path, "hipporag")


def test_utf8_bom_and_utf16_are_read(tmp_path: Path) -> None:
    content = json.dumps([{"title": "É", "text": "Café."}], ensure_ascii=False)
    assert load_corpus(write(tmp_path / "bom.json", b"\xef\xbb\xbf" + content.encode()))[0].text == "Café."
    assert load_corpus(write(tmp_path / "u16.json", content.encode("utf-16")))[0].title == "É"


def test_all_empty_jsonl_counts_lines(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "c.jsonl", '{"text": ""}\n{"text": "  "}\n'))
    assert "none of its 2 lines has any text" in message


def test_empty_documents_are_skipped(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", [{"title": "A", "text": "  \n"}, {"title": "B", "text": "Bee."}])
    assert load_corpus(path) == [SourceDocument("Bee.", title="B")]


def test_formats_constant() -> None:
    assert set(CORPUS_FORMATS) == {"chunks", "hipporag", "jsonl", "dir", "text"}


# --- bad input -----------------------------------------------------------------------------------


def test_missing_path(tmp_path: Path) -> None:
    assert "no such file" in load_error(tmp_path / "nope.json")


def test_empty_file(tmp_path: Path) -> None:
    assert "empty" in load_error(write(tmp_path / "c.json", ""))
    assert "empty" in load_error(write(tmp_path / "d.jsonl", "\n  \n"))


def test_binary_file(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "c.json", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe"))
    assert "binary" in message and "PNG" not in message


def test_invalid_utf8(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "c.json", b'[{"text": "caf\xe9"}]'))
    assert "UTF-8" in message and "offset 14" in message and "\\x" not in message


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "corpus.json", '[\n  {"text": "a"}\n  {"text": "b"}\n]'))
    assert "not valid JSON (line 3, column 3: Expecting ',' delimiter)" in message


def test_deeply_nested_json(tmp_path: Path) -> None:
    assert "nested too deeply" in load_error(write(tmp_path / "c.json", "[" * 100_000 + "]" * 100_000))


def test_invalid_jsonl_line(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "c.jsonl", '{"text": "a"}\n{"text": b}\n'))
    assert "line 2 is not valid JSON" in message
    assert "line 2 is a list" in load_error(write(tmp_path / "d.jsonl", '{"text": "a"}\n[1]\n'))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (42, "is a number, not a list or object"),
        ('"just a string"', "is a string, not a list or object"),
        ([], "the JSON list is empty"),
        ([1, 2], "item 0 of the JSON list is a number"),
        ({"A": 3}, "'A' holds a number, not a list of sentences"),
        ({"A": ["ok", 5]}, "sentence 1 of 'A' is a number"),
        (["0:a", 5], "item 1 is a number"),
        (["0:a", "no colon"], "item 1 ('no colon') does not start with \"id:\""),
        ([{"id": "a", "text": "x"}, {"text": "y"}], "item 1 has no id"),
        (
            [{"title": "T", "body_text": "x"}],
            "item 0 has no text field (found: 'title', 'body_text'); name the text field one of: text,",
        ),
        ([{"title": "T", "text": ["a", "b"]}], "item 0 has a list as 'text'; the text must be a string"),
        ([{"title": 5, "text": "a"}], "a title must be a string"),
        ([{"id": 1.5, "title": "T", "text": "a"}], "an id must be a string or an integer"),
        ([{"title": "T", "_id": " ", "text": "a"}], "empty '_id'"),
        ([{"id": "q1", "question": "Who?", "paragraphs": []}], "looks like a question file"),
        ([{"title": "A", "text": ""}, {"title": "B", "text": " "}], "none of its 2 items has any text"),
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], "the id 'a' is used twice"),
        (
            [{"title": "T", "_id": 1, "text": "x"}, {"title": "U", "_id": "1", "text": "y"}],
            "'1' is used twice",
        ),
    ],
)
def test_bad_json_corpora(tmp_path: Path, content: Any, expected: str) -> None:
    assert expected in load_error(write(tmp_path / "corpus.json", content))


def test_jsonl_wrong_fields_name_line_and_fields(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "c.jsonl", '{"text": "a"}\n\n{"title": "T", "abstract": "b"}\n'))
    assert (
        "line 3 has no text field (found: 'title', 'abstract'); name the text field one of: text, contents" in message
    )


def test_repeated_title_in_hipporag_object(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "c.json", '{"A": ["one."], "A": ["two."]}'))
    assert "the title 'A' appears twice" in message


def test_long_values_are_shortened_in_messages(tmp_path: Path) -> None:
    message = load_error(write(tmp_path / "c.json", ["0:a", "x" * 10_000]))
    assert len(message) < 400


def test_directory_without_text_files(tmp_path: Path) -> None:
    write(tmp_path / "d" / "data.csv", "a,b")
    assert "no .txt, .md, .html or .pdf files" in load_error(tmp_path / "d")


def test_directory_with_only_empty_files(tmp_path: Path) -> None:
    write(tmp_path / "d" / "a.txt", " \n")
    assert "none of its 1 file has any text" in load_error(tmp_path / "d")


def test_directory_file_with_invalid_utf8_is_named(tmp_path: Path) -> None:
    write(tmp_path / "d" / "good.txt", "Good.")
    bad = write(tmp_path / "d" / "sub" / "bad.txt", b"caf\xe9")
    with pytest.raises(CorpusError, match=r"bad\.txt: is not UTF-8"):
        load_corpus(tmp_path / "d")
    assert load_error(bad)  # the message names the file itself


def test_format_and_path_kind_must_agree(tmp_path: Path) -> None:
    write(tmp_path / "d" / "a.txt", "A.")
    assert "is a directory" in load_error(tmp_path / "d", "jsonl")
    assert "--format dir reads a directory" in load_error(write(tmp_path / "c.json", ["0:a"]), "dir")


def test_unknown_format_lists_the_valid_ones(tmp_path: Path) -> None:
    path = write(tmp_path / "c.json", ["0:a"])
    with pytest.raises(CorpusError, match="unknown corpus format 'csv'; use one of: chunks, hipporag, jsonl, dir"):
        load_corpus(path, "csv")


def test_unrecognised_file_asks_for_format(tmp_path: Path) -> None:
    assert "give --format" in load_error(write(tmp_path / "notes.csv", "a,b\n1,2\n"))


def test_corpus_error_is_an_arag_error() -> None:
    assert issubclass(CorpusError, AragError)


# --- the public corpora in data/ --------------------------------------------------------------------------


def test_load_hotpotqa_corpus() -> None:
    path = data_file("hotpotqa-100/corpus.json")
    docs = load_corpus(path)
    assert detect_format(path) == "hipporag"
    assert len(docs) == 994
    assert all(d.id is None and d.title and d.text.strip() for d in docs)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert {d.title: d.text for d in docs} == {title: "".join(s) for title, s in raw.items()}


def test_load_2wiki_corpus() -> None:
    path = data_file("2wiki-corpus/corpus.json")
    docs = load_corpus(path)
    assert detect_format(path) == "hipporag"
    assert len(docs) == 6119
    assert docs[0].title == "Teutberga" and docs[0].text.startswith("Teutberga( died 11 November 875)")


# ---------------------------------------------------------------------------------------------
# HTML pages


def _tree_text(data: bytes) -> tuple[str | None, str]:
    """What the BeautifulSoup tree gave (the reader before issue 38): the rules the streaming reader keeps."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(data, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    for hidden in soup(["script", "style", "template", "noscript", "head"]):
        hidden.decompose()
    lines = (line.strip() for line in soup.get_text("\n").splitlines())
    return title or None, "\n".join(line for line in lines if line)


PAGES = [
    b"<html><head><title>Harbour  guide</title><script>var x = 1;</script><style>p {}</style></head>"
    b"<body><h1>Harbour</h1><p>The crane lifts <b>granite</b> &amp; slate.</p><!-- a comment -->"
    b"<template><p>unused</p></template><noscript>no script</noscript><p>Last<br/>line</p></body></html>",
    b"<p>No head, no title.<p>Two paragraphs left open",
    b"<html><head><title>Open head<meta charset='utf-8'><body><p>Body text</p>",
    "<html><body><p>Caf\u00e9 \u2014 na\u00efve &eacute;t&eacute;</p></body></html>".encode("utf-8"),
    b"<p>a</p><noscript>n<template>t</noscript><p>visible</p>",  # closing one closes those left open in it
    b"<p>a</p><noscript>n1<template>t</template>n2</noscript><p>d</p>",  # and only those
]


@pytest.mark.parametrize("page", PAGES)
def test_html_text_follows_the_rules_the_tree_gave(page: bytes) -> None:
    from arag_graph.index.corpus import _html_text

    assert _html_text(page) == _tree_text(page)


def test_an_html_head_left_open_ends_where_the_body_starts() -> None:
    """The tree nested such a body inside the head and dropped it with the head: the page gave no
    text at all. Here the head's text stays hidden and the body's is read."""
    from arag_graph.index.corpus import _html_text

    page = b"<html><head><style>s</style>head text<body><p>Body text</p></body></html>"
    assert _tree_text(page) == (None, "")
    assert _html_text(page) == (None, "Body text")


def test_deeply_nested_html_is_read_in_memory_that_follows_its_size() -> None:
    """A 2.2 MB page nested 200,000 levels deep took 76 s to index (issue 38): the tree built for it
    held some 54 bytes per byte of markup. The page is read as a stream instead: here 50,000 levels
    (550 KB) in at most a few times its size, whatever the depth. (Time: bench/bench_html_depth.py.)"""
    import tracemalloc

    from arag_graph.index.corpus import _html_text

    depth = 50_000
    page = b"<html><head><title>Deep</title></head><body>" + b"<div>" * depth + b"bottom text"
    page += b"</div>" * depth + b"</body></html>"
    _html_text(b"<p>warm</p>")  # imports and compiled patterns are not the page's
    tracemalloc.start()
    try:
        assert _html_text(page) == ("Deep", "bottom text")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5 * len(page), f"{peak:,} bytes at the peak for a page of {len(page):,}"
