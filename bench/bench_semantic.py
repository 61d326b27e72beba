"""Sentence lookup at scale: Chroma HNSW (our settings) against a NumPy brute force, same run.

What ``semantic_search`` pays per call, minus query encoding, is one ``SentenceStore.query(vector,
50)``: the ids and distances of the nearest 50 sentences, each id a row whose chunk the index's
arrays give. This benchmark fills a persistent Chroma
collection with N synthetic 384-dimensional sentence vectors through the same code path and HNSW
settings as ``arag index`` (``connect_sentence_store`` with ``vectorstore.HNSW_CONFIG``), then, in a
fresh process, times that call for held-out query vectors next to an exact top-50 by NumPy
(``matrix @ q`` and ``argpartition``) over the same N x 384 float32 matrix, and measures recall@50
of HNSW against the exact answer and the resident memory of the opened index.

Synthetic vectors: a Gaussian mixture (N / 1000 topic centres) plus a 32-dimensional shared latent
direction and isotropic noise, L2-normalised. Neighbours then live in a low-dimensional manifold
inside each topic, as with real sentence embeddings, so HNSW is neither trivially easy (well
separated points) nor hopeless (pure isotropic noise). Every block of vectors is generated from its
own seed, so the build and the brute force see identical vectors without keeping them on disk.

    python bench/bench_semantic.py                     # 1,000,000 vectors (build takes a long while)
    python bench/bench_semantic.py --n 100000          # quick check
    python bench/bench_semantic.py --n 1000000 --reuse # query phase only, on an earlier build

The build keeps sentence documents out (``--documents`` adds short ones): the lookup never reads
them, and Chroma's full-text index over them would dominate the build time without telling
anything about vector search.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchenv import RESULTS, ROOT
from benchenv import machine as machine_facts

from arag_graph.index.chroma import HNSW_CONFIG, connect_sentence_store
from arag_graph.index.sentencematrix import SentenceLayout

DIM = 384
LATENT = 32  # dimensions of the shared within-topic latent space (the data's intrinsic dimension)
NOISE = 0.3  # norm of the isotropic noise, next to 1 for the topic centre and 0.8 for the latent part
BLOCK = 50_000
SENTENCES_PER_CHUNK = 5
TOP = 50
SEED = 2026
CONFIG = {"mode": "persistent", "path": "chroma", "collection": "sentences"}


# -- synthetic vectors ---------------------------------------------------------------------------


class Mixture:
    """The fixed parts of the distribution: topic centres and the shared latent directions."""

    def __init__(self, n: int, latent: int = LATENT, noise: float = NOISE, seed: int = SEED) -> None:
        rng = np.random.default_rng([seed, 0])
        self.topics = max(16, n // 1000)
        centres = rng.standard_normal((self.topics, DIM)).astype(np.float32)
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)
        basis, _ = np.linalg.qr(rng.standard_normal((DIM, latent)))
        self.basis = basis.T.astype(np.float32)  # latent x DIM, orthonormal rows
        self.latent, self.noise, self.seed = latent, noise, seed

    def sample(self, count: int, stream: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 1, stream])
        topic = rng.integers(0, self.topics, count)
        latent = rng.standard_normal((count, self.latent), dtype=np.float32) * np.float32(0.8 / np.sqrt(self.latent))
        noise = rng.standard_normal((count, DIM), dtype=np.float32) * np.float32(self.noise / np.sqrt(DIM))
        x = self.centres[topic] + latent @ self.basis + noise
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        return x

    def block(self, b: int, n: int) -> np.ndarray:
        """Vectors ``b * BLOCK`` up to ``min(n, (b + 1) * BLOCK)`` of the corpus."""
        return self.sample(min(BLOCK, n - b * BLOCK), stream=b)

    def queries(self, count: int) -> np.ndarray:
        return self.sample(count, stream=10**9)  # a stream no corpus block uses: held out

    def matrix(self, n: int) -> np.ndarray:
        out = np.empty((n, DIM), dtype=np.float32)
        for b in range((n + BLOCK - 1) // BLOCK):
            out[b * BLOCK : (b + 1) * BLOCK] = self.block(b, n)
        return out


# -- helpers -------------------------------------------------------------------------------------


def status() -> dict[str, int]:
    """Memory figures of this process in MiB, from /proc/self/status (no psutil needed)."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = round(int(value.split()[0]) / 1024)
    return out


