"""How far three retrieval details that differ from the A-RAG paper's released code move results (issue 35).

Measured offline on HotpotQA-100 (994 passages, 100 questions) with the paper profile's index (the
substring keyword rule, bare sentences) and the packaged encoder, top-k 5:

* **keyword_search's snippet cap.** The released tool keeps at most 5 sentences per chunk; ours did
  not. For every question's keywords (the offline policy's ``salient_spans``) and for the probe
  ``["the", "film"]``: the snippet tokens (o200k) of the top 5 hits with the cap and without it, and
  how many hits the cap shortens. The ranking is the same either way.
* **semantic_search's ranking pool.** The released tool groups the query's top ``3 * top_k`` (15)
  sentences into chunks, so it may return fewer than ``top_k`` chunks; ours fetches at least 50
  sentences (more when they fall in too few chunks) and always fills ``top_k``. Per question: the
  chunks each returns and recall@5 of the gold passages.
* **Naive RAG's ranking.** Ours ranks chunks by their best sentence (the A-RAG index has sentence
  vectors only); a chunk vector (the chunk's whole text embedded) ranks them as a plain dense
  retriever does. recall@5 and the tokens handed over, both ways.
* **Contextual chunk headers' form** (``--headers DIR``): semantic_search recall@5 on indexes with
  headers written ``Title: sentence`` (ours, ``path``) and ``[Document: Title] sentence`` (ARAGOG's,
  ``aragog``), HotpotQA's passages having titles and no sections.

    python bench/bench_fidelity.py            # a few minutes; writes bench/results/fidelity.{json,md}
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchenv import DATA, RESULTS, machine

from arag_graph.core.tokens import count_tokens
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import KEYWORD_SNIPPET_SENTENCES, SNIPPET_POOL, HierarchicalIndex
from arag_graph.index.load import load_index
from arag_graph.llm.offline import salient_spans

TOP_K = 5
PROBE = ["the", "film"]


def gold_ids(index: HierarchicalIndex, question: dict[str, Any]) -> set[str]:
    titles = {title for title, _ in question["supporting_facts"]}
    return {cid for title in titles for cid in index.ids_for_title(title)}


def recall(found: list[str], gold: set[str]) -> float:
    return len(gold & set(found)) / len(gold) if gold else 0.0


def snippet_tokens(index: HierarchicalIndex, keywords: list[str]) -> tuple[int, int, int, int]:
    """(tokens with the cap, tokens without it, hits the cap shortened, hits) for one search's top 5."""
    capped = uncapped = shortened = 0
    hits = index.keyword_search(keywords, TOP_K)
    for hit in hits:
        chunk = index.get_chunk(hit.chunk_id)
        assert chunk is not None
        every = index.keywords.snippets(chunk, keywords) or list(hit.snippets)
        capped += sum(count_tokens(s) for s in hit.snippets)
        uncapped += sum(count_tokens(s) for s in every)
        shortened += len(every) > KEYWORD_SNIPPET_SENTENCES
    return capped, uncapped, shortened, len(hits)


def keyword_report(index: HierarchicalIndex, questions: list[dict[str, Any]]) -> dict[str, Any]:
    rows = []
    for q in questions:
        keywords = salient_spans(q["question"])
        if keywords:
            rows.append(snippet_tokens(index, keywords))
    capped, uncapped, shortened, hits = (sum(r[i] for r in rows) for i in range(4))
    probe = snippet_tokens(index, PROBE)
    probe_sentences = [
        len(index.keywords.snippets(index.get_chunk(h.chunk_id), PROBE)) for h in index.keyword_search(PROBE, TOP_K)
    ]
    return {
        "searches": len(rows),
        "snippet_tokens_per_search_capped": round(capped / len(rows), 1),
        "snippet_tokens_per_search_uncapped": round(uncapped / len(rows), 1),
        "hits_shortened": shortened,
        "hits": hits,
        "probe": {"keywords": PROBE, "tokens_capped": probe[0], "tokens_uncapped": probe[1]},
        "probe_matching_sentences_per_hit": probe_sentences,
    }


def released_pool(index: HierarchicalIndex, query: str) -> list[str]:
    """The released tool's ranking: the query's top 3 * top_k sentences, grouped by chunk, best first."""
    found: list[str] = []
    for chunk_id, _, _ in index.top_sentences(query, SNIPPET_POOL * TOP_K):
        if chunk_id not in found:
            found.append(chunk_id)
    return found[:TOP_K]


def pool_report(index: HierarchicalIndex, questions: list[dict[str, Any]]) -> dict[str, Any]:
    ours, released = [], []
    for q in questions:
        gold = gold_ids(index, q)
        mine = [h.chunk_id for h in index.semantic_search(q["question"], TOP_K)]
        theirs = released_pool(index, q["question"])
        ours.append((len(mine), recall(mine, gold)))
        released.append((len(theirs), recall(theirs, gold)))
    return {
        "ours_chunks_mean": round(statistics.mean(n for n, _ in ours), 2),
        "released_chunks_mean": round(statistics.mean(n for n, _ in released), 2),
        "released_questions_under_top_k": sum(n < TOP_K for n, _ in released),
        "ours_recall_at_5": round(statistics.mean(r for _, r in ours), 4),
        "released_recall_at_5": round(statistics.mean(r for _, r in released), 4),
    }


