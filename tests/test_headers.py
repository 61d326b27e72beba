"""Contextual chunk headers as ARAGOG writes them (issue 14 item 4): document title and section
heading, bounded in length, embedded with each sentence and used by BM25, never shown in snippets."""

from __future__ import annotations

from pathlib import Path

import pytest

from arag_graph.core.documents import HEADER_MAX_CHARS, Chunk, SourceDocument
from arag_graph.core.errors import AragError
from arag_graph.index.build import build_index
from arag_graph.index.corpus import load_corpus
from arag_graph.index.load import load_index
from arag_graph.index.text import sentence_headers, sentence_inputs
from arag_graph.retrievers.passages import bm25_search
from arag_graph.tools.toolkit import keyword_search
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import WordHashEmbeddings

GUIDE = """# Lighthouse keeping

Keepers lived on the rock for months.

## Lamps

The lamp burned paraffin. It was trimmed every night.

## Fog signals

A horn sounded every thirty seconds.
"""


def md_corpus(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "guide.md").write_text(GUIDE, encoding="utf-8")
    (root / "plain.txt").write_text("## Not a heading in a text file.\nThe rest of it.", encoding="utf-8")
    return root


def embedded(chunks: list[Chunk], limit: int = HEADER_MAX_CHARS) -> dict[str, str]:
    documents, texts = sentence_inputs(chunks, True, header_max_chars=limit)
    return dict(zip(documents, texts, strict=True))


def test_markdown_sentences_get_title_and_section_headers(tmp_path: Path) -> None:
    from arag_graph.core.chunking import chunk_documents

    chunks = chunk_documents(load_corpus(md_corpus(tmp_path)))
    texts = embedded(chunks)
    assert texts["Keepers lived on the rock for months."] == "Lighthouse keeping: Keepers lived on the rock for months."
    assert texts["The lamp burned paraffin."] == "Lighthouse keeping > Lamps: The lamp burned paraffin."
    assert texts["It was trimmed every night."] == "Lighthouse keeping > Lamps: It was trimmed every night."
    assert texts["A horn sounded every thirty seconds."] == (
        "Lighthouse keeping > Fog signals: A horn sounded every thirty seconds."
    )
    # A .txt file has no sections, whatever its lines look like.
    assert all(" > " not in t for d, t in texts.items() if "rest of it" in d or "Not a heading" in d)


def test_a_section_carries_over_into_the_next_chunk_of_the_same_document() -> None:
    first = Chunk("a.md#0", "## Climate\nIt rains a lot.", "Wales", None, "a.md#1", ((11, 26),))
    second = Chunk("a.md#1", "Summers are mild.", "Wales", "a.md#0", "b.md", ((0, 17),))
    other = Chunk("b.md", "Nothing here.", "Other", "a.md#1", None, ((0, 13),))  # prev_id crosses documents
    assert list(sentence_headers([first, second, other])) == [["Wales > Climate"], ["Wales > Climate"], ["Other"]]


def test_headers_are_bounded_and_cut_at_a_word() -> None:
    chunk = Chunk("x.md", "Text here.", "A very long document title " * 10, None, None, ((0, 10),))
    (header,) = next(sentence_headers([chunk], limit=40))
    assert len(header) <= 40 and header == "A very long document title A very long"
    assert embedded([chunk], limit=0) == {"Text here.": "Text here."}  # 0: no headers at all


def test_the_header_limit_is_recorded_and_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = [SourceDocument("The lamp burned paraffin.", id="a.md", title="Lamps")]
    index = build_index(docs, tmp_path / "i", embeddings=WordHashEmbeddings(), contextual_headers=True, progress=False)
    assert index.manifest.header_max_chars == HEADER_MAX_CHARS
    with pytest.raises(AragError, match=r"^header length -1: give 0 to 1000 characters"):
        build_index(docs, tmp_path / "j", embeddings=WordHashEmbeddings(), header_max_chars=-1, progress=False)
    code, out, err = run_cli(
        ["index", str(md_corpus(tmp_path)), "--out", str(tmp_path / "k"), "--header-max-chars", "5000"], capsys
    )
    assert "header length" in assert_one_error_line(code, out, err) and code == 2


