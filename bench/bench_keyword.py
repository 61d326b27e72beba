"""Speed and memory of the keyword index at 200k and 1M passages, against a brute-force scan.

The corpora repeat the 6,119 2WikiMultihopQA passages under new ids. Each measurement runs in its
own process so that resident memory (VmRSS from /proc, no psutil needed) is not muddied by an
earlier phase. Results go to bench/results/keyword.json and keyword.md.

    python bench/bench_keyword.py                      # 200k and 1M, about 10 minutes
    python bench/bench_keyword.py --sizes 200000 --brute 3
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from benchenv import DATA, RESULTS, ROOT
from benchenv import machine as machine_facts

from arag_graph.core.documents import Chunk
from arag_graph.index.keywords import KeywordIndex, keyword_score

DEFAULT_DATA = DATA / "2wiki-corpus" / "corpus.json"
TOP_K = 5
# Words too common to be a model's keyword on their own (two-word spans may still contain them).
STOPWORDS = frozenset(re.findall(r"\w+", """
    the a an and or of in on at to for by with from as is was were are be been his her its their he she it
    they this that which who whom also than then into after before about over under born film directed
    american
"""))  # fmt: skip


def status() -> dict[str, int]:
    """Memory figures of this process in MiB, read from /proc/self/status."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = round(int(value.split()[0]) / 1024)
    return out


def passages(data: Path) -> list[dict[str, str]]:
    return json.loads(data.read_text(encoding="utf-8"))


def make_chunks(base: list[dict[str, str]], size: int) -> list[Chunk]:
    """``size`` chunks cycling through the passages; texts and spans are shared between copies."""
    spans = [tuple(m.span() for m in re.finditer(r"\S.*?(?:[.!?](?=\s)|$)", p["text"], re.S)) for p in base]
    return [
        Chunk(
            id=f"{i // len(base)}-{i % len(base)}",
            text=base[i % len(base)]["text"],
            title=base[i % len(base)]["title"],
            sentences=spans[i % len(base)],
        )
        for i in range(size)
    ]


def make_queries(base: list[dict[str, str]], count: int, seed: int = 2026) -> list[list[str]]:
    """Keyword sets like a model sends: entity names (titles), content words, two-word spans."""
    rng = random.Random(seed)
    queries = []
    for _ in range(count):
        keywords = []
        for _ in range(rng.randint(1, 3)):
            passage = rng.choice(base)
            words = list(re.finditer(r"\w+", passage["text"]))
            kind = rng.random()
            if kind < 0.4 or len(words) < 2:
                keywords.append(passage["title"])
            elif kind < 0.75:
                content = [w.group() for w in words if len(w.group()) > 2 and w.group().lower() not in STOPWORDS]
                keywords.append(rng.choice(content or [words[0].group()]))
            else:
                i = rng.randrange(len(words) - 1)
                keywords.append(passage["text"][words[i].start() : words[i + 1].end()])
        queries.append(keywords)
    return queries


def percentiles(values_ms: list[float]) -> dict[str, float]:
    a = np.array(values_ms)
    return {
        "p50": round(float(np.percentile(a, 50)), 3),
        "p95": round(float(np.percentile(a, 95)), 3),
        "p99": round(float(np.percentile(a, 99)), 3),
        "max": round(float(a.max()), 3),
        "mean": round(float(a.mean()), 3),
    }


def timed_queries(index: KeywordIndex, chunks: list[Chunk], queries: list[list[str]]) -> list[float]:
    """Milliseconds per query for what the tool does: search, then snippets of the hits."""
    out = []
    for keywords in queries:
        start = time.perf_counter()
        for hit in index.search(keywords, TOP_K):
            index.snippets(chunks[hit.chunk_index], keywords)
        out.append((time.perf_counter() - start) * 1000)
    return out


def dir_mib(directory: Path) -> float:
    return round(sum(f.stat().st_size for f in directory.iterdir()) / 2**20, 1)


# -- phases, each in its own process -------------------------------------------------------------


def phase_build(args: argparse.Namespace) -> dict:
    chunks = make_chunks(passages(args.data), args.size)
    gc.collect()
    before = status()
    start = time.perf_counter()
    index = KeywordIndex.from_chunks(chunks, match=args.match)
    build_s = time.perf_counter() - start
    gc.collect()
    after = status()
    target = args.workdir / f"{args.match}-{args.size}"
    shutil.rmtree(target, ignore_errors=True)
    start = time.perf_counter()
    index.save(target)
    return {
        "build_s": round(build_s, 2),
        "save_s": round(time.perf_counter() - start, 2),
        "built_index_rss_mib": after["VmRSS"] - before["VmRSS"],
        "build_peak_rss_mib": after["VmHWM"] - before["VmRSS"],
        "disk_mib": dir_mib(target),
        "vocabulary": index.vocabulary_size,
        "text_mib": round(len(index._text) / 2**20, 1),
        "occurrences": len(index._occ_chunk),
    }


