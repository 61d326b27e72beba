"""What checking an index for damage costs, at 200,000 and 1,000,000 passages (issue 11, items 5-8).

A build records SHA-256 checksums of its files; ``load_index`` checks them all on every load
(``chunks.jsonl`` is hashed while it is parsed, the keyword files are hashed whole) and
``arag verify`` also checks every element of the keyword arrays and every sentence record in
Chroma. This measures, per size, on the 2WikiMultihopQA passages repeated under new IDs (as
bench/bench_keyword.py does), with the files in the page cache (just written):

- the build's checksum step;
- loading the chunk store and the keyword index without any check, and as ``load_index`` does;
- the keyword arrays' full check (``KeywordIndex.check``);
- the sentence store's full check: every record read back from an embedded Chroma. Filling Chroma
  with a million passages' sentences takes hours here, so this part runs on ``--sentences``
  records (random 384-dimensional vectors) and is reported per record, with the linear estimate
  for each size's sentence count marked as an estimate;
- the sentence matrix of the exact backend (indexes up to ``MATRIX_MAX_SENTENCES`` sentences), at
  ``--matrix-sentences`` rows: its checksum at build, opening it (memory-mapped) without and with
  the checksum every load runs, and ``arag verify``'s read of every row.

    python bench/bench_integrity.py                          # 200k and 1M passages, 50k records
    python bench/bench_integrity.py --sizes 200000 --sentences 20000 --matrix-sentences 100000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_keyword import DEFAULT_DATA, make_chunks, passages
from benchenv import RESULTS

from arag_graph.core.documents import Chunk
from arag_graph.index import integrity
from arag_graph.index.chroma import connect_sentence_store
from arag_graph.index.hierarchical import ChunkStore
from arag_graph.index.keywords import KeywordIndex, keyword_files
from arag_graph.index.load import _load_files
from arag_graph.index.manifest import CHUNKS, Manifest
from arag_graph.index.sentencematrix import (
    MATRIX_FILE,
    MATRIX_MAX_SENTENCES,
    MatrixWriter,
    SentenceLayout,
    SentenceMatrix,
)

RECORD_DIM = 384


def timed(fn: Any) -> tuple[Any, float]:
    gc.collect()  # a previous step's garbage must not be collected on this step's clock
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def median_seconds(fns: dict[str, Any], repeats: int) -> dict[str, float]:
    """The median time of each function over ``repeats`` interleaved rounds (the machine is shared)."""
    seconds: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            seconds[name].append(timed(fn)[1])
    return {name: statistics.median(values) for name, values in seconds.items()}


def manifest_for(chunks: list[Chunk], checksums: dict[str, str]) -> Manifest:
    return Manifest(
        embedding_model="bench",
        embedding_dim=RECORD_DIM,
        chunk_size=1000,
        contextual_headers=False,
        keyword_match="word",
        corpus_hash="",
        documents=len(chunks),
        chunks=len(chunks),
        sentences=sum(len(c.sentences) for c in chunks),
        chroma={},
        checksums=checksums,
    )


def measure_files(base: list[dict[str, str]], size: int, work: Path, repeats: int) -> dict[str, Any]:
    chunks = make_chunks(base, size)
    build = work / f"build-{size}"
    build.mkdir()
    ChunkStore(chunks).save(build / CHUNKS)
    KeywordIndex.from_chunks(chunks).save(build)
    names = [CHUNKS, *keyword_files()]
    file_bytes = sum((build / name).stat().st_size for name in names)
    checksums, checksum_seconds = timed(lambda: integrity.checksums(build, names))
    manifest = manifest_for(chunks, checksums)
    sentences = manifest.sentences
    del chunks

    def plain_load() -> None:
        store = ChunkStore.load(build / CHUNKS)
        KeywordIndex.load(build, store.chunks)

    def checked_load() -> None:
        _load_files(work, build, manifest)

    plain_load()  # the first read brings the files into the page cache for both variants
    keywords = KeywordIndex.load(build, ChunkStore.load(build / CHUNKS).chunks)
    times = median_seconds({"plain": plain_load, "checked": checked_load, "arrays": keywords.check}, repeats)
    plain, checked, array_check = times["plain"], times["checked"], times["arrays"]
    del keywords
    shutil.rmtree(build)
    return {
        "passages": size,
        "sentences": sentences,
        "file_mb": round(file_bytes / 1e6, 1),
        "build_checksum_seconds": round(checksum_seconds, 2),
        "load_seconds_unchecked": round(plain, 2),
        "load_seconds_checked": round(checked, 2),
        "load_check_overhead": round(checked / plain - 1, 3),
        "keyword_full_check_seconds": round(array_check, 2),
    }


def measure_sentence_store(base: list[dict[str, str]], records: int, work: Path) -> dict[str, Any]:
    """Seconds per record of the full sentence-store check, on ``records`` sentences in Chroma."""
    chunks = chunks_with_sentences(base, records)
    total = sum(len(c.sentences) for c in chunks)
    vectors = np.random.default_rng(7).standard_normal((total, RECORD_DIM)).astype(np.float32)
    build = work / "sentences"
    build.mkdir()
    config = {"mode": "persistent", "path": "chroma", "collection": "sentences"}
    store = connect_sentence_store(config, build, create=True)
    documents = [s for _, _, s in integrity.expected_sentences(chunks)]
    _, insert = timed(lambda: store.add(chunks, documents, vectors))
    store.root = work
    digest, fingerprint = integrity.sentence_digest(chunks), integrity.vector_fingerprint(vectors)
    _, seconds = timed(lambda: integrity.verify_sentences(work, store, chunks, digest, fingerprint))
    return {
        "records": total,
        "insert_seconds": round(insert, 1),
        "verify_seconds": round(seconds, 2),
        "verify_records_per_second": round(total / seconds),
    }


def chunks_with_sentences(base: list[dict[str, str]], sentences: int) -> list[Chunk]:
    """The first repeated-2Wiki chunks holding at least ``sentences`` sentences."""
    chunks: list[Chunk] = []
    total = 0
    for chunk in make_chunks(base, sentences):
        chunks.append(chunk)
        total += len(chunk.sentences)
        if total >= sentences:
            break
    return chunks


def measure_matrix(base: list[dict[str, str]], sentences: int, work: Path, repeats: int) -> dict[str, Any]:
    """The exact backend's sentence matrix: what its checksum adds to a build and to every load, and
    what ``arag verify``'s read of every row costs."""
    chunks = chunks_with_sentences(base, sentences)
    layout = SentenceLayout(chunks)
    build = work / f"matrix-{sentences}"
    build.mkdir()
    writer = MatrixWriter(build / MATRIX_FILE, len(layout))
    rng = np.random.default_rng(11)
    for start in range(0, len(layout), 8192):
        block = rng.standard_normal((min(8192, len(layout) - start), RECORD_DIM)).astype(np.float32)
        writer.add(block / np.linalg.norm(block, axis=1, keepdims=True))
    writer.close()
    checksums, checksum_seconds = timed(lambda: integrity.checksums(build, [MATRIX_FILE]))
    config = {"mode": "matrix", "path": MATRIX_FILE}

    def plain_open() -> SentenceMatrix:
        return SentenceMatrix.open(config, build, layout, RECORD_DIM, work)

    def checked_open() -> None:
        integrity.check_file(work, build, MATRIX_FILE, checksums[MATRIX_FILE])
        plain_open()

    matrix = plain_open()
    times = median_seconds({"plain": plain_open, "checked": checked_open, "rows": matrix.check}, repeats)
    file_bytes = (build / MATRIX_FILE).stat().st_size
    del matrix
    shutil.rmtree(build)
    return {
        "sentences": len(layout),
        "file_mb": round(file_bytes / 1e6, 1),
        "build_checksum_seconds": round(checksum_seconds, 3),
        "open_seconds_unchecked": round(times["plain"], 4),
        "open_seconds_checked": round(times["checked"], 3),
        "full_check_seconds": round(times["rows"], 3),
    }


