"""ARAGOG's retrieval techniques in every graph that retrieves: one helper, the same passages everywhere.

Integration tests on the HotpotQA-100 slice (its first questions and their passages, real index).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from arag_graph.core.tokens import count_tokens
from arag_graph.registry import build_graph, config_for
from arag_graph.retrievers.automerge import merge_leaves
from arag_graph.retrievers.passages import retrieve_passages

pytestmark = pytest.mark.integration

SETTINGS: list[dict[str, Any]] = [
    {"sentence_window": True, "window": 1},
    {"sentence_window": True},  # ARAGOG's window of 3
    {"retriever": "amr"},
    {"retriever": "amr", "merge_threshold": 0.3, "sentence_window": True},
    {"retriever": "hybrid", "sentence_window": True},
]


def _questions(hotpot_slice: Any) -> list[dict[str, Any]]:
    return json.loads(hotpot_slice[1].read_text(encoding="utf-8"))


@pytest.mark.parametrize("graph", ["naive_rag", "corag", "srag"])
@pytest.mark.parametrize("values", SETTINGS, ids=lambda v: ",".join(f"{k}={x}" for k, x in v.items()))
def test_every_graph_retrieves_through_the_one_helper(
    hotpot_index: Any, hotpot_slice: Any, graph: str, values: dict[str, Any]
) -> None:
    question = _questions(hotpot_slice)[0]["question"]
    out = build_graph(graph, index=hotpot_index, model="offline").invoke({"question": question}, context=values)
    assert not out.get("error"), out.get("error")
    step = next(s for s in out["trajectory"] if s["tool"] == "retrieve")
    expected = retrieve_passages(hotpot_index, step["args"]["query"], config_for(graph, **values))
    assert step["chunk_ids"] == list(dict.fromkeys(p.chunk_id for p in expected))
    assert step["tokens"] == sum(count_tokens(p.text) for p in expected)
    assert step["args"]["retriever"] == values.get("retriever", "dense")
    if values.get("sentence_window"):
        assert step["args"]["window"] == values.get("window", 3)
        whole = sum(count_tokens(hotpot_index.get_chunk(c).text) for c in step["chunk_ids"])
        assert step["tokens"] <= whole


def test_window_three_is_one_neighbour_on_each_side(hotpot_index: Any, hotpot_slice: Any) -> None:
    checked = 0
    for q in _questions(hotpot_slice):
        (chunk_id, position, _), *_ = hotpot_index.top_sentences(q["question"], 1)
        chunk = hotpot_index.get_chunk(chunk_id)
        if position < 2 and position > len(chunk.sentences) - 3:
            continue  # a window of 3 would be the whole chunk: nothing to tell apart
        found = retrieve_passages(hotpot_index, q["question"], config_for("corag", sentence_window=True, top_k=1))
        first, last = max(0, position - 1), min(len(chunk.sentences) - 1, position + 1)
        assert [p.text for p in found] == [chunk.text[chunk.sentences[first][0] : chunk.sentences[last][1]]]
        checked += 1
    assert checked >= 3


def test_amr_on_hotpotqa_merges_sentences_into_passages(hotpot_index: Any, hotpot_slice: Any) -> None:
    """HotpotQA passages are a few sentences long: the top sentences often cover most of one."""
    merged_any = 0
    for q in _questions(hotpot_slice):
        leaves = hotpot_index.top_sentences(q["question"], 5)
        nodes = merge_leaves(hotpot_index, leaves, 0.5)
        found = retrieve_passages(hotpot_index, q["question"], config_for("naive_rag", retriever="amr"))
        assert {p.chunk_id for p in found} <= {c for c, _, _ in leaves} | {
            c for n in nodes if n.level == "document" for c in n.chunk_ids
        }
        for node in nodes:
            chunk = hotpot_index.get_chunk(node.chunk_ids[0])
            counted = {p for c, p, _ in leaves if c == chunk.id}
            if node.level == "chunk":  # more than half of its sentences were among the top 5
                assert len(counted) / len(chunk.sentences) > 0.5
                merged_any += 1
            else:
                assert len(counted) / len(chunk.sentences) <= 0.5
        texts = {p.chunk_id: p.text for p in found}
        for node in nodes:
            if node.level == "chunk":
                assert texts[node.chunk_ids[0]] == hotpot_index.get_chunk(node.chunk_ids[0]).text
    assert merged_any > 0
    # A lower threshold merges at least as much, never less.
    q = _questions(hotpot_slice)[0]["question"]
    leaves = hotpot_index.top_sentences(q, 5)
    low = sum(n.level != "sentences" for n in merge_leaves(hotpot_index, leaves, 0.3))
    high = sum(n.level != "sentences" for n in merge_leaves(hotpot_index, leaves, 0.7))
    assert low >= high


def test_merge_threshold_is_bounded_as_in_aragog() -> None:
    from arag_graph.core.errors import AragError

    for bad in (0.2, 0.8):
        with pytest.raises(AragError, match="merge_threshold"):
            config_for("naive_rag", merge_threshold=bad)
