"""Issue 25 items 1 and 2: any LangChain documents in, and indexes that change without a rebuild.

Documents from LangChain loaders are indexed with their metadata, which hits and the retriever
return and searches filter by; ``arag index`` reads .html and .pdf files through optional parsers.
An index changes by ``add_documents``, ``delete`` and ``arag index SOURCE --update``: the result is
the index a full build of the changed corpus gives (same chunks, same vectors, same answers),
written as a new complete build that a killed update never half-replaces.
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document

from arag_graph.core.errors import AragError, IndexDamagedError
from arag_graph.index import integrity as integrity_module
from arag_graph.index import write as write_module
from arag_graph.index.build import build_index
from arag_graph.index.chroma import SentenceStore
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.keywords import keyword_files
from arag_graph.index.layout import BUILDS, RECORD, read_current
from arag_graph.index.load import load_index, verify_index
from arag_graph.index.sync import sync_index
from arag_graph.index.update import update_index
from arag_graph.retrievers.langchain_retriever import make_retriever
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import WordHashEmbeddings

TOPICS = ["lighthouse", "harbour", "granite", "ferry", "glacier", "orchard"]


def page(n: int) -> Document:
    topic = TOPICS[n % len(TOPICS)]
    return Document(
        page_content=f"The {topic} of island {n} was built in {1800 + n}. Its keeper wrote about the {topic} daily.",
        id=f"doc{n}",
        metadata={"source": f"book{n % 3}.pdf", "page": n},
    )


class PagesLoader(BaseLoader):
    """A LangChain loader, as any application would write one: pages with a source and page number."""

    def __init__(self, count: int) -> None:
        self.count = count

    def lazy_load(self) -> Iterator[Document]:
        for n in range(self.count):
            yield page(n)


def build(docs: list[Document], root: Path) -> HierarchicalIndex:
    return build_index(docs, root, embeddings=WordHashEmbeddings(), progress=False)


def answers(index: HierarchicalIndex) -> list[object]:
    """What every search of the index answers, for comparing two indexes."""
    out: list[object] = []
    for query in ["lighthouse keeper", "granite island 1803", "ferry daily", "new tower reef"]:
        out.append([(h.chunk_id, round(h.score, 5), h.snippets, h.metadata) for h in index.semantic_search(query, 4)])
    for keywords in (["keeper"], ["island", "granite"], ["reef"]):
        out.append([(h.chunk_id, h.score, h.snippets) for h in index.keyword_search(keywords, 4)])
    return out


def same_index(updated: HierarchicalIndex, full: HierarchicalIndex) -> None:
    assert updated.store.chunks == full.store.chunks
    assert updated.manifest.corpus_hash == full.manifest.corpus_hash
    a, owners_a = updated.sentences.all_vectors()
    b, owners_b = full.sentences.all_vectors()
    assert owners_a == owners_b
    np.testing.assert_allclose(a, b, atol=1e-6)
    assert answers(updated) == answers(full)


# --- item 1: any documents in ------------------------------------------------------------------


def test_documents_from_a_langchain_loader_are_indexed_with_their_metadata(tmp_path: Path) -> None:
    index = build(PagesLoader(12).load(), tmp_path / "index")
    assert len(index) == 12
    hit = index.keyword_search(["island"], 1)[0]
    assert hit.metadata == {"source": "book0.pdf", "page": 0}
    assert hit.to_dict()["metadata"] == {"source": "book0.pdf", "page": 0}
    loaded = load_index(tmp_path / "index", embeddings=WordHashEmbeddings())
    assert loaded.get_chunk("doc4") is not None and loaded.get_chunk("doc4").metadata == {
        "source": "book1.pdf",
        "page": 4,
    }  # type: ignore[union-attr]
    (semantic,) = loaded.semantic_search("orchard island 5", 1)
    assert semantic.metadata is not None and semantic.metadata["page"] == semantic.metadata["page"]


def test_metadata_filters_keyword_and_semantic_search_and_the_retriever(tmp_path: Path) -> None:
    index = build(PagesLoader(12).load(), tmp_path / "index")
    only = {"source": "book1.pdf"}
    keyword = index.keyword_search(["keeper"], 3, metadata_filter=only)
    assert [h.chunk_id for h in keyword] == ["doc1", "doc4", "doc7"]
    semantic = index.semantic_search("lighthouse keeper", 10, metadata_filter=only)
    assert {h.chunk_id for h in semantic} == {"doc1", "doc4", "doc7", "doc10"}
    assert index.semantic_search("lighthouse", 3, metadata_filter={"source": ["book0.pdf", "book2.pdf"]})
    assert all(
        h.metadata and h.metadata["source"] != "book1.pdf"
        for h in index.semantic_search("x y", 12, metadata_filter={"source": ["book0.pdf", "book2.pdf"]})
    )
    for search_type in ("semantic", "keyword", "hybrid"):
        retriever = make_retriever(index, search_type, k=2, metadata_filter={"page": 9})
        (doc,) = retriever.invoke("the orchard keeper")
        assert doc.id == "doc9" and doc.metadata["source"] == "book0.pdf" and doc.metadata["page"] == 9
        assert doc.metadata["chunk_id"] == "doc9"
    # LangChain's vector-store spelling of the same filter.
    (doc,) = make_retriever(index, search_kwargs={"k": 2, "filter": {"page": 9}}).invoke("the orchard keeper")
    assert doc.id == "doc9"
    # Chroma's operators (tests/test_vectorstore.py has each); a malformed one is refused in one line.
    assert {h.chunk_id for h in index.semantic_search("x y", 12, metadata_filter={"page": {"$gt": 9}})} == {
        "doc10",
        "doc11",
    }
    with pytest.raises(AragError, match=r"\$gt compares numbers"):
        index.semantic_search("x", 2, metadata_filter={"page": {"$gt": "3"}})


def test_metadata_that_is_not_json_is_refused_in_one_line(tmp_path: Path) -> None:
    doc = Document(page_content="Some text.", id="a", metadata={"source": "a", "when": object()})
    with pytest.raises(AragError) as caught:
        build([doc], tmp_path / "index")
    assert "metadata 'when'" in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "index").exists()


def _pdf(path: Path, text: str, title: str) -> None:
    """A one-page PDF whose page draws ``text``, written with pypdf."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    pdf_page = writer.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    pdf_page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): writer._add_object(font)})}
    )
    content = DecodedStreamObject()
    content.set_data(f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode("latin-1"))
    pdf_page[NameObject("/Contents")] = writer._add_object(content)
    writer.add_metadata({"/Title": title})
    with path.open("wb") as fh:
        writer.write(fh)