def chunk_vector_report(index: HierarchicalIndex, questions: list[dict[str, Any]]) -> dict[str, Any]:
    chunks = list(index.store.chunks)
    started = time.perf_counter()
    vectors = np.asarray(index.embeddings.embed_documents([c.text for c in chunks]), dtype=np.float32)
    embed_seconds = time.perf_counter() - started
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    sentence, whole = [], []
    for q in questions:
        gold = gold_ids(index, q)
        best = [h.chunk_id for h in index.semantic_search(q["question"], TOP_K)]
        query = np.asarray(index.embeddings.embed_query(q["question"]), dtype=np.float32)
        order = np.argsort(-(vectors @ (query / np.linalg.norm(query))))[:TOP_K]
        chunk_ranked = [chunks[i].id for i in order]
        for ranked, out in ((best, sentence), (chunk_ranked, whole)):
            tokens = sum(count_tokens(index.get_chunk(cid).text) for cid in ranked)
            out.append((recall(ranked, gold), tokens))
    return {
        "best_sentence_recall_at_5": round(statistics.mean(r for r, _ in sentence), 4),
        "chunk_vector_recall_at_5": round(statistics.mean(r for r, _ in whole), 4),
        "best_sentence_tokens": round(statistics.mean(t for _, t in sentence), 1),
        "chunk_vector_tokens": round(statistics.mean(t for _, t in whole), 1),
        "chunk_vectors_embed_seconds": round(embed_seconds, 1),
    }


def headers_report(data: Path, work: Path, questions: list[dict[str, Any]]) -> dict[str, Any]:
    """semantic_search recall@5 on an index with each header style (built in ``work``, reused)."""
    out: dict[str, Any] = {}
    for style in ("path", "aragog"):
        where = work / f"cch-{style}"
        if not (where / "CURRENT").exists():
            build_index(data / "corpus.json", where, contextual_headers=True, header_style=style, progress=False)
        index = load_index(where)
        found = [
            recall([h.chunk_id for h in index.semantic_search(q["question"], TOP_K)], gold_ids(index, q))
            for q in questions
        ]
        out[style] = round(statistics.mean(found), 4)
    return out


def markdown(result: dict[str, Any]) -> str:
    k, p, c = result["keyword_snippets"], result["semantic_pool"], result["naive_rag_ranking"]
    h = result.get("header_styles")
    headers = []
    if h:
        headers = [
            "",
            "semantic_search recall@5 with contextual headers written ours (`Title: sentence`) and ARAGOG's way "
            f"(`[Document: Title] sentence`): {h['path']} and {h['aragog']}.",
        ]
    return "\n".join(
        [
            "# Retrieval details against the A-RAG paper's released code (issue 35)",
            "",
            f"Command: `{result['command']}`",
            "",
            f"Data: HotpotQA-100 ({result['passages']} passages, {result['questions']} questions), the paper "
            "profile's index (substring keyword rule, bare sentences), the packaged encoder, top-k 5. "
            f"Machine: {result['machine']['cpu']}, {result['machine']['cores']} cores.",
            "",
            "| what | the released code | ours before | ours now |",
            "|---|---:|---:|---:|",
            f"| keyword_search snippet tokens per search (offline keywords, {k['searches']} searches) | "
            f"{k['snippet_tokens_per_search_capped']} (5 sentences per chunk) | "
            f"{k['snippet_tokens_per_search_uncapped']} (no cap) | {k['snippet_tokens_per_search_capped']} |",
            f'| keyword_search ["the", "film"]: snippet tokens of the top 5 | {k["probe"]["tokens_capped"]} | '
            f"{k['probe']['tokens_uncapped']} | {k['probe']['tokens_capped']} |",
            f"| semantic_search chunks returned per search (mean) | {p['released_chunks_mean']} "
            f"({p['released_questions_under_top_k']} of {result['questions']} questions under 5) | "
            f"{p['ours_chunks_mean']} | {p['ours_chunks_mean']} |",
            f"| semantic_search recall@5 | {p['released_recall_at_5']} | {p['ours_recall_at_5']} | "
            f"{p['ours_recall_at_5']} |",
            "",
            f"Hits the snippet cap shortened: {k['hits_shortened']} of {k['hits']}; matching sentences per hit of "
            f"the probe: {k['probe_matching_sentences_per_hit']}.",
            "",
            "Naive RAG's ranking (the A-RAG paper: one dense retrieval of the top 5 chunks):",
            "",
            "| ranking | recall@5 | tokens handed over per question |",
            "|---|---:|---:|",
            f"| best sentence per chunk (ours) | {c['best_sentence_recall_at_5']} | {c['best_sentence_tokens']} |",
            f"| chunk vector (whole chunk embedded) | {c['chunk_vector_recall_at_5']} | {c['chunk_vector_tokens']} |",
            "",
            f"Embedding every chunk's text took {c['chunk_vectors_embed_seconds']} s.",
            *headers,
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA / "hotpotqa-100")
    parser.add_argument("--index", type=Path, default=None, help="a paper-profile index of the corpus (else built)")
    parser.add_argument("--name", default="fidelity")
    parser.add_argument("--headers", type=Path, default=None, help="also compare header styles; their indexes here")
    args = parser.parse_args(argv)
    questions = json.loads((args.data / "questions.json").read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as tmp:
        if args.index is not None and (args.index / "CURRENT").exists():
            index = load_index(args.index)
        else:
            out = args.index or Path(tmp) / "index"
            build_index(
                args.data / "corpus.json", out, keyword_match="substring", contextual_headers=False, progress=False
            )
            index = load_index(out)
        result = {
            "command": "python bench/bench_fidelity.py" + "".join(f" {a}" for a in (argv or sys.argv[1:])),
            "machine": machine(),
            "passages": len(index.store.chunks),
            "questions": len(questions),
            "keyword_snippets": keyword_report(index, questions),
            "semantic_pool": pool_report(index, questions),
            "naive_rag_ranking": chunk_vector_report(index, questions),
        }
        if args.headers is not None:
            result["header_styles"] = headers_report(args.data, args.headers, questions)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{args.name}.md").write_text(markdown(result), encoding="utf-8")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