def write(report: dict[str, Any]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "integrity.json").write_text(json.dumps(report, indent=2) + "\n")
    rate = report["sentence_store"]["verify_records_per_second"]
    lines = [
        "# Integrity checks: what a damaged-index check costs",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Run: {report['date']} on {report['machine']}. Corpus: the 6,119 2WikiMultihopQA passages repeated "
        "under new IDs. Medians of interleaved rounds, files in the page cache (just written); from a cold "
        "disk every variant also pays for reading the files, and the checked load reads all of the keyword "
        "arrays, which an unchecked load maps and reads as queries touch them.",
        "",
        "| passages | sentences | files (MB) | build: checksums (s) | load, unchecked (s) | load, checked (s) "
        "| load overhead | keyword arrays, full check (s) | sentence records, full check (s, estimate) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["files"]:
        estimate = row["sentences"] / rate
        lines.append(
            f"| {row['passages']:,} | {row['sentences']:,} | {row['file_mb']:,} | {row['build_checksum_seconds']} "
            f"| {row['load_seconds_unchecked']} | {row['load_seconds_checked']} "
            f"| {row['load_check_overhead']:+.0%} | {row['keyword_full_check_seconds']} | ~{estimate:,.0f} |"
        )
    store = report["sentence_store"]
    lines += [
        "",
        f"Sentence records: measured on {store['records']:,} records of an embedded Chroma "
        f"({store['verify_seconds']} s, {rate:,} records/s; inserting them took {store['insert_seconds']} s); the "
        "last column is that rate times each size's sentence count, an estimate, not a measurement.",
        "",
        "Reading it: every load checks the checksums of every file the build wrote (the load overhead column), "
        "and the sentence store's size; a search checks each sentence record it uses against its chunk and "
        "each keyword array slice it reads. `arag verify --index DIR` adds the full checks of the last two "
        "columns: every keyword array element and every sentence record (its chunk, position, text and a "
        "vector fingerprint).",
        "",
        "The load overhead is the difference of two loads of a few seconds each on a shared machine: a few per "
        "cent either way (negative included) is run-to-run noise, and the build's checksum column bounds what "
        "hashing the same files costs.",
        "",
    ]
    if report.get("matrix"):
        lines += [
            f"## The exact backend's sentence matrix (indexes up to {MATRIX_MAX_SENTENCES:,} sentences)",
            "",
            "Random unit vectors of 384 dimensions, one `.npy` file memory-mapped at load, in the page cache. The "
            "checksum is what every load adds; the open itself maps the file and reads its header only.",
            "",
            "| sentences | file (MB) | build: checksum (s) | open, unchecked (s) | open, checked (s) "
            "| full check, every row (s) |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for row in report["matrix"]:
            lines.append(
                f"| {row['sentences']:,} | {row['file_mb']:,} | {row['build_checksum_seconds']} "
                f"| {row['open_seconds_unchecked']} | {row['open_seconds_checked']} | {row['full_check_seconds']} |"
            )
        lines.append("")
    (RESULTS / "integrity.md").write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="200000,1000000", help="passage counts, comma-separated")
    parser.add_argument("--sentences", type=int, default=50_000, help="sentence records for the Chroma check")
    parser.add_argument("--repeats", type=int, default=3, help="rounds per timing; the median is reported")
    parser.add_argument(
        "--matrix-sentences",
        default=f"20000,{MATRIX_MAX_SENTENCES}",
        help="rows of the exact backend's sentence matrix, comma-separated (empty: skip)",
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()
    base = passages(args.data)
    with tempfile.TemporaryDirectory(prefix="arag-bench-integrity-") as tmp:
        work = Path(tmp)
        files = [measure_files(base, int(size), work, args.repeats) for size in args.sizes.split(",")]
        store = measure_sentence_store(base, args.sentences, work)
        sizes = [int(n) for n in args.matrix_sentences.split(",") if n.strip()]
        matrix = [measure_matrix(base, n, work, args.repeats) for n in sizes]
    command = "python bench/bench_integrity.py" + "".join(f" {a}" for a in sys.argv[1:])
    report = {
        "command": command,
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Python {platform.python_version()}",
        "files": files,
        "sentence_store": store,
        "matrix": matrix,
    }
    write(report)
    print((RESULTS / "integrity.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