def test_arag_index_reads_html_and_pdf_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from arag_graph.index.corpus import load_corpus

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "notes.txt").write_text("The ferry leaves at noon.", encoding="utf-8")
    (corpus / "page.html").write_text(
        "<html><head><title>Harbour guide</title><script>var hidden = 1;</script></head>"
        "<body><h1>Harbour</h1><p>The harbour crane lifts granite.</p></body></html>",
        encoding="utf-8",
    )
    _pdf(corpus / "report.pdf", "The glacier retreated in 1990.", "Glacier report")
    documents = {d.id: d for d in load_corpus(corpus)}
    assert documents["page.html"].title == "Harbour guide"
    assert "harbour crane lifts granite" in documents["page.html"].text and "hidden" not in documents["page.html"].text
    assert documents["report.pdf"].title == "Glacier report"
    assert "The glacier retreated in 1990." in documents["report.pdf"].text
    code, out, err = run_cli(["index", str(corpus), "--out", str(tmp_path / "index"), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["documents"] == 3


def test_a_missing_parser_names_its_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arag_graph.core.errors import CorpusError
    from arag_graph.index.corpus import load_corpus

    _pdf(tmp_path / "report.pdf", "Text.", "T")
    (tmp_path / "page.html").write_text("<p>Text.</p>", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "pypdf", None)
    monkeypatch.setitem(sys.modules, "bs4", None)
    with pytest.raises(CorpusError, match=r"pip install 'arag-graph\[pdf\]'") as caught:
        load_corpus(tmp_path / "report.pdf")
    assert "\n" not in str(caught.value)
    with pytest.raises(CorpusError, match=r"pip install 'arag-graph\[html\]'"):
        load_corpus(tmp_path)


# --- item 2: indexes that change without a rebuild -----------------------------------------------


def test_add_and_delete_give_the_index_a_full_rebuild_gives(tmp_path: Path) -> None:
    docs = PagesLoader(30).load()
    index = build(docs, tmp_path / "index")
    before = answers(index)
    changed = Document(
        page_content="A new tower was raised on the reef. Its lamp is red.", id="doc7", metadata={"source": "new.pdf"}
    )
    added = [
        Document(page_content="The reef tower keeper rows ashore weekly.", id="extra", metadata={"source": "new.pdf"})
    ]
    updated = index.add_documents([changed, *added])
    updated = updated.delete(["doc3", "doc20"])
    assert answers(index) == before  # the loaded snapshot a reader holds is untouched
    corpus = [changed if d.id == "doc7" else d for d in docs if d.id not in ("doc3", "doc20")] + added
    full = build(corpus, tmp_path / "full")
    same_index(updated, full)
    reloaded = load_index(tmp_path / "index", embeddings=WordHashEmbeddings())
    same_index(reloaded, full)
    assert verify_index(reloaded)["checksums"]
    assert reloaded.document_ids() == [d.id for d in corpus]
    # The build record names only the build now in use; the replaced ones are gone.
    assert json.loads((tmp_path / "index" / RECORD).read_text())["builds"] == [read_current(tmp_path / "index")]
    assert [p.name for p in (tmp_path / "index" / BUILDS).iterdir()] == [read_current(tmp_path / "index")]


def test_an_update_encodes_only_new_text(tmp_path: Path) -> None:
    index = build(PagesLoader(20).load(), tmp_path / "index")
    new = Document(page_content="A brand new passage. It has two sentences.", id="n1")
    updated, report = update_index(index, upsert=[new, page(4)])
    assert (report.added, report.changed, report.unchanged) == (["n1"], [], 20)
    assert report.sentences_encoded == 2 and report.sentences_reused == 2 * 20
    same_again, nothing = update_index(updated, upsert=[new])
    assert not nothing and same_again is updated


def test_an_update_tokenizes_only_new_chunks_and_writes_the_keyword_files_a_rebuild_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arag_graph.index import keyword_scan as scan_module

    docs = PagesLoader(30).load()
    index = build(docs, tmp_path / "index")
    tokenized: list[int] = []
    real_words = scan_module._words

    def counting(code: np.ndarray) -> tuple[list[str], np.ndarray]:
        tokenized.append(int(np.count_nonzero(code == 0)))  # the texts of a batch each end in NUL
        return real_words(code)

    monkeypatch.setattr(scan_module, "_words", counting)
    changed = Document(page_content="A new tower was raised on the reef.", id="doc7", metadata={"source": "x"})
    added = Document(page_content="The reef tower keeper rows ashore weekly.", id="extra")
    updated, _ = update_index(index, upsert=[changed, added], delete=["doc3", "doc20"])
    assert sum(tokenized) == 2  # the changed and the added document's chunks, not all 29
    monkeypatch.undo()
    corpus = [changed if d.id == "doc7" else d for d in docs if d.id not in ("doc3", "doc20")] + [added]
    full = build(corpus, tmp_path / "full")
    assert updated.build_dir is not None and full.build_dir is not None
    for name in keyword_files():
        assert (updated.build_dir / name).read_bytes() == (full.build_dir / name).read_bytes(), name
    same_index(updated, full)


def test_deleting_an_unknown_id_is_one_line(tmp_path: Path) -> None:
    index = build(PagesLoader(3).load(), tmp_path / "index")
    with pytest.raises(AragError, match="no document 'doc9'") as caught:
        index.delete(["doc9"])
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("given", [None, 7, b"doc1"])
def test_delete_of_what_is_not_ids_is_one_line(given: object, tmp_path: Path) -> None:
    """``delete(None)`` raised Python's bare ``TypeError: 'NoneType' object is not iterable``."""
    index = build(PagesLoader(3).load(), tmp_path / "index")
    with pytest.raises(AragError) as caught:
        index.delete(given)  # type: ignore[arg-type]
    assert "delete() takes the ids of the documents to remove" in str(caught.value)
    assert "\n" not in str(caught.value)
    assert index.document_ids() == ["doc0", "doc1", "doc2"]


def test_one_id_or_one_document_given_alone_is_that_one(tmp_path: Path) -> None:
    """A string is one id, not its characters; a Document alone is one document, not its fields."""
    index = build(PagesLoader(3).load(), tmp_path / "index")
    deleted = index.delete("doc1")
    assert deleted.document_ids() == ["doc0", "doc2"]
    added = deleted.add_documents(Document(page_content="A lone page about lighthouses.", id="lone"))
    assert added.document_ids() == ["doc0", "doc2", "lone"]
    with pytest.raises(AragError, match="add_documents\\(\\) takes a list of documents"):
        added.add_documents(None)  # type: ignore[arg-type]


def test_an_update_of_a_stale_copy_is_refused(tmp_path: Path) -> None:
    index = build(PagesLoader(3).load(), tmp_path / "index")
    index.add_documents([Document(page_content="More text.", id="m")])
    with pytest.raises(AragError, match="changed since this copy was loaded"):
        index.add_documents([Document(page_content="Other text.", id="o")])


@pytest.mark.parametrize(
    ("backend", "fault"),
    [
        ("matrix", "keywords"),
        ("matrix", "switch"),
        ("chroma", "copy"),  # mid-copy of the previous store
        ("chroma", "delete"),  # the copy made, Chroma changing it
        ("chroma", "add"),  # old records deleted from the copy, new ones not yet added
        ("chroma", "switch"),
    ],
)
def test_a_killed_update_leaves_the_previous_index_answering(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str, fault: str
) -> None:
    root = tmp_path / "index"
    index = build_index(PagesLoader(10).load(), root, embeddings=WordHashEmbeddings(), backend=backend)
    build_before = read_current(root)
    before = answers(load_index(root, embeddings=WordHashEmbeddings()))

    seen: list[object] = []  # where the kill came: the step it interrupted was under way

    def killed(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # as a kill arrives: a BaseException, mid-update

    copy_file = integrity_module._copy_file
    delete_records = getattr(SentenceStore, "delete_records", None)

    def killed_mid_copy(*args: Path) -> None:
        if seen:  # one file of the store copied into the new build, the next one not
            raise KeyboardInterrupt
        if args[-1].is_relative_to(root / BUILDS):  # the update's copy, not a reader's private one
            seen.append(args[-1])
        copy_file(*args)  # type: ignore[arg-type]

    def deleting(store: SentenceStore, ids: list[int]) -> None:
        seen.append(len(ids))
        delete_records(store, ids)  # type: ignore[misc]

    def killed_at_switch(where: Path, build: str) -> None:
        seen.append(json.loads((where / BUILDS / build / "manifest.json").read_text())["chroma"])
        raise KeyboardInterrupt

    if fault == "keywords":
        monkeypatch.setattr(write_module.KeywordIndex, "save", killed)
        seen.append("keywords")
    elif fault == "copy":
        monkeypatch.setattr(integrity_module, "_copy_file", killed_mid_copy)
    elif fault == "delete":
        monkeypatch.setattr(SentenceStore, "delete_records", killed)
        seen.append("delete")
    elif fault == "add":
        monkeypatch.setattr(SentenceStore, "delete_records", deleting)
        monkeypatch.setattr(SentenceStore, "add_rows", killed)
    else:
        monkeypatch.setattr(write_module, "point_current", killed_at_switch)
    with pytest.raises(KeyboardInterrupt):
        index.add_documents(
            [
                Document(page_content="The reef tower keeper rows ashore.", id="new"),
                Document(page_content="Island 1 has no lighthouse now.", id="doc1"),  # 2 sentences replaced
            ]
        )
    monkeypatch.undo()
    assert read_current(root) == build_before
    reloaded = load_index(root, embeddings=WordHashEmbeddings())
    assert answers(reloaded) == before and verify_index(reloaded)["checksums"]
    assert [p.name for p in (root / BUILDS).iterdir()] == [build_before]
    assert json.loads((root / RECORD).read_text())["builds"] == [build_before]
    # ... and the next update goes through.
    assert "new" in index.add_documents([Document(page_content="The reef tower keeper.", id="new")]).document_ids()
    if fault == "add":
        assert seen == [2]  # the copy had lost doc1's two old records when the kill came
    elif fault == "switch":  # the update was complete (a Chroma one in its changed copy) when the kill came
        (store,) = seen
        assert isinstance(store, dict) and store.get("ids" if backend == "chroma" else "mode") == (
            "records" if backend == "chroma" else "matrix"
        )
    assert seen


def test_arag_index_update_syncs_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, root = tmp_path / "corpus", tmp_path / "index"
    corpus.mkdir()
    for n in range(5):
        (corpus / f"n{n}.txt").write_text(page(n).page_content, encoding="utf-8")
    code, _, err = run_cli(["index", str(corpus), "--out", str(root), "--quiet"], capsys)
    assert code == 0, err
    (corpus / "n1.txt").write_text("The orchard was replanted with pears.", encoding="utf-8")
    (corpus / "n3.txt").unlink()
    (corpus / "n9.txt").write_text("A ninth note about the glacier.", encoding="utf-8")
    code, out, err = run_cli(["index", str(corpus), "--out", str(root), "--update", "--json"], capsys)
    assert code == 0, err
    report = json.loads(out)
    assert (report["added"], report["changed"], report["removed"], report["unchanged"]) == (1, 1, 1, 3)
    index = load_index(root)
    assert index.document_ids() == ["n0.txt", "n1.txt", "n2.txt", "n4.txt", "n9.txt"]
    assert index.keyword_search(["pears"], 1)[0].chunk_id == "n1.txt"
    assert not index.keyword_search(["island 3"], 5) or all(
        h.chunk_id != "n3.txt" for h in index.keyword_search(["island"], 9)
    )
    full = build_index(corpus, tmp_path / "full", embeddings=index.embeddings, progress=False)
    assert index.store.chunks == full.store.chunks
    assert [h.chunk_id for h in index.semantic_search("glacier note", 5)] == [
        h.chunk_id for h in full.semantic_search("glacier note", 5)
    ]
    for flags in (
        ["--chunk-size", "300"],
        ["--profile", "paper"],
        ["--keyword-match", "word"],
        ["--no-contextual-headers"],
    ):
        line = assert_one_error_line(*run_cli(["index", str(corpus), "--out", str(root), "--update", *flags], capsys))
        assert flags[0].replace("--no-", "--") in line and "--update keeps the settings" in line


def test_sync_of_documents_matches_a_rebuild(tmp_path: Path) -> None:
    docs = PagesLoader(15).load()
    build(docs, tmp_path / "index")
    changed = [*docs[5:], Document(page_content="Fresh text about a reef tower.", id="doc2", metadata={"source": "x"})]
    synced, report = sync_index(changed, tmp_path / "index", embeddings=WordHashEmbeddings())
    assert (len(report.added), len(report.changed), len(report.removed)) == (0, 1, 4)
    same_index(synced, build(changed, tmp_path / "full"))


def test_the_langchain_indexing_api_drives_the_index(tmp_path: Path) -> None:
    from langchain_core.indexing import InMemoryRecordManager, index

    from arag_graph.index.vectorstore import AragVectorStore

    store = AragVectorStore(path=tmp_path / "index", embedding=WordHashEmbeddings())
    records = InMemoryRecordManager("arag")
    records.create_schema()
    first = [page(n) for n in range(6)]
    result = index(first, records, store, cleanup="incremental", source_id_key="source", key_encoder="sha256")
    assert result == {"num_added": 6, "num_updated": 0, "num_skipped": 0, "num_deleted": 0}
    # book1.pdf changes: its two pages are replaced by one, the rest is skipped.
    second = [d for d in first if d.metadata["source"] != "book1.pdf"]
    second.append(
        Document(page_content="Book one now holds one page about a reef tower.", metadata={"source": "book1.pdf"})
    )
    result = index(second, records, store, cleanup="incremental", source_id_key="source", key_encoder="sha256")
    assert result == {"num_added": 1, "num_updated": 0, "num_skipped": 4, "num_deleted": 2}
    assert store.index is not None and len(store.index) == 5
    (hit,) = store.similarity_search("reef tower", k=1, filter={"source": "book1.pdf"})
    assert hit.page_content.startswith("Book one now") and hit.metadata == {"source": "book1.pdf"}
    reloaded = load_index(tmp_path / "index", embeddings=WordHashEmbeddings())
    assert verify_index(reloaded)["chunks"] == 5


def test_an_update_of_a_chroma_index_matches_a_rebuild(tmp_path: Path) -> None:
    docs = PagesLoader(8).load()
    index = build_index(docs, tmp_path / "index", embeddings=WordHashEmbeddings(), backend="chroma", progress=False)
    added = Document(page_content="The reef tower keeper rows ashore weekly.", id="extra", metadata={"source": "x"})
    updated = index.delete(["doc2"]).add_documents([added])
    full = build_index(
        [d for d in docs if d.id != "doc2"] + [added],
        tmp_path / "full",
        embeddings=WordHashEmbeddings(),
        backend="chroma",
        progress=False,
    )
    assert updated.manifest.chroma["mode"] == "persistent"
    same_index(updated, full)
    assert verify_index(load_index(tmp_path / "index", embeddings=WordHashEmbeddings()))["sentences"] == 15


class CountingEmbeddings(WordHashEmbeddings):
    """:class:`WordHashEmbeddings` that counts the texts it encodes."""

    def __init__(self) -> None:
        super().__init__()
        self.encoded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.encoded += len(texts)
        return super().embed_documents(texts)


def store_copies(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Where every checked copy of an embedded store goes from now on (each a pass over the store)."""
    copies: list[Path] = []
    copy_verified = integrity_module.copy_verified

    def copied(root: Path, source: Path, target: Path, recorded: dict[str, str]) -> None:
        copies.append(target)
        copy_verified(root, source, target, recorded)

    monkeypatch.setattr(integrity_module, "copy_verified", copied)
    return copies


def test_a_chroma_update_changes_only_the_changed_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An embedded Chroma index updates in proportion to the change, not to its size: the previous
    store is copied and only new sentences are encoded and added (its old records deleted), and the
    result is the index a full build gives, twice in a row (the second update starts from records an
    update numbered)."""
    docs = PagesLoader(40).load()
    root = tmp_path / "index"
    index = build_index(docs, root, embeddings=WordHashEmbeddings(), backend="chroma")
    before = answers(index)
    added: list[int] = []
    add_rows = SentenceStore.add_rows

    def counted(self: SentenceStore, start: object, layout: object, documents: list[str], *args: object, **kw: object):  # type: ignore[no-untyped-def]
        added.append(len(documents))
        return add_rows(self, start, layout, documents, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(SentenceStore, "add_rows", counted)
    copies = store_copies(monkeypatch)
    counting = CountingEmbeddings()
    edited = Document(page_content="A new tower was raised on the reef. Its lamp is red.", id="doc7")
    extra = Document(page_content="The reef tower keeper rows ashore weekly.", id="extra")
    first = [edited if d.id == "doc7" else d for d in docs if d.id != "doc3"] + [extra]
    updated, report = sync_index(first, root, embeddings=counting)
    # One pass over the store: the update's checked copy into its own build. The previous store is not
    # opened (no private copy), nor is the new one until something searches it.
    assert updated.build_dir is not None and copies == [updated.build_dir / "chroma"]
    # Three new sentences: encoded once each and the only records added (of 80 the index holds).
    assert (report.changed, report.removed, report.added) == (["doc7"], ["doc3"], ["extra"])
    assert counting.encoded == 3 and sum(added) == 3
    assert updated.manifest.sentences == 80 - 2 - 2 + 3
    assert answers(index) == before  # the snapshot a reader holds answers as it did
    same_index(updated, build_index(first, tmp_path / "full1", embeddings=WordHashEmbeddings(), backend="chroma"))

    second = [d for d in first if d.id != "doc11"] + [page(3)]
    added.clear()
    again, _ = sync_index(second, root, embeddings=counting)
    # Page 3 is back: its second sentence is doc9's too, so only its first one is encoded; both are added.
    assert counting.encoded == 3 + 1 and sum(added) == 2
    full = build_index(second, tmp_path / "full2", embeddings=WordHashEmbeddings(), backend="chroma")
    same_index(again, full)
    reloaded = load_index(root, embeddings=WordHashEmbeddings())
    same_index(reloaded, full)
    assert verify_index(reloaded)["sentences"] == full.manifest.sentences


def test_a_built_chroma_index_opens_its_checked_copy_at_the_first_search_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index a build (or an update) returns reads its embedded store through a checked private copy,
    as a loaded one does, but makes it at its first search: `arag index` never searches. Threads that
    search it at once share one copy, and damage done to the store after the build is refused there."""
    import threading

    copies = store_copies(monkeypatch)
    docs = PagesLoader(6).load()
    index = build_index(docs, tmp_path / "index", embeddings=WordHashEmbeddings(), backend="chroma")
    assert copies == []
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(answers(index))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(copies) == 1 and len(results) == 4 and all(r == results[0] for r in results)
    assert results[0] == answers(load_index(tmp_path / "index", embeddings=WordHashEmbeddings()))

    damaged = build_index(docs, tmp_path / "damaged", embeddings=WordHashEmbeddings(), backend="chroma")
    assert damaged.build_dir is not None
    database = damaged.build_dir / "chroma" / "chroma.sqlite3"
    database.write_bytes(database.read_bytes()[:-1] + b"!")
    with pytest.raises(IndexDamagedError, match=r"chroma\.sqlite3"):
        damaged.semantic_search("reef tower", 3)


# ---------------------------------------------------------------------------------------------
# Readers racing updates (issue 38): every search answers, from the old build or the new one


def _slow_readers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers that pause between reading ``CURRENT`` and opening the build it names: the window in
    which an update that switches ``CURRENT`` and deletes the old build catches them, made wide enough
    (50 ms) that every update meets readers inside it."""
    from arag_graph.index import load as load_module

    real = load_module.read_current

    def read_then_pause(root: Path, *, strict: bool = True) -> str | None:
        name = real(root, strict=strict)
        time.sleep(0.05)
        return name

    monkeypatch.setattr(load_module, "read_current", read_then_pause)


def _race(root: Path, *, searches: int = 50, updates: int = 5, pause: float = 0.0) -> tuple[list[str], list[int]]:
    """``searches`` loads-and-searches on four threads while one thread makes ``updates`` updates;
    returns the errors the searches met and how many hits each answered with."""
    errors: list[str] = []
    answered: list[int] = []
    lock = threading.Lock()

    def search(i: int) -> None:
        try:
            hits = load_index(root, embeddings=WordHashEmbeddings()).keyword_search(["keeper"], 3)
        except Exception as exc:  # every failure is the finding, whatever its kind
            with lock:
                errors.append(f"search {i}: {type(exc).__name__}: {exc}")
            return
        with lock:
            answered.append(len(hits))

    def update() -> None:
        for k in range(updates):
            index = load_index(root, embeddings=WordHashEmbeddings())
            index.add_documents([page(100 + k)])
            time.sleep(pause)

    with concurrent.futures.ThreadPoolExecutor(max_workers=5) as pool:
        updater = pool.submit(update)
        list(pool.map(search, range(searches)))
        updater.result()
    return errors, answered


@pytest.mark.parametrize("guard", ["both", "readers_lock", "follow_current"])
def test_fifty_searches_racing_five_updates_all_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guard: str
) -> None:
    """A search that loads while an update switches builds answers. Each guard holds on its own:
    ``readers_lock`` (one load, no retry): the update does not delete the build a reader is opening,
    and the replaced builds go once no reader holds the lock (the next update); ``follow_current`` (no
    ``flock``, as on Windows or where the lock file cannot be opened): the update deletes the old
    build under the reader, which finds ``CURRENT`` moved on and loads the new build."""
    from arag_graph.index import layout
    from arag_graph.index import load as load_module

    root = tmp_path / "index"
    build([page(n) for n in range(6)], root)
    if guard == "readers_lock":
        monkeypatch.setattr(load_module, "LOAD_ATTEMPTS", 1, raising=False)
    if guard == "follow_current":
        monkeypatch.setattr(layout, "_flock", lambda: None, raising=False)
    _slow_readers(monkeypatch)
    # Without the lock, updates are spaced so that no reader meets two of them in one load.
    errors, answered = _race(root, pause=0.3 if guard == "follow_current" else 0.0)
    assert errors == [] and len(answered) == 50 and all(n > 0 for n in answered), errors[:3]
    final = load_index(root, embeddings=WordHashEmbeddings())
    assert final.document_ids() == [f"doc{n}" for n in [*range(6), *range(100, 105)]]
    if guard == "follow_current":  # nothing held them: each update deleted the build it replaced
        assert [p.name for p in (root / BUILDS).iterdir()] == [read_current(root)]
    final.add_documents([page(200)])  # no reader now: the replaced builds are deleted
    current = read_current(root)
    assert [p.name for p in (root / BUILDS).iterdir()] == [current]
    assert json.loads((root / RECORD).read_text())["builds"] == [current]


def test_damage_of_the_build_current_names_is_still_raised_after_one_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Following ``CURRENT`` is for a build that was replaced: a damaged current build is refused at once."""
    from arag_graph.index import load as load_module

    root = tmp_path / "index"
    build([page(n) for n in range(6)], root)
    (root / BUILDS / read_current(root) / "chunks.jsonl").write_text("{}\n", encoding="utf-8")
    loads: list[int] = []
    real = load_module.build_path
    monkeypatch.setattr(load_module, "build_path", lambda *a: loads.append(1) or real(*a))
    with pytest.raises(IndexDamagedError, match=r"chunks\.jsonl"):
        load_index(root, embeddings=WordHashEmbeddings())
    assert len(loads) == 1


# The follow-up itself, one load at a time (issue 38: the race above leaves its attempt count and how it
# reads CURRENT untested; a scripted load that fails as a reader of a replaced build does pins both)

BUILD_NAMES = [f"20261207T0600{n:02d}-0000000{n}" for n in range(8)]


def _index_root(tmp_path: Path, current: str = BUILD_NAMES[0]) -> Path:
    root = tmp_path / "index"
    root.mkdir()
    (root / "CURRENT").write_text(current, encoding="utf-8")
    return root


def _scripted_load(root: Path, moves: int) -> tuple[Callable[[], object], list[str], object]:
    """A load that fails ``moves`` times as a reader whose build was replaced while it opened it
    (``CURRENT`` moves on, the old build is gone), then answers; with the builds it was asked for."""
    answer = object()
    asked: list[str] = []

    def load() -> object:
        asked.append((root / "CURRENT").read_text(encoding="utf-8"))
        if len(asked) <= moves:
            (root / "CURRENT").write_text(BUILD_NAMES[len(asked)], encoding="utf-8")
            raise IndexDamagedError(root, f"builds/{asked[-1]} cannot be read (it is missing)")
        return answer

    return load, asked, answer


@pytest.mark.parametrize("moves", [1, 3])
def test_a_load_follows_current_to_the_new_build(tmp_path: Path, moves: int) -> None:
    from arag_graph.index.load import LOAD_ATTEMPTS, _load_following_current

    assert moves < LOAD_ATTEMPTS
    root = _index_root(tmp_path)
    load, asked, answer = _scripted_load(root, moves)
    assert _load_following_current(root, load) is answer
    assert asked == BUILD_NAMES[: moves + 1]


def test_a_load_follows_current_at_most_load_attempts_times(tmp_path: Path) -> None:
    """CURRENT moving on under every load: the last attempt's own error, after exactly LOAD_ATTEMPTS loads."""
    from arag_graph.index.load import LOAD_ATTEMPTS, _load_following_current

    root = _index_root(tmp_path)
    load, asked, _ = _scripted_load(root, moves=len(BUILD_NAMES) - 1)
    with pytest.raises(IndexDamagedError, match=rf"builds/{BUILD_NAMES[LOAD_ATTEMPTS - 1]} cannot be read"):
        _load_following_current(root, load)
    assert asked == BUILD_NAMES[:LOAD_ATTEMPTS]


def test_a_load_follows_current_only_while_it_names_a_build(tmp_path: Path) -> None:
    """A CURRENT that is damaged is the load's to report (it reads CURRENT strictly itself): the follow-up
    reads it leniently, before and after a load, and raises the load's own error at once."""
    from arag_graph.index.load import _load_following_current

    root = _index_root(tmp_path, current="not a build")
    answer = object()
    assert _load_following_current(root, lambda: answer) is answer  # read before the load: not judged there
    asked: list[str] = []

    def load() -> object:
        asked.append("load")
        raise IndexDamagedError(root, "the load's own finding")

    with pytest.raises(IndexDamagedError, match="the load's own finding"):
        _load_following_current(root, load)
    assert asked == ["load"]
