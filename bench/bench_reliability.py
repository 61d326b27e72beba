"""The fault-injection suite's figures (issue 7), from a real run of its tests.

Runs the reliability tests with pytest, with ``ARAG_RELIABILITY_LOG`` set so each test appends what
it tried (tests/reliability.py), then writes bench/results/reliability.md and .json: trials run,
faults injected and survived, inputs tried and records lost, per area, with the pytest outcome and
the exact command. Nothing is counted that did not run: the figures are the sums of the records
the passing tests wrote, and a failing test makes the report say so (and the script exit 1).

    python bench/bench_reliability.py            # all areas, about 7 minutes on 2 cores
    python bench/bench_reliability.py --fast     # without tests/slow (no index kills, no server)

The evaluation-kill area runs tests/slow/test_eval_kill.py (2 trials, 3 kills); bench/bench_eval_kill.py runs
more of the same trials and writes their per-kill detail to bench/results/reliability-eval.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# Index safety (issue 11): ownership of index directories, damage, bounded Chroma waits, odd input.
INDEX_SAFETY_FAST = [
    "tests/test_index_ownership.py",
    "tests/test_index_damage.py",
    "tests/test_chroma_timeouts.py",
    "tests/test_index_readonly.py",
    "tests/test_index_inputs.py",
]
INDEX_SAFETY_AREAS = {
    "index_ownership": "Index directories: foreign builds/, links, CURRENT, a non-empty --out (deletes its own only)",
    "index_damage": "Damaged indexes: files damaged byte by byte, at load, search and `arag verify` (one line)",
    "chroma_waits": "Chroma servers that accept and never answer (every wait bounded)",
    "read_only_index": "A read-only index directory (read-only bind mount): search, read, ask, verify",
    "full_disk": "A full disk during `arag index` (a tmpfs swept over the room left)",
    "read_only_out": "`arag index --out` in a read-only directory",
    "odd_input": "Odd input to index, search, read: non-UTF-8 bytes, a device or a pipe as the corpus",
}
FAST = [
    "tests/test_model_faults.py",
    "tests/test_concurrency.py",
    "tests/test_malformed_inputs.py",
    "tests/test_hostile_content.py",
    "tests/test_secrets.py",
    "tests/test_servers_bind_localhost.py",
    "tests/test_model_limits.py",
    "tests/test_eval_safety.py",
    *INDEX_SAFETY_FAST,
]
SLOW = [
    "tests/slow/test_index_kills.py",
    "tests/slow/test_eval_kill.py",
    "tests/slow/test_server_concurrency.py",
    "tests/slow/test_langgraph_dev.py::test_server_binds_to_localhost_only",
    "tests/slow/test_index_filesystem.py",
    "tests/slow/test_served_security.py",
]
AREAS = {
    "index_kills": "Index builds: `arag index` SIGKILLed while rebuilding an existing index",
    "eval_kills": "Evaluations: `arag eval` SIGKILLed and rerun (final predictions equal an uninterrupted run)",
    "model_faults": "Model faults through the OpenAI-compatible stand-in (every graph × fault; streamed; CLI)",
    "concurrency": "Concurrent runs on one index (in-process and through `langgraph dev`)",
    "malformed_inputs": "Malformed corpora and question files (hand-made and hypothesis-generated)",
    "hostile_content": "Hostile corpus content (obedient model, offline policy on every graph)",
    "secrets": "Sentinel API keys in outputs, errors and eval files",
    "servers": "Servers bind to localhost",
    "bounded_waits": "Bounded model waits: a model server that accepts and never answers",
    "served_security": "Served graphs (`langgraph dev`, sentinel key): hostile run contexts refused in one line, "
    "no request to a host the operator did not allow; a hung model run holds no other run",
    "eval_safety": "Evaluation output: full disks, write failures, two `arag eval` runs into one --out",
    **INDEX_SAFETY_AREAS,
}
FIGURES = ("trials", "faults", "survived", "inputs", "lost")


def run_tests(targets: list[str], log: Path, junit: Path) -> tuple[list[str], int, float]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}", *targets]
    env = {**os.environ, "ARAG_RELIABILITY_LOG": str(log)}
    started = time.perf_counter()
    code = subprocess.call(command, cwd=ROOT, env=env)
    return command, code, time.perf_counter() - started


def outcome(junit: Path) -> dict[str, Any]:
    suite = ET.parse(junit).getroot()
    suite = suite.find("testsuite") if suite.tag == "testsuites" else suite
    assert suite is not None
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return counts


def summarize(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    areas: dict[str, dict[str, Any]] = defaultdict(lambda: {k: 0 for k in (*FIGURES, "tests")})
    for entry in entries:
        area = areas[entry["area"]]
        area["tests"] += 1
        for key in FIGURES:
            area[key] += int(entry.get(key, 0))
    return dict(areas)


def details(entries: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    kills = [e for e in entries if e["area"] == "index_kills"]
    for e in kills:
        lines.append(
            f"- Index kills (seed {e['seed']}): {e['trials']} trials over a {e['build_seconds']} s rebuild; "
            f"{e['kept_previous']} left the previous index active, {e['switched_to_new']} the finished new one; "
            f"at most {e['most_builds_on_disk']} builds on disk at once. Kill moments (s): "
            + ", ".join(f"{k['killed_at']} ({k['kind']}: {k['outcome']})" for k in e["kills"])
            + "."
        )
    for e in entries:
        if e["area"] == "eval_kills":
            lines.append(
                f"- Evaluation kills (seed {e['seed']}): {e['trials']} trials, {e['faults']} SIGKILLs that hit a "
                f"running `arag eval` ({e['kills_mid_run']} with predictions on disk, {e['kills_during_startup']} "
                f"during start-up; {e['kills_after_finish']} more came after the rerun had finished); "
                f"{e['inputs']} predictions per trial, {e['lost']} lost, none duplicated or different."
            )
    cells = [e for e in entries if e["area"] == "model_faults" and not e["case"].startswith("cli/")]
    if cells:
        graphs = sorted({e["case"].split("/")[0] for e in cells})
        faults = sorted({e["case"].split("/")[1] for e in cells})
        modes = sorted({e["case"].split("/")[2] for e in cells})
        requests = sum(int(e.get("requests", 0)) for e in cells)
        lines.append(
            f"- Model faults: {len(cells)} graph runs ({len(graphs)} graphs: {', '.join(graphs)}; modes "
            f"{', '.join(modes)}) over {len(faults)} faults ({', '.join(faults)}); {requests} model requests "
            "served by the stand-in; every run ended with an answer or a one-line error within its step cap."
        )
    lines += index_safety_details(entries)
    for e in entries:
        if e["area"] == "concurrency":
            lines.append(
                f"- Concurrency, {e['case']}: {e['trials']} runs at once in {e['seconds']} s, "
                "no error, no read of a chunk the run's own tools did not return."
            )
    return lines


def index_safety_details(entries: list[dict[str, Any]]) -> list[str]:
    lines = []
    for e in entries:
        if e["area"] == "full_disk":
            lines.append(
                f"- Full disk: {e['trials']} builds and rebuilds on a 16 MB tmpfs left with 0 B to 6 MB; "
                f"{e['faults']} ran out of space ("
                + ", ".join(f"{n} in {kind}" for kind, n in sorted(e.get("failure_kinds", {}).items()))
                + "), each ending in one line, with no --out left by a first build and the previous index "
                "answering as before after a rebuild."
            )
    damage = [e for e in entries if e["area"] == "index_damage"]
    if damage:
        lines.append(
            f"- Index damage: {len(damage)} kinds of damage ({sum(e['faults'] for e in damage)} damaged loads, "
            "searches, `ask` runs and verifications), each refused with `index damaged: ...; rebuild with ...`."
        )
    return lines


def eval_safety_details(entries: list[dict[str, Any]]) -> list[str]:
    """What the evaluation-output and bounded-wait tests did (issue 11, eval side)."""
    lines: list[str] = []
    silent = [e for e in entries if e["area"] == "bounded_waits"]
    if silent:
        lines.append(
            f"- Bounded model waits: {len(silent)} runs against a server that accepts and never answers "
            f"({'; '.join(e['case'] for e in silent)}); each ended after exactly its attempts (timeout and "
            "retries) with one line saying it timed out."
        )
    for e in entries:
        if e["area"] == "eval_safety":
            lines.append(
                f"- Evaluation output, {e['case']}: {e['trials']} runs, {e['faults']} fault(s), "
                f"{e['inputs']} questions, {e['lost']} lost or duplicated."
            )
    return lines


def write(report: dict[str, Any], entries: list[dict[str, Any]]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "reliability.json").write_text(json.dumps({**report, "entries": entries}, indent=2) + "\n")
    areas = report["areas"]
    total = report["total"]
    tests = report["pytest"]
    lines = [
        "# Reliability: fault-injection suite (issue 7)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"Run: {report['date']} on {report['machine']}; pytest {tests['passed']} passed, {tests['failures']} failed, "
        f"{tests['errors']} errors, {tests['skipped']} skipped in {report['seconds']:.0f} s "
        f"(pytest command: `{report['pytest_command']}`).",
        "",
        f"**Trials run: {total['trials']}. Faults injected: {total['faults']}, survived: {total['survived']}. "
        f"Inputs tried: {total['inputs']}. Records lost: {total['lost']}.**",
        "",
        "| area | tests recorded | trials | faults | survived | inputs | lost |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, title in AREAS.items():
        if key in areas:
            figures = " | ".join(str(areas[key][k]) for k in ("tests", *FIGURES))
            lines.append(f"| {title} | {figures} |")
    lines += [
        "",
        "Trials: runs, processes or builds started. Faults: faults injected (a kill, a model fault, a malformed "
        "input, a hostile chunk, an error quoting the API key). Survived: faults after which the run ended as "
        "the contract says (an answer or a one-line error within the step cap; the previous or the finished "
        "index loads and answers the same queries; a one-line error and an untouched --out; no key shown). "
        "Inputs: generated or odd-but-valid files tried beyond the hand-made faults, and source files scanned "
        "for servers. Lost: runs, records or index states missing or corrupted afterwards; the tests assert 0 "
        "before recording.",
        "",
        *details(entries),
        *eval_safety_details(entries),
        "",
        "More evaluation-kill trials, kill by kill: bench/results/reliability-eval.md "
        "(`python bench/bench_eval_kill.py --trials 10`).",
        "",
    ]
    (RESULTS / "reliability.md").write_text("\n".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="skip tests/slow (index kills, langgraph dev)")
    args = parser.parse_args()
    targets = FAST if args.fast else [*FAST, *SLOW]
    with tempfile.TemporaryDirectory() as tmp:
        log, junit = Path(tmp) / "reliability.jsonl", Path(tmp) / "junit.xml"
        command, code, seconds = run_tests(targets, log, junit)
        entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        tests = outcome(junit)
    areas = summarize(entries)
    total = {k: sum(a[k] for a in areas.values()) for k in FIGURES}
    report = {
        "command": "python bench/bench_reliability.py" + (" --fast" if args.fast else ""),
        "pytest_command": shlex.join(["python", *command[1:]]),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "seconds": round(seconds, 1),
        "pytest": tests,
        "areas": areas,
        "total": total,
    }
    write(report, entries)
    print((RESULTS / "reliability.md").read_text())
    return 0 if code == 0 and total["lost"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
