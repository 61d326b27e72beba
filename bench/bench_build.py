"""Index build throughput per encoder backend: torch, onnx and onnx-int8 (the default), same run.

Every encoder backend (``--encoders``) builds the same corpus end to end (loading and splitting,
encoding, storing the sentence vectors, keyword index, manifest), with the build's own timings
showing where the time goes. All models are loaded, exported (ONNX, once, timed separately) and
warmed before anything is timed, and the order of the measurements rotates from round to round.
Every backend runs the same way (one single-threaded batch per core), so the ratios compare the
backends; the comparison with the paper's own build script, with the same threading on both sides,
is bench/bench_vs_paper.py.

    python bench/bench_build.py --rounds 3      # HotpotQA-100, writes bench/results/build.{json,md}
    python bench/bench_build.py --data data/2wiki-corpus --rounds 2 --name build-2wiki
"""

from __future__ import annotations

import argparse
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

from benchenv import DATA, RESULTS

from arag_graph.core.chunking import chunk_documents
from arag_graph.index.build import build_index
from arag_graph.index.corpus import load_corpus
from arag_graph.index.encoders import ENCODERS, OnnxSentenceEncoder, check_encoder, default_embeddings
from arag_graph.index.text import sentence_inputs

DEFAULT_DATA = DATA / "hotpotqa-100"


