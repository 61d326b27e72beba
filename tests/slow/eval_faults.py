"""Kill a real ``arag eval`` process at random moments and check that a rerun loses and repeats nothing.

Shared by ``tests/slow/test_eval_kill.py`` (a few trials, asserted) and ``bench/bench_eval_kill.py``
(more trials, figures written to ``bench/results/reliability-eval.md``).

One trial: start ``arag eval`` with fixed arguments in a fresh output directory, SIGKILL it, start it
again with the same arguments, and so on for one to three kills; then let it finish. One kill in four
comes after a random (seeded) delay within the start-up (imports, index load, file recovery); the
others come as soon as a random (seeded) number of predictions is on disk, so that they land mid-run
however fast or slow the shared machine is that day (a kill timed in seconds could land before the
first prediction on a loaded machine). The result is compared with an uninterrupted run of the same arguments: the same
files, the same question IDs in each, every prediction equal (the offline policy is deterministic),
metrics equal, no duplicate line, no torn line, and the same summary.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes import seed_encoder

REPO = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = ("graph", "setting_key", "n", "errors", "contain_acc", "exact_match", "f1", "llm_acc", "steps")


@dataclass
class Kill:
    """One SIGKILL: when it was sent and how far the run had got."""

    after_s: float
    records_on_disk: int
    """Prediction lines on disk just before the kill (0: still starting or loading the index)."""
    landed: bool
    """False when the process had already finished before the kill moment."""


@dataclass
class Trial:
    number: int
    kills: list[Kill] = field(default_factory=list)
    final_exit: int = -1
    records_expected: int = 0
    records_found: int = 0
    records_lost: int = 0
    duplicates: int = 0
    torn_lines: int = 0
    predictions_differing: int = 0
    summary_equal: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.final_exit == 0
            and self.records_lost == 0
            and self.duplicates == 0
            and self.torn_lines == 0
            and self.predictions_differing == 0
            and self.records_found == self.records_expected
            and self.summary_equal
        )


@dataclass
class Campaign:
    command: list[str]
    seed: int
    reference_seconds: float
    startup_seconds: float
    """Seconds from start to the first prediction on disk in the uninterrupted run."""
    trials: list[Trial]

    def figures(self) -> dict[str, Any]:
        kills = [k for t in self.trials for k in t.kills]
        return {
            "trials": len(self.trials),
            "kills_sent": len(kills),
            "kills_landed": sum(k.landed for k in kills),
            "kills_during_startup": sum(k.landed and k.records_on_disk == 0 for k in kills),
            "kills_mid_run": sum(k.landed and k.records_on_disk > 0 for k in kills),
            "records_expected_per_trial": self.trials[0].records_expected if self.trials else 0,
            "records_lost": sum(t.records_lost for t in self.trials),
            "duplicates": sum(t.duplicates for t in self.trials),
            "torn_lines": sum(t.torn_lines for t in self.trials),
            "predictions_differing": sum(t.predictions_differing for t in self.trials),
            "trials_ok": sum(t.ok for t in self.trials),
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "seed": self.seed,
            "reference_seconds": round(self.reference_seconds, 2),
            "startup_seconds": round(self.startup_seconds, 2),
            "figures": self.figures(),
            "trials": [asdict(t) | {"ok": t.ok} for t in self.trials],
        }


def eval_command(questions: Path, index: Path, out: Path, extra: Sequence[str] = ()) -> list[str]:
    """The ``arag eval`` command of every run (only ``--out`` differs between trials)."""
    return [
        sys.executable,
        "-m",
        "arag_graph.cli.main",
        "eval",
        "--dataset",
        str(questions),
        "--index",
        str(index),
        "--model",
        "offline",
        "--out",
        str(out),
        "--quiet",
        *extra,
    ]


def child_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "API_KEY" not in k}
    env.update(
        {
            "ARAG_CACHE_DIR": str(cache),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
            "LANGSMITH_TRACING": "false",
            "PYTHONPATH": str(REPO),
        }
    )
    return env


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )


def _lines_on_disk(out: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in (out / "predictions").glob("*.jsonl") if path.is_file())


def run_to_end(command: list[str], env: dict[str, str], timeout: float = 900) -> tuple[int, str]:
    proc = _start(command, env)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
        return -1, "timed out"
    return proc.returncode, err.decode("utf-8", errors="replace")


def timed_reference(command: list[str], env: dict[str, str], out: Path, timeout: float = 900) -> tuple[float, float]:
    """Run to the end, watching the predictions: (seconds to the first prediction, seconds in all)."""
    proc = _start(command, env)
    started = time.perf_counter()
    first: float | None = None
    while proc.poll() is None:
        if first is None and (out / "predictions").exists() and _lines_on_disk(out) > 0:
            first = time.perf_counter() - started
        if time.perf_counter() - started > timeout:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RuntimeError("the uninterrupted run timed out")
        time.sleep(0.05)
    total = time.perf_counter() - started
    err = proc.stderr.read().decode("utf-8", errors="replace") if proc.stderr is not None else ""
    if proc.returncode != 0:
        raise RuntimeError(f"the uninterrupted run failed ({proc.returncode}): {err[-2000:]}")
    return (first if first is not None else total), total


def kill_after(command: list[str], env: dict[str, str], delay: float, out: Path) -> Kill:
    """Start the run and SIGKILL it ``delay`` seconds later (unless it has finished by then)."""
    proc = _start(command, env)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        records = _lines_on_disk(out) if (out / "predictions").exists() else 0
        os.kill(proc.pid, signal.SIGKILL)  # only this process, which this function started
        proc.wait()
        return Kill(round(delay, 2), records, landed=True)
    finally:
        if proc.stderr is not None:
            proc.stderr.close()
    return Kill(round(delay, 2), _lines_on_disk(out), landed=False)


def kill_at_records(command: list[str], env: dict[str, str], records: int, out: Path, timeout: float = 900) -> Kill:
    """Start the run and SIGKILL it once ``records`` prediction lines are on disk (unless it ends first)."""
    proc = _start(command, env)
    started = time.perf_counter()
    try:
        while proc.poll() is None:
            on_disk = _lines_on_disk(out) if (out / "predictions").exists() else 0
            if on_disk >= records or time.perf_counter() - started > timeout:
                os.kill(proc.pid, signal.SIGKILL)  # only this process, which this function started
                proc.wait()
                return Kill(round(time.perf_counter() - started, 2), on_disk, landed=True)
            time.sleep(0.01)
    finally:
        if proc.stderr is not None:
            proc.stderr.close()
    return Kill(round(time.perf_counter() - started, 2), _lines_on_disk(out), landed=False)


def read_predictions(out: Path) -> tuple[dict[str, dict[str, dict[str, Any]]], int, int]:
    """``{file: {question_id: record}}``, duplicate lines and unparsable (torn) lines."""
    files: dict[str, dict[str, dict[str, Any]]] = {}
    duplicates = torn = 0
    for path in sorted((out / "predictions").glob("*.jsonl")):
        records: dict[str, dict[str, Any]] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                torn += 1
                continue
            if record["question_id"] in records:
                duplicates += 1
            records[record["question_id"]] = record
        files[path.name] = records
    return files, duplicates, torn


def _summary(out: Path) -> list[dict[str, Any]]:
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return [{k: row.get(k) for k in SUMMARY_KEYS} for row in rows]


def _same_metrics(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if set(a) != set(b):
        return False
    for key, value in a.items():
        other = b[key]
        if isinstance(value, float) and isinstance(other, float):
            if abs(value - other) > 1e-6:
                return False
        elif value != other:
            return False
    return True


def compare(trial: Trial, reference: Path, out: Path) -> None:
    expected, _, _ = read_predictions(reference)
    found, trial.duplicates, trial.torn_lines = read_predictions(out)
    trial.records_expected = sum(len(r) for r in expected.values())
    trial.records_found = sum(len(r) for r in found.values())
    if set(found) != set(expected):
        trial.problems.append(f"files differ: {sorted(set(found) ^ set(expected))}")
    for name, records in expected.items():
        mine = found.get(name, {})
        trial.records_lost += len(set(records) - set(mine))
        for qid, record in records.items():
            if qid not in mine:
                continue
            if mine[qid]["prediction"] != record["prediction"] or not _same_metrics(
                mine[qid]["metrics"], record["metrics"]
            ):
                trial.predictions_differing += 1
                trial.problems.append(f"{name} {qid}: prediction or metrics differ")
    trial.summary_equal = _summary(out) == _summary(reference)


def run_campaign(
    *,
    questions: Path,
    index: Path,
    workdir: Path,
    trials: int,
    seed: int,
    extra: Sequence[str],
    max_kills: int = 3,
    encoder: Path | None = None,
) -> Campaign:
    """The reference run, then ``trials`` trials of one to ``max_kills`` kills each.

    ``encoder``: the exported encoder file the runs' cache starts with (:func:`tests.fakes.seed_encoder`),
    as it does when the index was built with the same cache (bench/bench_eval_kill.py); without it the
    reference run's start-up would include the one-off export, and the kills drawn within the start-up
    would be drawn within that.
    """
    if encoder is not None:
        seed_encoder(workdir / "cache", encoder)
    env = child_env(workdir / "cache")
    reference = workdir / "reference"
    startup, reference_seconds = timed_reference(eval_command(questions, index, reference, extra), env, reference)
    expected = _lines_on_disk(reference)
    rng = random.Random(seed)
    done: list[Trial] = []
    for number in range(1, trials + 1):
        out = workdir / f"trial-{number}"
        command = eval_command(questions, index, out, extra)
        trial = Trial(number)
        for kill_number in range(rng.randint(1, max_kills)):
            # One kill in four during start-up (imports, index load, file recovery), the others
            # while questions are being answered and written, after a drawn number of the
            # predictions not yet on disk (one draw each way, whatever the timing, so the seed
            # alone decides every later draw).
            during_startup, share = rng.random() < 0.25, rng.random()
            if during_startup:
                delay = (0.1 + 0.9 * share) * startup
                kill = kill_after(command, env, delay, out)
                while kill_number == 0 and not kill.landed:
                    # A trial must interrupt something: when the first run beat its kill (shared
                    # cores make durations vary), start the trial again from nothing, sooner.
                    shutil.rmtree(out)
                    delay /= 2
                    kill = kill_after(command, env, delay, out)
            else:
                have = _lines_on_disk(out) if (out / "predictions").exists() else 0
                if have >= expected - 1:
                    continue  # nothing is left to interrupt mid-run: the final run finishes it
                kill = kill_at_records(command, env, have + 1 + int(share * (expected - 1 - have)), out)
            trial.kills.append(kill)
        trial.final_exit, err = run_to_end(command, env)
        if trial.final_exit != 0:
            trial.problems.append(f"final run exited {trial.final_exit}: {err[-500:]}")
        else:
            compare(trial, reference, out)
        done.append(trial)
    return Campaign(eval_command(questions, index, workdir / "trial-N", extra), seed, reference_seconds, startup, done)
