"""ARAGOG's document summary index: summaries at build time (offline and by a model), two-stage search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.baselines.graph import build_naive_rag_graph
from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError, IndexDamagedError
from arag_graph.index.build import build_index
from arag_graph.index.document_groups import documents_of
from arag_graph.index.load import load_index
from arag_graph.llm.summarize import resume_path, summary_writer
from arag_graph.retrievers.summaries import SUMMARIES, SUMMARY_VECTORS, summary_search
from tests.cli_run import assert_one_error_line, run_cli
from tests.scripted import scripted
from tests.stubs.openai_server import OpenAIStubServer, http_error, text

pytestmark = pytest.mark.integration

DOCS = [
    SourceDocument(
        "The Eiffel Tower stands in Paris. It was finished in 1889 for a world fair. Gustave Eiffel's company "
        "built it. Millions of tourists climb it every year. At night it sparkles with lights. The tower is "
        "made of wrought iron.",
        id="tower",
        title="Eiffel Tower",
    ),
    SourceDocument(
        "Blue whales are the largest animals ever known. They live in every ocean. They eat tiny krill. A blue "
        "whale's heart weighs as much as a car. Their songs travel for hundreds of kilometres. Whaling nearly "
        "wiped them out.",
        id="whale",
        title="Blue whale",
    ),
    SourceDocument(
        "Python is a programming language. Guido van Rossum released it in 1991. It is known for readable "
        "code. Many scientists use it for data analysis. Its package index holds hundreds of thousands of "
        "projects. Indentation marks its blocks.",
        id="python",
        title="Python (programming language)",
    ),
]
CHUNK_SIZE = 30  # several chunks per document, so that documents and chunks differ


@pytest.fixture(scope="module")
def dsi_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_index(
        DOCS,
        tmp_path_factory.mktemp("dsi") / "index",
        chunk_size=CHUNK_SIZE,
        summaries=summary_writer("offline"),
        progress=False,
    )


def test_offline_summaries_are_extractive_lead_sentences_stored_and_checksummed(dsi_index: Any) -> None:
    info = dsi_index.manifest.extra["summaries"]
    assert info["kind"] == "extractive" and info["model"] == "offline" and info["documents"] == 3
    assert info["input_tokens"] == 0 and info["output_tokens"] == 0
    assert "extractive" in info["described"]
    assert {SUMMARIES, SUMMARY_VECTORS} <= set(dsi_index.manifest.checksums)
    records = [json.loads(line) for line in (dsi_index.build_dir / SUMMARIES).read_text().splitlines()]
    assert [r["document"] for r in records] == ["tower", "whale", "python"]
    assert records[0]["summary"].startswith("The Eiffel Tower stands in Paris.")
    groups = documents_of(dsi_index)
    assert all(len(ids) > 1 for ids in groups.chunks)  # really several chunks per document
    assert [tuple(r["chunk_ids"]) for r in records] == list(groups.chunks)


def test_two_stages_keep_chunks_of_the_best_documents(dsi_index: Any) -> None:
    whale = next(ids for ids in documents_of(dsi_index).chunks if ids[0].startswith("whale"))
    query = "how heavy is the heart of the biggest animal in the sea"
    hits = summary_search(dsi_index, query, top_k=len(whale), documents=1)  # one document holds top_k
    assert hits and {h.chunk_id.split("#")[0] for h in hits} == {"whale"}
    assert "heart" in " ".join(s for h in hits for s in h.snippets)  # the best chunk inside, by its sentences
    # Two documents hold enough chunks for this top_k: exactly two are kept.
    held = sorted(len(ids) for ids in documents_of(dsi_index).chunks)[:2]
    two = summary_search(dsi_index, "when was the iron tower in Paris finished", top_k=sum(held), documents=2)
    assert {h.chunk_id.split("#")[0] for h in two} <= {"tower", "whale", "python"}
    assert len({h.chunk_id.split("#")[0] for h in two}) == 2


ONE_CHUNK_DOCS = [
    *DOCS,
    SourceDocument("The Nile flows north through Egypt into the Mediterranean Sea.", id="nile", title="Nile"),
    SourceDocument("Mount Everest is the highest mountain above sea level.", id="everest", title="Mount Everest"),
    SourceDocument("Marie Curie won Nobel Prizes in physics and in chemistry.", id="curie", title="Marie Curie"),
    SourceDocument("The violin is a string instrument played with a bow.", id="violin", title="Violin"),
]


def test_dsi_hands_over_top_k_chunks_on_a_corpus_of_one_chunk_per_document(tmp_path: Path) -> None:
    """HotpotQA's shape: the document count must not cap the passages at summary_documents."""
    index = build_index(
        ONE_CHUNK_DOCS, tmp_path / "idx", chunk_size=2000, summaries=summary_writer("offline"), progress=False
    )
    assert all(len(ids) == 1 for ids in documents_of(index).chunks)
    hits = summary_search(index, "which river flows through Egypt", top_k=5, documents=3)
    assert len(hits) == 5 and len({h.chunk_id for h in hits}) == 5
    assert hits[0].chunk_id.startswith("nile")
    out = build_naive_rag_graph(index, scripted("Answer: the Nile")).invoke(
        {"question": "Which river flows through Egypt?"}, context={"retriever": "dsi", "top_k": 5}
    )
    assert len(out["trajectory"][0]["chunk_ids"]) == 5  # summary_documents keeps its default, 3