def time_build(corpus: Path, work: Path, encoder: str, contextual_headers: bool) -> dict[str, Any]:
    out = work / f"index-{encoder}"
    shutil.rmtree(out, ignore_errors=True)
    started, cpu = time.perf_counter(), time.process_time()
    index = build_index(corpus, out, encoder=encoder, contextual_headers=contextual_headers, progress=False)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    timings = dict(index.manifest.extra.get("timings", {}))
    sentences = index.manifest.sentences
    shutil.rmtree(out, ignore_errors=True)
    return {
        "encoder": index.manifest.encoder,
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "chunks": index.manifest.chunks,
        "sentences": sentences,
        "sentences_per_second": round(sentences / seconds, 1),
        "encode_sentences_per_second": round(sentences / timings["encode_seconds"], 1),
        "timings": timings,
    }


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with corpus.json")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--encoders", default=",".join(ENCODERS), help="comma-separated backends to build with")
    parser.add_argument("--contextual-headers", action="store_true", help="build with CCH (embeds longer texts)")
    parser.add_argument("--name", default="build", help="results file stem in bench/results/")
    parser.add_argument(
        "--cpus", default=None, help="pin the run to these CPUs (e.g. 1), one thread each; default: all, as arag index"
    )
    parser.add_argument("--markdown-only", action="store_true", help="rewrite NAME.md from NAME.json")
    args = parser.parse_args()
    if args.markdown_only:
        saved = json.loads((RESULTS / f"{args.name}.json").read_text(encoding="utf-8"))
        (RESULTS / f"{args.name}.md").write_text(render(saved), encoding="utf-8")
        return
    if args.cpus:
        import torch

        cpus = {int(c) for c in args.cpus.split(",")}
        os.sched_setaffinity(0, cpus)  # ONNX encoders run one batch per CPU of the affinity
        torch.set_num_threads(len(cpus))
    encoders = [check_encoder(e) for e in args.encoders.split(",") if e.strip()]

    corpus = args.data / "corpus.json"
    started = time.perf_counter()
    chunks = chunk_documents(load_corpus(corpus))
    _, embedded = sentence_inputs(chunks, args.contextual_headers)
    print(f"{len(chunks)} chunks, {len(embedded)} sentences; loading the models", flush=True)

    warm = embedded[:64]
    first_use: dict[str, float] = {}
    for name in encoders:
        encoder = default_embeddings(name)
        t0 = time.perf_counter()
        encoder.encode(warm)  # loads (and for ONNX exports, when the cache has no model yet)
        first_use[name] = round(time.perf_counter() - t0, 2)

    rounds = []
    steps = list(encoders)
    with tempfile.TemporaryDirectory(prefix="arag-bench-build-") as tmp:
        work = Path(tmp)
        for number in range(1, args.rounds + 1):
            shift = (number - 1) % len(steps)
            order = steps[shift:] + steps[:shift]
            record: dict[str, Any] = {"round": number, "order": order, "load_before": load_average(), "builds": {}}
            for step in order:
                record["builds"][step] = time_build(corpus, work, step, args.contextual_headers)
            record["load_after"] = load_average()
            for build in record["builds"].values():
                if "torch" in record["builds"]:
                    torch_build = record["builds"]["torch"]
                    build["speedup_vs_torch"] = round(torch_build["seconds"] / build["seconds"], 3)
                    # CPU time is less sensitive than wall time to other processes on the shared cores.
                    build["cpu_speedup_vs_torch"] = round(torch_build["cpu_seconds"] / build["cpu_seconds"], 3)
            rounds.append(record)
            print(json.dumps(record), flush=True)

    import onnxruntime
    import sentence_transformers
    import torch

    summary = {}
    for name in encoders:
        builds = [r["builds"][name] for r in rounds]
        summary[name] = {
            "median_seconds": round(statistics.median(b["seconds"] for b in builds), 2),
            "median_sentences_per_second": round(statistics.median(b["sentences_per_second"] for b in builds), 1),
            "median_encode_sentences_per_second": round(
                statistics.median(b["encode_sentences_per_second"] for b in builds), 1
            ),
            "first_use_seconds": first_use[name],
        }
        summary[name]["median_cpu_seconds"] = round(statistics.median(b["cpu_seconds"] for b in builds), 2)
        for key in ("speedup_vs_torch", "cpu_speedup_vs_torch"):
            if all(key in b for b in builds):
                summary[name][f"median_{key}"] = round(statistics.median(b[key] for b in builds), 3)
    onnx_files = {
        name: str(encoder.onnx_path)
        for name in encoders
        if isinstance(encoder := default_embeddings(name), OnnxSentenceEncoder)
    }
    result = {
        "command": "python " + " ".join([f"bench/{Path(__file__).name}", *sys.argv[1:]]),
        "corpus": str(corpus),
        "chunks": len(chunks),
        "sentences": len(embedded),
        "contextual_headers": args.contextual_headers,
        "batch_sizes": {name: default_embeddings(name).batch_size for name in encoders},
        "encoders": encoders,
        "onnx_files": onnx_files,
        "machine": {
            "cpu": _cpu_name(),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "pinned_cpus": sorted(os.sched_getaffinity(0)),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "onnxruntime": onnxruntime.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "rounds": rounds,
        "summary": summary,
        "total_seconds": round(time.perf_counter() - started, 1),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{args.name}.md").write_text(render(result), encoding="utf-8")
    print(f"wrote {RESULTS / args.name}.json and .md")
    print(json.dumps(summary, indent=2))


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def render(result: dict[str, Any]) -> str:
    m = result["machine"]
    batches = ", ".join(f"{k} {v}" for k, v in result["batch_sizes"].items())
    lines = [
        f"# Index build benchmark ({Path(result['corpus']).parent.name})",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores, the run pinned to CPUs {m.get('pinned_cpus', 'all')} "
        f"({m['torch_threads']} torch threads, as many ONNX batches at a time), Python {m['python']}, "
        f"torch {m['torch']}, onnxruntime {m['onnxruntime']}, sentence-transformers {m['sentence_transformers']}. "
        "The machine is shared; the load average before and after each round is listed, and comparisons "
        "are within a round.",
        "",
        f"Corpus: {result['chunks']} chunks, {result['sentences']} sentences"
        f"{' (contextual headers on)' if result['contextual_headers'] else ''}. Each build is "
        "`build_index(corpus, out, encoder=...)` end to end (load and split the corpus, encode, store the sentence "
        f"vectors, keyword index, manifest); texts per batch: {batches}; batches sorted by token length, one "
        "single-threaded batch per core. Models loaded, exported and warmed first. Against the paper's build "
        "script, with the same threading on both sides: bench/results/vs_paper.md.",
        "",
        "| round | encoder | build s | sentences/s end to end | split s | encode s | encode sentences/s | store s "
        "| keyword s | speed-up vs torch build | CPU s | load avg before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rounds"]:
        for name in r["order"]:
            b, t = r["builds"][name], r["builds"][name]["timings"]
            lines.append(
                f"| {r['round']} | {name} | {b['seconds']} | **{b['sentences_per_second']}** "
                f"| {t.get('split_seconds')} | {t.get('encode_seconds')} | {b['encode_sentences_per_second']} "
                f"| {t.get('insert_seconds')} | {t.get('keyword_seconds')} | {b.get('speedup_vs_torch', '')} "
                f"| {b['cpu_seconds']} | {r['load_before']} → {r['load_after']} |"
            )
    lines += [
        "",
        "Medians over the rounds (the speed-ups are medians of per-round ratios; CPU time, of all threads, "
        "moves much less than wall time when other processes share the cores):",
        "",
        "| encoder | build s | sentences/s end to end | encode sentences/s | speed-up vs torch | CPU s "
        "| CPU-time speed-up vs torch | first use s (load, export if not cached) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in result["summary"].items():
        lines.append(
            f"| {name} | {s['median_seconds']} | **{s['median_sentences_per_second']}** "
            f"| {s['median_encode_sentences_per_second']} | {s.get('median_speedup_vs_torch', '')} "
            f"| {s['median_cpu_seconds']} | {s.get('median_cpu_speedup_vs_torch', '')} | {s['first_use_seconds']} |"
        )
    lines += [
        "",
        "Where the time goes: encoding dominates every build; storing the vectors (the exact matrix, written as "
        "they come) and the keyword index follow; splitting is the corpus load, sentence splitting and chunking. "
        "The ONNX backends run the same batches through ONNX Runtime (`OnnxSentenceEncoder`): `onnx` is the "
        "float32 graph exported from the packaged weights (torch's vectors), `onnx-int8` has int8 matrix-product "
        "weights and encodes one sentence per call, so that a sentence's vector never depends on its batch "
        "(close vectors; recall in bench/results/quality.md).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
