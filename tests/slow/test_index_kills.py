"""``arag index`` killed with SIGKILL while it rebuilds an existing index, many times.

tests/test_index.py kills an in-process build (fake embeddings) three times; here the real command
runs in a subprocess per trial, with the real encoder, against an index that already answers
queries. The kill moments are seeded-random and spread over the whole build:

- *timed* trials kill at a random time, stratified over the duration of a rebuild (the time the
  phase trials, which run first, saw ``CURRENT`` switch), most of which is starting Python and
  loading the encoder, then embedding;
- *phase* trials watch the index directory and kill right after a build step shows on disk: the new
  build directory (encoding starts), its sentence-store record (Chroma insert), its chunk store
  (keyword index), its manifest (the switch of ``CURRENT`` follows at once) and ``CURRENT`` itself
  changing (old builds being deleted), each plus a random delay of up to 50 ms.

After every kill the index must load and answer the probe queries (keyword and semantic) exactly as
either the previous index or the finished new one does, never anything else; leftovers of killed
builds may exist but ``builds/`` never holds more than the active build and one leftover, since
every build starts by removing them. A final uninterrupted build leaves exactly one build.

Seed: ``ARAG_FAULT_SEED`` (default 7). Trials: ``ARAG_INDEX_KILL_TRIALS`` (default 10, at least 10).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.layout import BUILDS, CURRENT, MANIFEST
from arag_graph.index.load import load_index
from arag_graph.index.manifest import SENTENCE_STORE
from arag_graph.index.sample import sample_corpus_path
from tests.reliability import record

pytestmark = [pytest.mark.slow, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("ARAG_FAULT_SEED", "7"))
TRIALS = max(10, int(os.environ.get("ARAG_INDEX_KILL_TRIALS", "10")))
OLD_PASSAGES = slice(0, 30)  # of the bundled sample's 100 passages
NEW_PASSAGES = slice(30, 100)
PHASES = ("build_dir", "sentence_store", "chunk_store", "manifest", "current_switched")


def write_corpus(path: Path, passages: slice) -> tuple[Path, list[str]]:
    corpus = json.loads(sample_corpus_path().read_text(encoding="utf-8"))
    picked = dict(list(corpus.items())[passages])
    path.write_text(json.dumps(picked, ensure_ascii=False), encoding="utf-8")
    return path, list(picked)


def answers(index: HierarchicalIndex, keywords: list[str], query: str) -> dict[str, Any]:
    return {
        "keyword": [h.to_dict() for h in index.keyword_search(keywords, 5)],
        "semantic": [h.to_dict() for h in index.semantic_search(query, 5)],
    }


def same_answers(got: dict[str, Any], want: dict[str, Any]) -> bool:
    """Equal hits and snippets; scores equal up to float noise between encoder processes."""
    for kind in ("keyword", "semantic"):
        if [(h["chunk_id"], h["snippets"]) for h in got[kind]] != [(h["chunk_id"], h["snippets"]) for h in want[kind]]:
            return False
        if any(abs(a["score"] - b["score"]) > 1e-4 for a, b in zip(got[kind], want[kind], strict=True)):
            return False
    return True


def builds_of(root: Path) -> list[str]:
    return sorted(p.name for p in (root / BUILDS).iterdir()) if (root / BUILDS).is_dir() else []


def current_of(root: Path) -> str:
    return (root / CURRENT).read_text(encoding="utf-8").strip()


def start_index(corpus: Path, out: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "arag_graph.cli.main", "index", str(corpus), "--out", str(out), "--quiet", "--json"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def phase_reached(root: Path, phase: str, previous: str) -> Callable[[], bool]:
    """A check that a build step of the new build is visible on disk."""

    def new_build() -> Path | None:
        fresh = [name for name in builds_of(root) if name != previous]
        return root / BUILDS / fresh[0] if len(fresh) == 1 else None

    def reached() -> bool:
        if phase == "current_switched":
            return (root / CURRENT).exists() and current_of(root) != previous
        build = new_build()
        if build is None:
            return False
        target = {"build_dir": None, "sentence_store": SENTENCE_STORE, "chunk_store": "chunks.jsonl"}.get(
            phase, MANIFEST
        )
        return target is None or (build / target).exists()

    return reached


def kill(process: subprocess.Popen[bytes]) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    return process.returncode


@pytest.fixture(scope="module")
def subprocess_env(_isolated_cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OPENAI_"))}
    env.update({"PYTHONPATH": str(REPO), "ARAG_CACHE_DIR": str(_isolated_cache), "LANGSMITH_TRACING": "false"})
    return env


def test_sigkilled_rebuilds_leave_a_loadable_index_and_no_growing_leftovers(
    tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    rng = random.Random(SEED)
    old_corpus, old_titles = write_corpus(tmp_path / "old.json", OLD_PASSAGES)
    new_corpus, new_titles = write_corpus(tmp_path / "new.json", NEW_PASSAGES)
    root = tmp_path / "index"
    build_index(old_corpus, root, progress=False)
    # Probes that tell the two corpora apart: a title of each as keywords, a new passage's topic.
    probe = ([old_titles[0], new_titles[0]], f"Tell me about {new_titles[1]}")
    first_answers = answers(load_index(root), *probe)

    # The finished new index's answers (built here; the killed builds run the command).
    new_answers = answers(build_index(new_corpus, tmp_path / "reference", progress=False), *probe)
    old_answers = first_answers
    assert not same_answers(new_answers, old_answers), "the probes cannot tell the old index from the new one"

    # Phase trials first: the latest of their kill times (CURRENT switched) is how long a rebuild
    # takes, over which the timed trials then spread their kills.
    timed = TRIALS // 2
    plan: list[tuple[str, float]] = [(PHASES[i % len(PHASES)], rng.uniform(0.0, 0.05)) for i in range(TRIALS - timed)]
    plan += [("timed", float(i)) for i in range(timed)]
    duration = 0.0
    outcomes: list[dict[str, Any]] = []
    most_builds = 0
    for trial, (kind, delay) in enumerate(plan):
        previous = current_of(root)
        process = start_index(new_corpus, root, subprocess_env)
        t0 = time.perf_counter()
        try:
            if kind == "timed":
                delay = rng.uniform(delay, delay + 1) * 1.05 * duration / timed
                time.sleep(delay)
            else:
                reached = phase_reached(root, kind, previous)
                while not reached() and process.poll() is None and time.perf_counter() - t0 < 300:
                    time.sleep(0.001)
                time.sleep(delay)
            at = time.perf_counter() - t0
            code = kill(process)
            if kind != "timed":
                duration = max(duration, at)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        where = f"trial {trial} ({kind}, killed at {at:.2f}s of a {duration:.2f}s build, exit {code})"
        stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
        assert code in (-signal.SIGKILL, 0), f"{where}: the build failed on its own: {stderr}"

        leftovers = [name for name in builds_of(root) if name != current_of(root)]
        most_builds = max(most_builds, len(builds_of(root)))
        assert len(leftovers) <= 1, f"{where}: leftovers pile up: {leftovers}"
        assert len(list(root.glob(f".{CURRENT}.*"))) <= 1, where

        loaded = load_index(root)
        got = answers(loaded, *probe)
        if current_of(root) == previous:
            assert same_answers(got, old_answers), f"{where}: the previous index answers differently"
            outcome = "previous"
        else:
            assert loaded.manifest.chunks == len(new_titles), where
            assert same_answers(got, new_answers), f"{where}: the switched-to index answers differently"
            outcome = "new"
            old_answers = new_answers  # the next trial rebuilds over this one
        outcomes.append(
            {
                "trial": trial,
                "kind": kind,
                "killed_at": round(at, 3),
                "exit": code,
                "outcome": outcome,
                "leftovers": len(leftovers),
            }
        )
        print(f"{where}: {outcome} index loads; {len(leftovers)} leftover build(s)")

    kinds = {o["outcome"] for o in outcomes}
    assert kinds == {"previous", "new"}, f"kills did not span the switch: {outcomes}"
    assert any(o["leftovers"] for o in outcomes), "no kill landed while a build was on disk"

    # A finished build removes every leftover and answers like the first index again.
    build_index(old_corpus, root, progress=False)
    assert builds_of(root) == [current_of(root)]
    assert not list(root.glob(f".{CURRENT}.*"))
    assert same_answers(answers(load_index(root), *probe), first_answers)

    record(
        "index_kills",
        "arag index SIGKILL during rebuild",
        trials=len(outcomes),
        faults=len(outcomes),
        survived=len(outcomes),
        lost=0,
        seed=SEED,
        build_seconds=round(duration, 2),
        kept_previous=sum(o["outcome"] == "previous" for o in outcomes),
        switched_to_new=sum(o["outcome"] == "new" for o in outcomes),
        most_builds_on_disk=most_builds,
        kills=outcomes,
    )
