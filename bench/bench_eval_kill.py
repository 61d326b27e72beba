"""Fault injection for ``arag eval``: SIGKILL at random moments, rerun, compare with an uninterrupted run.

Each trial starts ``arag eval`` (offline policy, a step-cap sweep over two graphs on the first
questions of HotpotQA-100) in a fresh output directory, kills it with SIGKILL after a random delay
(seeded) one to three times, rerunning it with the same arguments after each kill, then lets it
finish. The final predictions must equal those of an uninterrupted run: same files, same question
IDs, same answers, citations, trajectories and metrics, no duplicate or torn line, same summary.
The trial logic is shared with ``tests/slow/test_eval_kill.py`` (tests/slow/eval_faults.py).

    python bench/bench_eval_kill.py                      # 10 trials, results in bench/results/reliability-eval.*
    python bench/bench_eval_kill.py --trials 20 --seed 7
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

from benchenv import DATA, RESULTS

from tests.slow.eval_faults import Campaign, run_campaign

HOTPOT = DATA / "hotpotqa-100"


def slice_files(folder: Path, n: int) -> tuple[Path, Path]:
    """The first ``n`` HotpotQA-100 questions and the passages of their contexts."""
    questions = json.loads((HOTPOT / "questions.json").read_text(encoding="utf-8"))[:n]
    corpus = json.loads((HOTPOT / "corpus.json").read_text(encoding="utf-8"))
    titles = {title for q in questions for title, _ in q["context"]}
    (folder / "corpus.json").write_text(
        json.dumps({t: s for t, s in corpus.items() if t in titles}, ensure_ascii=False), encoding="utf-8"
    )
    (folder / "questions.json").write_text(json.dumps(questions, ensure_ascii=False), encoding="utf-8")
    return folder / "corpus.json", folder / "questions.json"


def markdown(campaign: Campaign, command: str, args: argparse.Namespace, seconds: float) -> str:
    f = campaign.figures()
    lines = [
        "# Reliability: killing `arag eval`",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; {seconds:.0f} s in all. Shared cores: durations vary, figures do not.",
        "",
        f"Each trial runs `{' '.join(campaign.command)}` (questions: the first {args.questions} of "
        f"HotpotQA-100 with the passages of their contexts, index built once beforehand) in a fresh output "
        f"directory, sends SIGKILL (seed {campaign.seed}; one kill in four after a random delay during start-up, "
        f"before the uninterrupted run's first prediction at {campaign.startup_seconds:.1f} s, the others once a "
        "random number of the predictions still to come is on disk) one to three times, rerunning the same command "
        "after each kill, and then lets it finish. The final predictions are compared with the uninterrupted "
        "run's (the offline policy is deterministic, so every prediction must be equal).",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| trials run | {f['trials']} |",
        f"| SIGKILLs sent | {f['kills_sent']} |",
        f"| ... that hit a running process | {f['kills_landed']} |",
        f"| ... before any prediction was on disk (start-up, index load) | {f['kills_during_startup']} |",
        f"| ... with predictions on disk (mid-run) | {f['kills_mid_run']} |",
        f"| predictions expected per trial | {f['records_expected_per_trial']} |",
        f"| **records lost** | **{f['records_lost']}** |",
        f"| duplicate records | {f['duplicates']} |",
        f"| torn lines left | {f['torn_lines']} |",
        f"| predictions or metrics differing from the uninterrupted run | {f['predictions_differing']} |",
        f"| trials whose final result equals the uninterrupted run | {f['trials_ok']} of {f['trials']} |",
        "",
        "| trial | kills: after s (predictions on disk, or finished first) | final exit | records | lost | "
        "duplicates | equal |",
        "|---:|---|---:|---:|---:|---:|---|",
    ]
    for t in campaign.trials:
        kills = ", ".join(
            f"{k.after_s:.1f} s ({k.records_on_disk})" if k.landed else f"{k.after_s:.1f} s (finished)" for k in t.kills
        )
        lines.append(
            f"| {t.number} | {kills} | {t.final_exit} | {t.records_found}/{t.records_expected} | "
            f"{t.records_lost} | {t.duplicates} | {'yes' if t.ok else 'NO'} |"
        )
    problems = [p for t in campaign.trials for p in t.problems]
    lines += ["", "Problems: " + ("; ".join(problems) if problems else "none."), ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=20260203)
    parser.add_argument("--questions", type=int, default=4, help="first N HotpotQA-100 questions (default 4)")
    parser.add_argument("--out", default=str(RESULTS / "reliability-eval"), help="results path without suffix")
    args = parser.parse_args()
    if not (HOTPOT / "questions.json").exists():
        print(f"no HotpotQA-100 at {HOTPOT}", file=sys.stderr)
        return 2
    command = "python bench/bench_eval_kill.py" + "".join(
        f" --{k} {shlex.quote(str(v))}" for k, v in (("trials", args.trials), ("seed", args.seed)) if v is not None
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="arag-eval-kill-") as tmp:
        work = Path(tmp)
        corpus, questions = slice_files(work, args.questions)
        os.environ["ARAG_CACHE_DIR"] = str(work / "cache")
        from arag_graph.index.build import build_index

        build_index(corpus, work / "index", progress=False)
        extra = ["--graphs", "arag,naive_rag", "--max-steps", "1,3", "--limit", str(args.questions), "--workers", "2"]
        campaign = run_campaign(
            questions=questions, index=work / "index", workdir=work, trials=args.trials, seed=args.seed, extra=extra
        )
        campaign.command = ["arag", *(part.replace(tmp, "$TMP") for part in campaign.command[3:])]
    seconds = time.perf_counter() - started
    out = Path(args.out)
    out.with_suffix(".json").write_text(
        json.dumps({"command": command, "seconds": round(seconds, 1), **campaign.as_dict()}, indent=2) + "\n",
        encoding="utf-8",
    )
    out.with_suffix(".md").write_text(markdown(campaign, command, args, seconds), encoding="utf-8")
    figures = campaign.figures()
    print(json.dumps(figures))
    return 0 if figures["trials_ok"] == figures["trials"] else 1


if __name__ == "__main__":
    sys.exit(main())
