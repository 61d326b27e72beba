"""Updating 1% of an index without a rebuild, against a full build of the changed corpus.

Builds an index of the first ``--passages`` passages of the 2Wiki corpus, then changes 1% of the
corpus (half of those passages edited, a quarter removed, a quarter new ones added) and brings the
index up to date twice: with ``sync_index`` (what ``arag index SOURCE --out DIR --update`` runs,
index load and checks included) and with a full ``build_index`` of the changed corpus. Both use
the default encoder. The two indexes must agree exactly: the same chunks, and the same semantic
and keyword search results (chunk ids, scores to 5 decimals, snippets) for every query; the ratio
of the two times is compared with the issue's target, an update of 1% costing at most 5% of a full
build, which the issue states at 200k passages.

    python bench/bench_update.py --passages 3000      # writes bench/results/update.{json,md}
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchenv import DATA, RESULTS, machine

from arag_graph.core.documents import SourceDocument
from arag_graph.index.build import build_index
from arag_graph.index.corpus import load_corpus
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.sync import sync_index

TARGET_RATIO = 0.05
TARGET_PASSAGES = 200_000


def changed_corpus(corpus: list[SourceDocument], n: int) -> tuple[list[SourceDocument], dict[str, int]]:
    """The first ``n`` passages with 1% of them changed: every 200th edited, every 400th (offset) removed,
    and as many new passages (from beyond ``n``) appended."""
    base = corpus[:n]
    changes = max(4, n // 100)
    edited = set(range(0, n, max(1, n // (changes // 2))))
    removed = {i + 1 for i in range(0, n, max(1, n // (changes // 4)))} - edited
    out = []
    for i, doc in enumerate(base):
        if i in removed:
            continue
        if i in edited:
            doc = SourceDocument(doc.text + " This passage was revised in the update benchmark.", doc.id, doc.title)
        out.append(doc)
    added = corpus[n : n + len(removed)]
    return out + added, {"edited": len(edited), "removed": len(removed), "added": len(added)}


def answers(index: HierarchicalIndex, queries: list[str]) -> list[Any]:
    out: list[Any] = []
    for query in queries:
        out.append([(h.chunk_id, round(h.score, 5), h.snippets) for h in index.semantic_search(query, 5)])
        words = [w for w in query.split() if len(w) > 3][:2]
        out.append([(h.chunk_id, h.score, h.snippets) for h in index.keyword_search(words, 5)])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=3000, help="passages in the index (the target names 200k)")
    parser.add_argument("--data", type=Path, default=DATA / "2wiki-corpus" / "corpus.json")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--name", default="update")
    args = parser.parse_args()

    # Stable ids, as a real source has (file paths, database keys): id-less passages are numbered by
    # position, and a removal would renumber (hence re-chunk, though not re-encode) every later one.
    corpus = [SourceDocument(d.text, d.id or f"p{i}", d.title) for i, d in enumerate(load_corpus(args.data))]
    if args.passages + args.passages // 100 > len(corpus):
        sys.exit(f"{args.data} has {len(corpus)} passages; give --passages up to {len(corpus) * 100 // 101}")
    changed, counts = changed_corpus(corpus, args.passages)
    queries = [" ".join(doc.text.split()[:8]) for doc in changed[:: max(1, len(changed) // args.queries)]][
        : args.queries
    ]
    work = Path(tempfile.mkdtemp(prefix="bench-update-"))
    load_before = os.getloadavg()
    try:
        t0 = time.perf_counter()
        first = build_index(corpus[: args.passages], work / "index", progress=False)
        initial_seconds = time.perf_counter() - t0

        t0 = time.perf_counter()
        updated, report = sync_index(changed, work / "index")
        update_seconds = time.perf_counter() - t0

        t0 = time.perf_counter()
        full = build_index(changed, work / "full", progress=False)
        full_seconds = time.perf_counter() - t0

        identical_chunks = updated.store.chunks == full.store.chunks
        identical_answers = answers(updated, queries) == answers(full, queries)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = update_seconds / full_seconds
    met = ratio <= TARGET_RATIO and identical_chunks and identical_answers
    command = f"python bench/bench_update.py --passages {args.passages}"
    result = {
        "command": command,
        "machine": machine(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "passages": args.passages,
        "chunks": full.manifest.chunks,
        "sentences": full.manifest.sentences,
        "encoder": full.manifest.encoder,
        "changes": counts,
        "report": report.summary(),
        "initial_build_seconds": round(initial_seconds, 2),
        "update_seconds": round(update_seconds, 2),
        "full_build_seconds": round(full_seconds, 2),
        "ratio": round(ratio, 4),
        "target_ratio": TARGET_RATIO,
        "target_passages": TARGET_PASSAGES,
        "identical_chunks": identical_chunks,
        "identical_answers": identical_answers,
        "queries": len(queries),
        "met": met,
        "previous_chunks": first.manifest.chunks,
    }
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    verdict = "MET" if met else "NOT MET"
    scale = (
        f"**{args.passages:,} passages**, not the {TARGET_PASSAGES:,} the target names: a full build of 200k "
        "passages with the default ONNX encoder takes hours on this shared 2-core machine"
        if args.passages < TARGET_PASSAGES
        else f"{args.passages:,} passages"
    )
    lines = [
        f"# Index update benchmark ({args.data.parent.name})",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {result['machine']}; load average {result['load_average_before']} before, "
        f"{result['load_average_after']} after (shared machine).",
        "",
        f"Size: {scale}. {full.manifest.chunks:,} chunks, {full.manifest.sentences:,} sentences, encoder "
        f"{full.manifest.encoder}.",
        "",
        f"Change: 1% of the passages ({counts['edited']} edited, {counts['removed']} removed, "
        f"{counts['added']} added). "
        f"Update report: {report.summary()}.",
        "",
        "| step | seconds |",
        "|---|---|",
        f"| initial build ({args.passages:,} passages) | {initial_seconds:.2f} |",
        f"| update (`sync_index`, = `arag index SOURCE --out DIR --update`, load and checks included) | "
        f"{update_seconds:.2f} |",
        f"| full build of the changed corpus | {full_seconds:.2f} |",
        "",
        f"Ratio update / full build: **{ratio:.4f}** (target ≤ {TARGET_RATIO}): **{verdict}** at this size.",
        "",
        f"Same index as the full rebuild: chunks {'identical' if identical_chunks else 'DIFFER'}; semantic and "
        f"keyword results for {len(queries)} queries (ids, scores to 5 decimals, snippets) "
        f"{'identical' if identical_answers else 'DIFFER'}.",
        "",
        "Where the update's time goes: loading and checking the index, reading the source and hashing every "
        "document, chunking the changed ones, encoding only sentences whose text is new, and rewriting the "
        "build's files (chunks, keyword index, vectors, checksums). Not measured at 200k passages: there an index "
        "of about 700,000 sentences goes to Chroma (past the matrix's 100,000), and an update re-inserts every "
        "vector into a new collection (1.4-1.8 ms of CPU a sentence, bench/results/vs_paper.md), which could take "
        "the ratio past 5%; an index built with `--backend matrix` rewrites its vectors as a file and should stay "
        "near this ratio.",
        "",
    ]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