def percentiles(values_ms: list[float]) -> dict[str, float]:
    a = np.array(values_ms)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "max": round(float(a.max()), 3),
        "mean": round(float(a.mean()), 3),
    }


def dir_mib(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 1)


def sentence_index(chunk_id: str, position: int) -> int:
    return int(chunk_id) * SENTENCES_PER_CHUNK + position


def synthetic_layout(n: int) -> SentenceLayout:
    """The rows' chunks: ``SENTENCES_PER_CHUNK`` sentences per chunk, chunk ids ``"0"``, ``"1"``, ..."""
    from types import SimpleNamespace

    chunks = (n + SENTENCES_PER_CHUNK - 1) // SENTENCES_PER_CHUNK
    sizes = [min(SENTENCES_PER_CHUNK, n - c * SENTENCES_PER_CHUNK) for c in range(chunks)]
    return SentenceLayout([SimpleNamespace(id=str(c), sentences=range(k)) for c, k in enumerate(sizes)])  # type: ignore[misc]


# -- phases, each in its own process --------------------------------------------------------------


def phase_build(args: argparse.Namespace) -> dict[str, Any]:
    workdir: Path = args.workdir
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    mixture = Mixture(args.n, args.latent, args.noise)
    store = connect_sentence_store(CONFIG, workdir, create=True)
    batch = max(1, min(args.batch, int(store.client.get_max_batch_size())))
    started = time.perf_counter()
    generate_s = 0.0
    done = 0
    for b in range((args.n + BLOCK - 1) // BLOCK):
        t0 = time.perf_counter()
        vectors = mixture.block(b, args.n)
        generate_s += time.perf_counter() - t0
        first = b * BLOCK
        for start in range(0, len(vectors), batch):
            ids = range(first + start, first + min(start + batch, len(vectors)))
            store.collection.add(
                ids=[str(i) for i in ids],
                embeddings=vectors[start : start + batch],
                metadatas=[
                    {"chunk_id": str(i // SENTENCES_PER_CHUNK), "position": i % SENTENCES_PER_CHUNK} for i in ids
                ],
                documents=[f"synthetic sentence {i}" for i in ids] if args.documents else None,
            )
        done += len(vectors)
        elapsed = time.perf_counter() - started
        print(f"  {done:,} vectors, {elapsed:.0f} s, {done / elapsed:.0f}/s", file=sys.stderr, flush=True)
    build_s = time.perf_counter() - started
    count = store.count()
    del store
    result = {
        "n": args.n,
        "latent": args.latent,
        "noise": args.noise,
        "count": count,
        "build_s": round(build_s, 1),
        "generate_s": round(generate_s, 1),
        "insert_per_s": round(args.n / (build_s - generate_s)),
        "batch": batch,
        "documents": bool(args.documents),
        "peak_rss_mib": status()["VmHWM"],
        "disk_mib": dir_mib(workdir),
    }
    (workdir / "built.json").write_text(json.dumps(result), encoding="utf-8")
    return result


def phase_query(args: argparse.Namespace) -> dict[str, Any]:
    mixture = Mixture(args.n, args.latent, args.noise)
    queries = mixture.queries(args.queries)
    before = status()

    t0 = time.perf_counter()
    store = connect_sentence_store(CONFIG, args.workdir)
    store.layout = synthetic_layout(args.n)  # record ids are rows, as in every index arag builds now
    open_s = time.perf_counter() - t0
    opened = status()
    t0 = time.perf_counter()
    store.query(queries[0].tolist(), TOP)  # loads the HNSW index into memory
    first_query_s = time.perf_counter() - t0
    loaded = status()
    for q in queries[: min(20, len(queries))]:  # warm-up
        store.query(q.tolist(), TOP)

    chroma_ms: list[float] = []
    chroma_hits: list[list[tuple[int, float]]] = []
    for q in queries:
        vector = q.tolist()  # what semantic_search hands over: a list from embed_query
        t0 = time.perf_counter()
        matches = store.query(vector, TOP)
        chroma_ms.append((time.perf_counter() - t0) * 1000)
        chroma_hits.append([(sentence_index(c, p), s) for c, p, s in matches])
    queried = status()

    t0 = time.perf_counter()
    matrix = mixture.matrix(args.n)
    matrix_s = time.perf_counter() - t0
    brute_ms: list[float] = []
    exact: list[np.ndarray] = []
    for q in queries[: args.brute_queries]:
        t0 = time.perf_counter()
        scores = matrix @ q
        top = np.argpartition(-scores, TOP)[:TOP]
        top = top[np.argsort(-scores[top])]
        brute_ms.append((time.perf_counter() - t0) * 1000)
        exact.append(top)

    recall50, recall10, max_score_error = [], [], 0.0
    for hits, truth, q in zip(chroma_hits, exact, queries, strict=False):
        got = [i for i, _ in hits]
        recall50.append(len(set(got) & set(truth.tolist())) / TOP)
        recall10.append(len(set(got[:10]) & set(truth[:10].tolist())) / 10)
        for i, s in hits:
            max_score_error = max(max_score_error, abs(float(matrix[i] @ q) - s))

    chroma = percentiles(chroma_ms)
    brute = percentiles(brute_ms)
    return {
        "queries": len(queries),
        "brute_queries": len(brute_ms),
        "open_s": round(open_s, 3),
        "first_query_s": round(first_query_s, 3),
        "rss_mib": {
            "before_open": before["VmRSS"],
            "after_open": opened["VmRSS"],
            "after_first_query": loaded["VmRSS"],
            "after_queries": queried["VmRSS"],
            "index_delta": queried["VmRSS"] - before["VmRSS"],
            "index_delta_anon": queried["RssAnon"] - before["RssAnon"],
        },
        "chroma_ms": chroma,
        "brute_force_ms": brute,
        "p50_ratio_chroma_over_brute": round(chroma["p50"] / brute["p50"], 4),
        "p95_ratio_chroma_over_brute": round(chroma["p95"] / brute["p95"], 4),
        "recall_at_50": round(float(np.mean(recall50)), 4),
        "recall_at_10": round(float(np.mean(recall10)), 4),
        "min_recall_at_50": round(float(np.min(recall50)), 4),
        "max_abs_similarity_error": round(max_score_error, 7),
        "matrix_generate_s": round(matrix_s, 1),
        "matrix_mib": round(matrix.nbytes / 2**20),
    }


# -- driver --------------------------------------------------------------------------------------


def run_phase(phase: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--phase", phase, "--n", str(args.n), "--workdir", str(args.workdir)]
    command += ["--queries", str(args.queries), "--brute-queries", str(args.brute_queries), "--batch", str(args.batch)]
    command += ["--latent", str(args.latent), "--noise", str(args.noise)]
    if args.documents:
        command.append("--documents")
    print("  $", " ".join(command[2:]), flush=True)
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine() -> dict[str, Any]:
    import chromadb

    return machine_facts(numpy=np.__version__, chromadb=chromadb.__version__)


def markdown(report: dict[str, Any]) -> str:
    b, q = report["build"], report["query"]
    c, f = q["chroma_ms"], q["brute_force_ms"]
    rss = q["rss_mib"]
    target = "met" if q["p50_ratio_chroma_over_brute"] <= 0.2 else "NOT met"
    m = report["machine"]
    lines = [
        "# Semantic search (sentence lookup) benchmark",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, numpy {m['numpy']}, chromadb "
        f"{m['chromadb']}. Load average (1/5/15 min) {report['load_average_at_start']} at start, "
        f"{report['load_average_at_end']} at end: other work shares the cores, so compare the ratios "
        "(both sides measured in the same process, one after the other), not absolute times.",
        "",
        f"Data: {b['n']:,} synthetic 384-d sentence vectors (Gaussian mixture, {report['topics']:,} topics, "
        f"{report.get('latent', LATENT)}-d latent, noise {report.get('noise', NOISE)}; L2-normalised), "
        f"{SENTENCES_PER_CHUNK} per chunk in the metadata; "
        f"{q['queries']} held-out query vectors from the same distribution. HNSW settings: "
        f"`{json.dumps(report['hnsw'])}`.",
        "",
        "| | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---|---|---|---|",
        f"| Chroma `SentenceStore.query(v, {TOP})` | {c['p50']} | {c['p95']} | {c['p99']} | {c['max']} |",
        f"| NumPy brute force (`M @ q`, argpartition top-{TOP}) | {f['p50']} | {f['p95']} | {f['p99']} | {f['max']} |",
        "",
        f"- **p50 ratio Chroma / brute force: {q['p50_ratio_chroma_over_brute']}** "
        f"(target <= 0.2: {target}); p95 ratio {q['p95_ratio_chroma_over_brute']}.",
        f"- Recall of HNSW against the exact answer: recall@50 {q['recall_at_50']} (worst query "
        f"{q['min_recall_at_50']}), recall@10 {q['recall_at_10']}; largest similarity difference for "
        f"a returned sentence {q['max_abs_similarity_error']}. Recall depends on the data: this synthetic "
        f"distribution has intrinsic dimension {report.get('latent', LATENT)} within a topic; real sentence "
        "embeddings may need a higher `ef_search` for the same recall (the latency is what this measures).",
        f"- Resident memory of the opened index (fresh process, VmRSS): {rss['before_open']} MiB before "
        f"opening, {rss['after_open']} after opening the client, {rss['after_first_query']} after the "
        f"first query (HNSW loaded), {rss['after_queries']} after all queries: **+{rss['index_delta']} MiB** "
        f"(+{rss['index_delta_anon']} MiB anonymous). The brute-force matrix itself is {q['matrix_mib']} MiB.",
        f"- Opening the collection {q['open_s']} s; first query (loads the index) {q['first_query_s']} s.",
        f"- Build: {b['build_s']} s for {b['count']:,} vectors ({b['insert_per_s']:,} inserts/s excluding "
        f"{b['generate_s']} s of vector generation; batches of {b['batch']}, "
        f"{'with' if b['documents'] else 'without'} documents); peak RSS {b['peak_rss_mib']} MiB; "
        f"on disk {b['disk_mib']} MiB.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="sentence vectors (default 1,000,000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--brute-queries", type=int, default=200, help="queries also answered exactly")
    parser.add_argument("--batch", type=int, default=5000, help="records per Chroma add (capped by Chroma)")
    parser.add_argument("--documents", action="store_true", help="store a short document per vector too")
    parser.add_argument("--latent", type=int, default=LATENT, help=f"intrinsic dimension (default {LATENT})")
    parser.add_argument("--noise", type=float, default=NOISE, help=f"isotropic noise norm (default {NOISE})")
    parser.add_argument("--workdir", type=Path, default=None, help="default /tmp/arag-bench-semantic-N")
    parser.add_argument("--reuse", action="store_true", help="skip the build when WORKDIR holds one of size N")
    parser.add_argument("--name", default=None, help="results file stem (default semantic, or semantic-N)")
    parser.add_argument("--markdown-only", action="store_true", help="rewrite NAME.md from NAME.json, run nothing")
    parser.add_argument("--phase", choices=["build", "query"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    variant = "" if (args.latent, args.noise) == (LATENT, NOISE) else f"-l{args.latent}-s{args.noise:g}"
    args.workdir = args.workdir or Path(f"/tmp/arag-bench-semantic-{args.n}{variant}")
    args.brute_queries = min(args.brute_queries, args.queries)
    if args.phase:
        print(json.dumps(phase_build(args) if args.phase == "build" else phase_query(args)), flush=True)
        return

    name = args.name or ("semantic" if args.n == 1_000_000 else f"semantic-{args.n}")
    if args.markdown_only:
        saved = json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))
        (RESULTS / f"{name}.md").write_text(markdown(saved), encoding="utf-8")
        return
    report: dict[str, Any] = {
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        "machine": machine(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "hnsw": HNSW_CONFIG,
        "topics": Mixture(args.n).topics,
        "latent": args.latent,
        "noise": args.noise,
    }
    built = args.workdir / "built.json"
    previous = json.loads(built.read_text()) if built.exists() else {}
    same = [previous.get(k, d) for k, d in (("n", None), ("latent", LATENT), ("noise", NOISE))]
    if args.reuse and same == [args.n, args.latent, args.noise]:
        report["build"] = {**json.loads(built.read_text()), "reused": True}
    else:
        report["build"] = run_phase("build", args)
    print(json.dumps(report["build"]), flush=True)
    report["query"] = run_phase("query", args)
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (RESULTS / f"{name}.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
