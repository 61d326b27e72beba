"""Issue 7's evaluation fault injection: SIGKILL ``arag eval`` at random moments, rerun, lose nothing.

The trials are in :mod:`tests.slow.eval_faults`; ``bench/bench_eval_kill.py`` runs more of them and
records the figures in ``bench/results/reliability-eval.md``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from arag_graph.index.hierarchical import HierarchicalIndex
from tests.reliability import record
from tests.slow.eval_faults import run_campaign

pytestmark = [pytest.mark.slow, pytest.mark.integration]

# Two trials, three kills: mid-run in the first (at the first prediction on disk), mid-run (at the
# second) then during start-up in the second. This is what the seed draws; mid-run kills wait for a
# number of predictions, not a time, so they land mid-run on a machine of any speed. It covers both
# kinds of kill in about a third of the CI time five trials took; bench/bench_eval_kill.py runs ten
# trials and more kills per trial.
TRIALS = 2
MAX_KILLS = 2
SEED = 20260204


def test_killed_evaluations_resume_to_the_uninterrupted_result(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, exported_encoder: Path
) -> None:
    _, questions = hotpot_slice
    index = tmp_path / "index"
    shutil.copytree(hotpot_index.path, index)  # a kill while the index is open must not touch the shared one
    extra = ["--graphs", "arag,naive_rag", "--max-steps", "1,3", "--limit", "4", "--workers", "2"]
    campaign = run_campaign(
        questions=questions,
        index=index,
        workdir=tmp_path,
        trials=TRIALS,
        seed=SEED,
        extra=extra,
        max_kills=MAX_KILLS,
        encoder=exported_encoder,
    )
    figures = campaign.figures()
    report = json.dumps(campaign.as_dict(), indent=1)  # the whole campaign, when an assertion fails

    assert figures["trials"] == TRIALS, report
    assert figures["records_expected_per_trial"] == 12, report  # (arag at 2 caps + naive_rag) x 4 questions
    problems = [p for t in campaign.trials for p in t.problems]
    assert problems == [], report
    assert figures["records_lost"] == 0, report
    assert figures["duplicates"] == 0 and figures["torn_lines"] == 0, report
    assert figures["predictions_differing"] == 0, report
    assert figures["trials_ok"] == TRIALS, report
    assert all(t.records_found == 12 and t.summary_equal for t in campaign.trials), report
    # The kills did interrupt work: at least one landed after some predictions were on disk.
    assert figures["kills_landed"] >= TRIALS and figures["kills_mid_run"] >= 1, report
    assert figures["kills_sent"] == 3, report  # the seed's draw above: the campaign is the one described
    record(
        "eval_kills",
        "arag eval SIGKILLed and rerun",
        trials=figures["trials"],
        faults=figures["kills_landed"],
        survived=figures["kills_landed"],  # every trial ended equal to the uninterrupted run (asserted above)
        inputs=figures["records_expected_per_trial"],
        lost=figures["records_lost"],
        kills_mid_run=figures["kills_mid_run"],
        kills_during_startup=figures["kills_during_startup"],
        kills_after_finish=figures["kills_sent"] - figures["kills_landed"],
        seed=SEED,
    )
