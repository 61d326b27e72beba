"""Chunking: sentence-boundary packing, the token limit, ids, neighbours, and no text lost."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arag_graph.core.chunking import MIN_CHUNK_SIZE, chunk_documents
from arag_graph.core.documents import Chunk, SourceDocument
from arag_graph.core.errors import CorpusError
from arag_graph.core.sentences import sentence_spans
from arag_graph.core.tokens import count_tokens
from arag_graph.index.corpus import load_corpus
from tests.conftest import data_file

SENTENCES = [f"Sentence number {n} talks about the history of town {n} in some detail." for n in range(60)]
LONG_TEXT = " ".join(SENTENCES)


def assert_chunk_invariants(chunks: list[Chunk], docs: list[SourceDocument], chunk_size: int) -> None:
    """Every chunk is a substring of its document, within the limit, with exact sentence spans."""
    for chunk in chunks:
        assert chunk.text and chunk.text == chunk.text.strip()
        assert count_tokens(chunk.text) <= chunk_size
        assert chunk.sentences, "every chunk has at least one sentence"
        previous_end = 0
        for start, end in chunk.sentences:
            assert previous_end <= start < end <= len(chunk.text)
            assert not chunk.text[previous_end:start].strip(), "chunk text outside any sentence"
            previous_end = end
        assert chunk.sentences[0][0] == 0 and chunk.sentences[-1][1] == len(chunk.text)
    # Chunks of one document, in order, are disjoint substrings that together keep all its text.
    by_doc: dict[int, list[Chunk]] = {}
    doc_of = _doc_index(chunks, docs)
    for chunk in chunks:
        by_doc.setdefault(doc_of[chunk.id], []).append(chunk)
    for index, doc_chunks in by_doc.items():
        text, cursor = docs[index].text, 0
        for chunk in doc_chunks:
            found = text.find(chunk.text, cursor)
            assert found >= 0, "chunk is not a substring of its document"
            assert not text[cursor:found].strip(), "document text lost between chunks"
            cursor = found + len(chunk.text)
        assert not text[cursor:].strip()


def _doc_index(chunks: list[Chunk], docs: list[SourceDocument]) -> dict[str, int]:
    index: dict[str, int] = {}
    for chunk in chunks:
        base = re.sub(r"#\d+$", "", chunk.id)
        matches = [n for n, d in enumerate(docs) if (d.id if d.id is not None else str(n)) in (chunk.id, base)]
        index[chunk.id] = matches[0]
    return index


def test_short_document_is_one_chunk_with_stripped_text() -> None:
    doc = SourceDocument("  \n Ed Wood is a film. It stars Depp.\n\n", id="ed", title="Ed Wood")
    (chunk,) = chunk_documents([doc])
    assert chunk == Chunk(
        id="ed",
        text="Ed Wood is a film. It stars Depp.",
        title="Ed Wood",
        sentences=((0, 18), (19, 33)),
    )
    assert chunk.sentence_texts() == ["Ed Wood is a film.", "It stars Depp."]


def test_long_document_is_split_on_sentence_boundaries() -> None:
    doc = SourceDocument(LONG_TEXT, id="town", title="Towns")
    chunks = chunk_documents([doc], chunk_size=100)
    assert len(chunks) > 5
    assert [c.id for c in chunks] == [f"town#{n}" for n in range(len(chunks))]
    assert all(c.title == "Towns" for c in chunks)
    sentences = [s for c in chunks for s in c.sentence_texts()]
    assert sentences == SENTENCES  # no sentence cut, none lost, none repeated
    assert_chunk_invariants(chunks, [doc], 100)
    # Greedy packing: a chunk could not have taken the next sentence too.
    for chunk, following in itertools.pairwise(chunks):
        first_of_next = following.sentence_texts()[0]
        assert count_tokens(chunk.text + " " + first_of_next) > 100


def test_chunk_text_keeps_inner_whitespace() -> None:
    text = "\n\n".join(SENTENCES[:20])
    (doc,) = [SourceDocument(text)]
    chunks = chunk_documents([doc], chunk_size=60)
    assert len(chunks) > 1
    assert all("\n\n" in c.text for c in chunks if len(c.sentences) > 1)
    assert_chunk_invariants(chunks, [doc], 60)


def test_chunk_size_is_never_exceeded_at_joins() -> None:
    # Sentence counts do not add up exactly when whitespace between them is tokenised; the packer
    # must recount and give back sentences.
    text = "\n\n\n\n".join(["Ok."] * 200) + "\n" + "\t \n".join(["Fine!"] * 200)
    doc = SourceDocument(text, id="d")
    for size in (MIN_CHUNK_SIZE, 17, 23, 50):
        assert_chunk_invariants(chunk_documents([doc], chunk_size=size), [doc], size)


def test_over_long_sentence_is_cut_at_whitespace() -> None:
    sentence = " ".join(f"word{n}" for n in range(3000))  # no terminal punctuation at all
    doc = SourceDocument(f"Short start. {sentence}. Short end.")
    chunks = chunk_documents([doc], chunk_size=200)
    assert_chunk_invariants(chunks, [doc], 200)
    words = " ".join(c.text for c in chunks).split()
    assert words == doc.text.split()  # cuts fell between words
    assert all(count_tokens(c.text) > 150 for c in chunks[1:-2])  # pieces are reasonably full


def test_over_long_word_is_cut_inside() -> None:
    blob = "x7Q" * 5000
    doc = SourceDocument(f"Before. {blob} After.")
    chunks = chunk_documents([doc], chunk_size=64)
    assert_chunk_invariants(chunks, [doc], 64)
    pieces = [c.text for c in chunks if set(c.text) <= set("x7Q")]
    assert len(pieces) > 10 and "".join(pieces) in blob
    assert "".join(c.text for c in chunks).replace(" ", "") == doc.text.replace(" ", "")


def test_huge_single_line_document_chunks_quickly() -> None:
    # 2 MB on one line, without sentence ends: must be linear (a quadratic cut takes minutes).
    doc = SourceDocument(" ".join(["lorem ipsum dolor sit amet"] * 80_000), id="big")
    chunks = chunk_documents([doc], chunk_size=1000)
    assert len(chunks) > 300
    assert chunks[0].id == "big#0" and chunks[-1].id == f"big#{len(chunks) - 1}"
    assert all(count_tokens(c.text) <= 1000 for c in chunks[:20])
    assert " ".join(c.text for c in chunks) == doc.text


def test_ids_for_documents_without_ids_are_positions() -> None:
    docs = [
        SourceDocument("Zero."),
        SourceDocument("   "),  # skipped, but uses up position 1
        SourceDocument(LONG_TEXT),
        SourceDocument("Three.", id="three"),
    ]
    chunks = chunk_documents(docs, chunk_size=200)
    ids = [c.id for c in chunks]
    assert ids[0] == "0" and ids[-1] == "three"
    assert ids[1:-1] == [f"2#{n}" for n in range(len(ids) - 2)]


def test_neighbours_link_across_documents() -> None:
    docs = [SourceDocument("One.", id="a"), SourceDocument(LONG_TEXT, id="b"), SourceDocument("Three.", id="c")]
    chunks = chunk_documents(docs, chunk_size=200)
    assert chunks[0].prev_id is None and chunks[-1].next_id is None
    for before, after in itertools.pairwise(chunks):
        assert before.next_id == after.id and after.prev_id == before.id
    assert chunks[0].next_id == "b#0" and chunks[-1].prev_id == chunks[-2].id


@pytest.mark.parametrize(
    ("docs", "duplicate"),
    [
        ([SourceDocument("A.", id="3"), SourceDocument("B."), SourceDocument("C."), SourceDocument("D.")], "3"),
        ([SourceDocument("A.", id="x"), SourceDocument("B.", id="x")], "x"),
        ([SourceDocument("A.", id="d#1"), SourceDocument(LONG_TEXT, id="d")], "d#1"),
    ],
)
def test_colliding_ids_are_an_error(docs: list[SourceDocument], duplicate: str) -> None:
    with pytest.raises(CorpusError, match=f"chunk id '{re.escape(duplicate)}'") as caught:
        chunk_documents(docs, chunk_size=200)
    assert "unique id" in str(caught.value) and "\n" not in str(caught.value)


def test_no_documents_give_no_chunks() -> None:
    assert chunk_documents([]) == []
    assert chunk_documents([SourceDocument(" \n ")]) == []


def test_documents_may_be_any_iterable() -> None:
    chunks = chunk_documents(SourceDocument(t) for t in ["A.", "B."])
    assert [c.id for c in chunks] == ["0", "1"]


@pytest.mark.parametrize("size", [0, -5, MIN_CHUNK_SIZE - 1])
def test_too_small_chunk_size(size: int) -> None:
    with pytest.raises(CorpusError, match=f"chunk size {size} is too small; use at least {MIN_CHUNK_SIZE}"):
        chunk_documents([SourceDocument("A.")], chunk_size=size)


@pytest.mark.parametrize("size", [12.5, "1000", True])
def test_chunk_size_must_be_an_integer(size: object) -> None:
    with pytest.raises(TypeError, match="chunk_size must be an integer"):
        chunk_documents([SourceDocument("A.")], chunk_size=size)  # type: ignore[arg-type]


def test_single_chunk_sentences_match_the_splitter() -> None:
    text = "Dr. Who arrived. He left!\n\n- a list item\n- another"
    (chunk,) = chunk_documents([SourceDocument(text)])
    assert list(chunk.sentences) == sentence_spans(text)


_TEXT = st.one_of(
    st.text(max_size=300),
    st.lists(
        st.sampled_from(["Dr.", "Word", "end.", "?", "\n", "\n\n", " ", "  ", "x" * 40, "中文。"]),
        max_size=120,
    ).map("".join),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_TEXT, max_size=4), st.integers(MIN_CHUNK_SIZE, 40))
def test_any_documents_chunk_within_limit_without_loss(texts: list[str], size: int) -> None:
    docs = [SourceDocument(text) for text in texts]
    chunks = chunk_documents(docs, chunk_size=size)
    assert_chunk_invariants(chunks, docs, size)
    assert "".join("".join(c.text.split()) for c in chunks) == "".join("".join(t.split()) for t in texts)


# --- the public corpora in data/ --------------------------------------------------------------------------


def test_hotpotqa_corpus_chunks_one_per_passage() -> None:
    docs = load_corpus(data_file("hotpotqa-100/corpus.json"))
    chunks = chunk_documents(docs)
    assert len(chunks) == 994
    assert [c.id for c in chunks] == [str(n) for n in range(994)]
    assert [c.title for c in chunks] == [d.title for d in docs]
    for chunk, doc in zip(chunks, docs, strict=True):
        assert chunk.text == doc.text.strip()
        assert list(chunk.sentences) == sentence_spans(chunk.text)


@pytest.mark.parametrize("chunk_size", [1000, 64])
def test_2wiki_corpus_sentences_are_substrings_of_chunks(chunk_size: int) -> None:
    docs = load_corpus(data_file("2wiki-corpus/corpus.json"))
    chunks = chunk_documents(docs, chunk_size=chunk_size)
    assert len(chunks) >= len(docs) == 6119
    # Walk the chunks in order against their documents: each chunk's text is the next stretch of
    # its document, and its sentences are exact, stripped substrings of it.
    doc_index, cursor = 0, 0
    for chunk in chunks:
        base = chunk.id.split("#")[0]
        if int(base) != doc_index:
            assert not docs[doc_index].text[cursor:].strip()
            doc_index, cursor = int(base), 0
        text = docs[doc_index].text
        found = text.find(chunk.text, cursor)
        assert found >= 0 and not text[cursor:found].strip()
        cursor = found + len(chunk.text)
        assert chunk.title == docs[doc_index].title
        for start, end in chunk.sentences:
            sentence = chunk.text[start:end]
            assert sentence and sentence == sentence.strip()
        if chunk_size == 64:
            assert count_tokens(chunk.text) <= 64