def test_aragog_style_headers_are_written_as_the_paper_writes_them(tmp_path: Path) -> None:
    """Issue 35, defect 11: ARAGOG's CCH is ``[Document: T, Section: S]`` on each chunk, not ``T > S`` on
    each sentence; ``header_style="aragog"`` writes that (the section where the chunk starts)."""
    from arag_graph.core.chunking import chunk_documents

    chunks = chunk_documents(load_corpus(md_corpus(tmp_path)))
    documents, texts = sentence_inputs(chunks, "aragog")
    by_sentence = dict(zip(documents, texts, strict=True))
    assert by_sentence["Keepers lived on the rock for months."] == (
        "[Document: Lighthouse keeping] Keepers lived on the rock for months."
    )
    # One header per chunk: the guide is one chunk, so its later sections do not change the header.
    assert by_sentence["The lamp burned paraffin."] == "[Document: Lighthouse keeping] The lamp burned paraffin."
    assert all(t.startswith("[Document: ") for t in texts)
    assert dict(zip(*sentence_inputs(chunks, True), strict=True))["The lamp burned paraffin."] == (
        "Lighthouse keeping > Lamps: The lamp burned paraffin."
    )
    (header,) = set(next(sentence_headers([chunks[0]], limit=12, style="aragog")))
    assert header == "[Document: Lighthouse]"  # the title cut at a word, within the bound

    index = build_index(
        [SourceDocument("It was built of granite. Its light is white.", id="t", title="Skerryvore")],
        tmp_path / "i",
        embeddings=WordHashEmbeddings(),
        contextual_headers=True,
        header_style="aragog",
    )
    assert (index.manifest.header_style, index.manifest.embedded_headers) == ("aragog", "aragog")
    with pytest.raises(AragError, match="unknown header style"):
        build_index([SourceDocument("x.", id="x")], tmp_path / "j", embeddings=WordHashEmbeddings(), header_style="x")


def test_snippets_never_show_headers_and_bm25_matches_titles(tmp_path: Path) -> None:
    docs = [
        SourceDocument("It was built of granite in 1850. Its light is white.", id="tower.md", title="Skerryvore"),
        SourceDocument("A granite quarry was opened nearby.", id="quarry.md", title="Quarry"),
        SourceDocument("Boats carried the stone.", id="boats.md", title="Boats"),
        SourceDocument("The keepers were relieved monthly.", id="keepers.md", title="Keepers"),
    ]
    headed = build_index(docs, tmp_path / "h", embeddings=WordHashEmbeddings(), contextual_headers=True)
    plain = build_index(docs, tmp_path / "p", embeddings=WordHashEmbeddings(), contextual_headers=False)
    for index in (headed, plain):
        hit = index.semantic_search("Skerryvore granite", 1)[0]
        assert all("Skerryvore" not in s for s in hit.snippets)
    # The title is only in the header: BM25 finds the tower by it with headers, not without.
    assert [h.chunk_id for h in bm25_search(headed, "Skerryvore", 2)] == ["tower.md"]
    assert bm25_search(plain, "Skerryvore", 2) == []


def test_keyword_search_matches_titles_on_headed_indexes_without_showing_them(tmp_path: Path) -> None:
    docs = [
        SourceDocument("It was built of granite in 1850. Its light is white.", id="tower.md", title="Skerryvore"),
        SourceDocument("Skerryvore is a reef. Boats avoid it.", id="reef.md", title="Reef"),
        SourceDocument("The keepers were relieved monthly.", id="keepers.md", title="Keepers"),
    ]
    headed = build_index(docs, tmp_path / "h", embeddings=WordHashEmbeddings(), progress=False)
    plain = build_index(docs, tmp_path / "p", embeddings=WordHashEmbeddings(), contextual_headers=False)
    assert headed.manifest.contextual_headers is True  # the default (bench/results/quality.md)
    hits = {h.chunk_id: h for h in headed.keyword_search(["Skerryvore"], 5)}
    assert set(hits) == {"tower.md", "reef.md"}
    # Matched by its title only: no sentence shows the header, so its first sentence stands in, and
    # the model sees a snippet line under the chunk, not an ID with nothing to judge it by.
    assert hits["tower.md"].snippets == ("It was built of granite in 1850.",)
    lines = keyword_search(headed, ["Skerryvore"], 5).content.splitlines()
    at = next(i for i, line in enumerate(lines) if 'chunk tower.md title="Skerryvore"' in line)
    assert lines[at + 1] == "    - It was built of granite in 1850."
    assert hits["reef.md"].snippets == ("Skerryvore is a reef.",)
    assert [h.chunk_id for h in plain.keyword_search(["Skerryvore"], 5)] == ["reef.md"]
    reloaded = load_index(tmp_path / "h", embeddings=WordHashEmbeddings())
    assert {h.chunk_id for h in reloaded.keyword_search(["Skerryvore"], 5)} == set(hits)


def test_the_cli_builds_with_headers_unless_told_not_to(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    corpus = md_corpus(tmp_path)
    code, out, _ = run_cli(["index", str(corpus), "--out", str(tmp_path / "a"), "--json"], capsys)
    assert code == 0 and json.loads(out)["contextual_headers"] is True
    code, out, _ = run_cli(
        ["index", str(corpus), "--out", str(tmp_path / "b"), "--no-contextual-headers", "--json"], capsys
    )
    assert code == 0 and json.loads(out)["contextual_headers"] is False