def phase_query(args: argparse.Namespace) -> dict:
    base = passages(args.data)
    chunks = make_chunks(base, args.size)
    queries = make_queries(base, args.queries)
    gc.collect()
    before = status()
    start = time.perf_counter()
    index = KeywordIndex.load(args.workdir / f"{args.match}-{args.size}", chunks, mmap=args.mmap)
    load_s = time.perf_counter() - start
    loaded = status()
    first = timed_queries(index, chunks, queries)  # pages come in from the page cache here (mmap)
    warm = timed_queries(index, chunks, queries)
    queried = status()
    result: dict = {
        "load_s": round(load_s, 3),
        "rss_after_load_mib": loaded["VmRSS"] - before["VmRSS"],
        "rss_after_queries_mib": queried["VmRSS"] - before["VmRSS"],
        "rss_after_queries_file_backed_mib": queried["RssFile"] - before["RssFile"],
        "first_pass_ms": percentiles(first),
        "latency_ms": percentiles(warm),
        "slowest": [{"keywords": queries[i], "ms": round(warm[i], 2)} for i in np.argsort(warm)[::-1][:5].tolist()],
    }
    if args.brute:
        # Brute force over every chunk: the reference rule (regex per chunk) and the paper's scan
        # (lower-case and count substrings), on evenly spread queries.
        picks = queries[:: max(1, len(queries) // args.brute)][: args.brute]
        brute_ms, paper_ms, index_ms, mismatches = [], [], [], 0
        for keywords in picks:
            start = time.perf_counter()
            reference = [keyword_score(chunk.text, keywords) for chunk in chunks]
            brute_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            lowered = [k.strip().lower() for k in dict.fromkeys(keywords)]
            for chunk in chunks:
                text = chunk.text.lower()
                sum(text.count(k) * len(k) for k in lowered)
            paper_ms.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            index.search(keywords, TOP_K)
            index_ms.append((time.perf_counter() - start) * 1000)
            if args.check:
                got = [0.0] * len(chunks)
                for hit in index.search(keywords, len(chunks)):
                    got[hit.chunk_index] = hit.score
                mismatches += got != reference
        result["brute_force"] = {
            "queries": picks,
            "reference_scan_ms": [round(x, 1) for x in brute_ms],
            "paper_substring_scan_ms": [round(x, 1) for x in paper_ms],
            "index_ms": [round(x, 3) for x in index_ms],
            "speedup_vs_reference_scan": round(statistics.median(brute_ms) / statistics.median(index_ms)),
            "speedup_vs_paper_scan": round(statistics.median(paper_ms) / statistics.median(index_ms)),
        }
        if args.check:
            result["brute_force"]["all_chunk_scores_equal"] = mismatches == 0
    return result


# -- driver -------------------------------------------------------------------------------------


def run_phase(phase: str, args: argparse.Namespace, **extra: object) -> dict:
    command = [
        sys.executable,
        __file__,
        "--phase",
        phase,
        "--data",
        str(args.data),
        "--workdir",
        str(args.workdir),
    ]
    for key, value in extra.items():
        flag = f"--{key.replace('_', '-')}"
        if value is True:
            command.append(flag)
        elif value is not False:
            command += [flag, str(value)]
    print("  $", " ".join(command[2:]), flush=True)
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine() -> dict:
    return machine_facts(numpy=np.__version__)


def markdown(report: dict) -> str:
    lines = [
        "# Keyword index benchmark",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Machine: {report['machine']['cpu']}, {report['machine']['cores']} cores, Python "
        f"{report['machine']['python']}, numpy {report['machine']['numpy']}. Load average (1/5/15 min) "
        f"{report['load_average_at_start']} at start, {report['load_average_at_end']} at end: other "
        "work on the machine shares its cores, so read the tail latencies as upper bounds.",
        "",
        f"Corpus: the {report['base_passages']:,} 2WikiMultihopQA passages repeated under new ids. "
        f"{report['queries']} keyword sets of 1-3 keywords (titles, content words, two-word spans; "
        f"seeded); a query = `search(keywords, {TOP_K})` plus `snippets` of the hits, timed on the "
        "second pass (the first pass is listed too). Word mode unless noted.",
        "",
        "| passages | build s | build peak RSS MiB | disk MiB | load s (mmap / read) "
        "| RSS after load, MiB (mmap / read) | RSS after queries, MiB (mmap / read) "
        "| p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, r in report["sizes"].items():
        m, f = r["query_mmap"], r["query_read"]
        lat = m["latency_ms"]
        lines.append(
            f"| {int(size):,} | {r['build']['build_s']} | {r['build']['build_peak_rss_mib']} "
            f"| {r['build']['disk_mib']} "
            f"| {m['load_s']} / {f['load_s']} "
            f"| {m['rss_after_load_mib']} / {f['rss_after_load_mib']} "
            f"| {m['rss_after_queries_mib']} / {f['rss_after_queries_mib']} "
            f"| {lat['p50']} | {lat['p95']} | {lat['p99']} | {lat['max']} |"
        )
    lines += ["", "Index contents:", ""]
    for size, r in report["sizes"].items():
        b = r["build"]
        lines.append(
            f"- {int(size):,}: {b['occurrences']:,} word occurrences (chunk int32 + offset in chunk uint16 "
            f"each), vocabulary {b['vocabulary']:,} words, stored lower-cased text {b['text_mib']} MiB"
        )
    lines += ["", "Latency with the arrays read into memory (`mmap=False`):", ""]
    for size, r in report["sizes"].items():
        lat = r["query_read"]["latency_ms"]
        lines.append(f"- {int(size):,}: p50 {lat['p50']} ms, p95 {lat['p95']} ms, max {lat['max']} ms")
    lines += [
        "",
        "Against the paper's method: its substring scan over every chunk (lower-case each text, "
        "`sum(text.count(k) * len(k))`), same process, same queries; the keyword_search tool with its snippets, "
        "against the paper's whole tool, is in bench/results/vs_paper.md:",
        "",
    ]
    for size, r in report["sizes"].items():
        b = r["query_mmap"].get("brute_force")
        if not b:
            continue
        check = b.get("all_chunk_scores_equal")
        reference, paper = (
            statistics.median(b["reference_scan_ms"]),
            statistics.median(b["paper_substring_scan_ms"]),
        )
        lines.append(
            f"- {int(size):,}: **paper's substring scan median {paper:.0f} ms, index median "
            f"{statistics.median(b['index_ms']):.2f} ms: x{b['speedup_vs_paper_scan']:,} faster**. (Our own "
            f"word rule run as a regex over every chunk: {reference:.0f} ms, x{b['speedup_vs_reference_scan']:,}; "
            "not the paper's method.)"
            + ("" if check is None else f" Index scores == the word rule's brute force on all chunks: {check}.")
        )
    sub = report.get("substring")
    if sub:
        lat = sub["query"]["latency_ms"]
        lines += [
            "",
            f'Paper rule (`match="substring"`, scans the stored text) at {int(sub["size"]):,} passages: '
            f"build {sub['build']['build_s']} s, p50 {lat['p50']} ms, p95 {lat['p95']} ms "
            f"({sub['query']['queries_timed']} queries).",
        ]
    lines += [
        "",
        "Slowest queries at the largest size (warm, mmap):",
        "",
    ]
    last = list(report["sizes"].values())[-1]["query_mmap"]
    lines += [f"- {q['ms']} ms: {q['keywords']}" for q in last["slowest"]]
    lines += [
        "",
        "RSS is the growth of the process's resident set over the chunk list, which the caller holds "
        "anyway (the repeated corpus shares its text strings). With mmap the arrays are file-backed "
        "page cache, shared between processes serving the same index.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--brute", type=int, default=5, help="queries also timed by brute force")
    parser.add_argument("--substring-size", type=int, default=200_000, help="0 skips the paper-rule run")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/arag-bench-keyword"))
    parser.add_argument("--phase", choices=["build", "query"], help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--match", default="word", help=argparse.SUPPRESS)
    parser.add_argument("--mmap", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--markdown-only", action="store_true", help="rewrite keyword.md from keyword.json")
    args = parser.parse_args()
    if args.markdown_only:
        saved = json.loads((RESULTS / "keyword.json").read_text(encoding="utf-8"))
        (RESULTS / "keyword.md").write_text(markdown(saved), encoding="utf-8")
        return
    if args.phase:
        print(json.dumps(phase_build(args) if args.phase == "build" else phase_query(args)))
        return

    report: dict = {
        "command": "python " + " ".join([os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        "machine": machine(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "base_passages": len(passages(args.data)),
        "queries": args.queries,
        "sizes": {},
    }
    for size in args.sizes:
        print(f"{size:,} passages", flush=True)
        brute = args.brute if size <= 200_000 else max(1, args.brute // 2)
        report["sizes"][str(size)] = {
            "build": run_phase("build", args, size=size),
            "query_mmap": run_phase(
                "query", args, size=size, queries=args.queries, mmap=True, brute=brute, check=size <= 200_000
            ),
            "query_read": run_phase("query", args, size=size, queries=args.queries, brute=0),
        }
        print(json.dumps(report["sizes"][str(size)], indent=1)[:2000], flush=True)
    if args.substring_size:
        size, timed = args.substring_size, 20
        build = run_phase("build", args, size=size, match="substring")
        query = run_phase("query", args, size=size, queries=timed, match="substring", mmap=True, brute=0)
        query["queries_timed"] = timed
        report["substring"] = {"size": size, "build": build, "query": query}
    report["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "keyword.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (RESULTS / "keyword.md").write_text(markdown(report), encoding="utf-8")
    print(markdown(report))


if __name__ == "__main__":
    main()