def test_naive_rag_with_dsi_labels_extractive_summaries(dsi_index: Any) -> None:
    model = scripted("Answer: 1889")
    out = build_naive_rag_graph(dsi_index, model).invoke(
        {"question": "When was the Eiffel Tower finished?"},
        context={"retriever": "dsi", "summary_documents": 1, "top_k": 2},
    )
    step = out["trajectory"][0]
    assert step["args"]["retriever"] == "dsi"
    assert "extractive" in step["args"]["summaries"]
    assert all(cid.startswith("tower") for cid in step["chunk_ids"])


def test_an_index_without_summaries_asked_for_dsi_names_the_fix(sample_index: Any) -> None:
    graph = build_naive_rag_graph(sample_index, scripted("Answer: x"))
    with pytest.raises(AragError, match=r"arag index .*--summaries") as caught:
        graph.invoke({"question": "Who?"}, context={"retriever": "dsi"})
    assert "\n" not in str(caught.value)


def test_damaged_summaries_refuse_to_load(tmp_path: Path) -> None:
    built = build_index(
        DOCS[:2], tmp_path / "idx", chunk_size=CHUNK_SIZE, summaries=summary_writer("offline"), progress=False
    )
    path = built.build_dir / SUMMARIES
    path.write_text(path.read_text().replace("Eiffel", "Eifel"))
    with pytest.raises(IndexDamagedError, match=r"summaries\.jsonl"):
        load_index(tmp_path / "idx")


def test_model_summaries_are_counted_and_a_killed_pass_resumes(openai_server: OpenAIStubServer, tmp_path: Path) -> None:
    out = tmp_path / "idx"
    # The second document fails (400 is not retried): the pass stops, one summary is kept.
    openai_server.script([text("A tower in Paris finished in 1889."), http_error(400, "bad request")])
    with pytest.raises(AragError, match="rerun the same command to resume") as caught:
        build_index(
            DOCS,
            out,
            chunk_size=CHUNK_SIZE,
            summaries=summary_writer("stub-model", {"base_url": openai_server.url, "workers": 1}),
            progress=False,
        )
    assert "\n" not in str(caught.value)
    kept = resume_path(out, "stub-model").read_text().splitlines()
    assert len(kept) == 1 and json.loads(kept[0])["summary"] == "A tower in Paris finished in 1889."
    first = len(openai_server.completions)

    openai_server.script([text("Blue whales are the largest animals."), text("Python is a language from 1991.")])
    built = build_index(
        DOCS,
        out,
        chunk_size=CHUNK_SIZE,
        summaries=summary_writer("stub-model", {"base_url": openai_server.url, "workers": 1}),
        progress=False,
    )
    assert len(openai_server.completions) - first == 2  # the finished document was not paid for twice
    info = built.manifest.extra["summaries"]
    assert info["kind"] == "model" and info["model"] == "stub-model" and info["reused"] == 1
    assert info["input_tokens"] > 0 and info["output_tokens"] > 0
    asked = openai_server.completions[-1].body["messages"][-1]["content"]
    assert "Python" in asked
    records = [json.loads(line) for line in (built.build_dir / SUMMARIES).read_text().splitlines()]
    assert [r["summary"] for r in records] == [
        "A tower in Paris finished in 1889.",
        "Blue whales are the largest animals.",
        "Python is a language from 1991.",
    ]
    assert not resume_path(out, "stub-model").exists()  # the build holds them now


def test_cli_index_with_summaries_reports_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{"id": d.id, "title": d.title, "text": d.text} for d in DOCS]), encoding="utf-8")
    code, out, err = run_cli(
        ["index", str(corpus), "--out", str(tmp_path / "idx"), "--summaries", "offline", "--json"], capsys
    )
    assert code == 0, err
    summaries = json.loads(out)["summaries"]
    assert summaries["kind"] == "extractive" and summaries["documents"] == 3

    # A summary model that cannot be used fails in one line before anything is encoded or written.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ARAG_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    target = tmp_path / "idx2"
    line = assert_one_error_line(
        *run_cli(["index", str(corpus), "--out", str(target), "--summaries", "gpt-4o-mini"], capsys)
    )
    assert "API key" in line
    assert not target.exists()
