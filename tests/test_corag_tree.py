"""CoRAG's decoding strategies one wave at a time: the chains each wave sends and how the tree keeps its beam
(issue 38: the graph-level tests in tests/test_corag_decoding.py see the chosen chain, not every field of
every task or each boundary of the search).

``first_wave``, ``_candidate_tasks``, ``_rollout_tasks`` and ``_tree_step`` are plain functions of the run's
state and context; here they get chain runs written by hand, so each score, tie, cap and boundary is
checked exactly. No graph, no index, no model calls.
"""

from __future__ import annotations

from typing import Any

import pytest

from arag_graph.corag.chain import ChainRun
from arag_graph.corag.context import CoragContext
from arag_graph.corag.graph import (
    _best,
    _candidate_tasks,
    _finished,
    _rollout_tasks,
    _tree_step,
    first_wave,
)
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.run.runtime import Run
from tests.test_corag_nodes import link

QUESTION = "Which director made Inception?"


def tree(**settings: Any) -> CoragContext:
    """A tree search's context; no rollouts unless a test asks for them (the default is the paper's 2)."""
    return CoragContext(**{"decoding": "tree", "sample_temperature": 0.7, "rollouts": 0, **settings})


def path(id: str, *queries: str, wave: int, seq: int = 0, **extra: Any) -> ChainRun:
    """A chain run whose chain searched ``queries`` (its passages named after its ID)."""
    chain = [link(i + 1, q) for i, q in enumerate(queries)]
    run: dict[str, Any] = {
        "id": id, "role": "candidate", "wave": wave, "seq": seq, "parent": id.rpartition(".")[0],
        "chain": chain, "passages": [{"chunk_id": f"{id}:0", "text": "t"}], **extra,
    }  # fmt: skip
    return run  # type: ignore[return-value]


def rollout(parent: str, k: int, penalty: float, *, wave: int, seq: int) -> ChainRun:
    return {"id": f"{parent}.r{k}", "role": "rollout", "parent": parent, "wave": wave, "seq": seq, "penalty": penalty}


def step_of(state: dict[str, Any], ctx: CoragContext, runs: list[ChainRun]) -> dict[str, Any]:
    """One ``_tree_step`` after wave ``state["wave"]``, driven by the offline policy (whose note it adds)."""
    wave = state["wave"]
    run = Run("corag", ctx, None, OfflinePolicy())  # type: ignore[arg-type]
    return _tree_step({"question": QUESTION, **state}, run, runs, [r for r in runs if r.get("wave") == wave])


def fields(tasks: list[dict[str, Any]], *names: str) -> list[tuple[Any, ...]]:
    return [tuple(t[n] for n in names) for t in tasks]


# ---------------------------------------------------------------------------------------------
# The first wave


def test_best_of_n_sends_n_chains_the_first_at_the_runs_temperature() -> None:
    ctx = CoragContext(decoding="best_of_n", n=3, max_steps=4, sample_temperature=0.5)
    tasks = first_wave({"question": QUESTION, "score_logprobs": True}, ctx)
    assert fields(tasks, "id", "role", "wave", "seq", "sample", "temperature") == [
        ("1", "chain", 1, 0, 0, None), ("2", "chain", 1, 1, 1, 0.5), ("3", "chain", 1, 2, 2, 0.5),
    ]  # fmt: skip
    for task in tasks:  # whole chains from the question, each scored as the probe decided
        assert task["question"] == QUESTION and task["parent"] == "" and task["cap"] == 4
        assert task["check_last"] is False and task["score_logprobs"] is True
        assert task["chain"] == [] and task["passages"] == []


@pytest.mark.parametrize(("max_steps", "check_last"), [(1, False), (2, True)])
def test_the_tree_first_searches_the_question_once(max_steps: int, check_last: bool) -> None:
    """One candidate of one step; its check is needed only where a second step may follow."""
    (task,) = first_wave({"question": QUESTION}, tree(max_steps=max_steps, expand=4))
    assert fields([task], "id", "role", "wave", "seq", "sample", "temperature", "cap") == [
        ("1", "candidate", 1, 0, 0, None, 1)
    ]
    assert task["check_last"] is check_last and task["score_logprobs"] is False and task["parent"] == ""


# ---------------------------------------------------------------------------------------------
# Which paths are finished, and the tasks that extend the others


@pytest.mark.parametrize(
    ("stop_reason", "length", "finished"),
    [
        ("sufficient", 1, True),
        ("no_new_passages", 1, True),
        ("loop", 1, True),
        ("recursion_limit", 1, True),
        ("", 2, False),
        ("step_cap", 2, False),  # a candidate's own cap: the next step may extend it
        ("budget", 2, False),
        ("", 3, True),  # at the run's max_steps
        ("", 4, True),
    ],
)
def test_a_path_is_finished_when_it_stopped_by_itself_or_reached_max_steps(
    stop_reason: str, length: int, finished: bool
) -> None:
    run = path("1", *(f"q{i}" for i in range(length)), wave=1, stop_reason=stop_reason)
    assert _finished(run, tree(max_steps=3)) is finished


def test_each_unfinished_path_gets_expand_candidate_steps() -> None:
    ctx = tree(expand=2, max_steps=3)
    short = path("1.1", QUESTION, wave=2)
    done = path("1.2", QUESTION, "nolan", wave=2, stop_reason="sufficient")
    long = path("1.3", QUESTION, "nolan films", wave=2)
    del long["passages"]  # a path without passages extends with none
    tasks = _candidate_tasks({"question": QUESTION}, ctx, [short, done, long], 5)
    assert fields(tasks, "id", "parent", "role", "wave", "seq", "sample", "temperature", "cap", "check_last") == [
        ("1.1.1", "1.1", "candidate", 5, 0, 0, None, 2, True),
        ("1.1.2", "1.1", "candidate", 5, 1, 1, 0.7, 2, True),
        ("1.3.1", "1.3", "candidate", 5, 2, 0, None, 3, False),  # its next step is the last: no check
        ("1.3.2", "1.3", "candidate", 5, 3, 1, 0.7, 3, False),
    ]
    assert tasks[0]["chain"] == short["chain"] and tasks[0]["passages"] == short["passages"]
    assert tasks[2]["chain"] == long["chain"] and tasks[2]["passages"] == []
    assert all(t["question"] == QUESTION for t in tasks)


def test_each_unfinished_candidate_gets_rollouts_of_at_most_two_more_steps() -> None:
    ctx = tree(rollouts=2, max_steps=5)
    near_cap = path("1.1", "a", "b", "c", "d", wave=4, seq=0)
    finished = path("1.2", "a", "e", wave=4, seq=1, stop_reason="loop")
    early = path("1.3", "a", wave=4, seq=2)
    del early["passages"]
    tasks = _rollout_tasks({"question": QUESTION}, ctx, [near_cap, finished, early], 5)
    assert fields(tasks, "id", "parent", "role", "wave", "seq", "sample", "temperature", "cap", "check_last") == [
        ("1.1.r1", "1.1", "rollout", 5, 0, 1, 0.7, 5, False),  # held to max_steps
        ("1.1.r2", "1.1", "rollout", 5, 1, 2, 0.7, 5, False),
        ("1.3.r1", "1.3", "rollout", 5, 2, 1, 0.7, 3, False),  # two steps past its one
        ("1.3.r2", "1.3", "rollout", 5, 3, 2, 0.7, 3, False),
    ]
    assert tasks[0]["chain"] == near_cap["chain"] and tasks[0]["passages"] == near_cap["passages"]
    assert tasks[2]["chain"] == early["chain"] and tasks[2]["passages"] == []


# ---------------------------------------------------------------------------------------------
# The tree's step: score, keep a beam, go on or answer


def second_wave(**penalties: float) -> list[ChainRun]:
    """The question's step (wave 1) and three candidate second steps (wave 2), each with its own query."""
    first = path("1", QUESTION, wave=1, penalty=0.5, stop_reason="step_cap")
    seconds = [
        path(f"1.{i + 1}", QUESTION, query, wave=2, seq=i, penalty=penalties.get(f"c{i + 1}"), stop_reason="step_cap")
        for i, query in enumerate(["nolan films", "inception director", "dream heist film"])
    ]
    for run in seconds:  # a candidate written without a penalty scores 1.0
        if run.get("penalty") is None:
            del run["penalty"]
    return [first, *seconds]


def test_the_beam_keeps_the_least_penalised_candidates_and_expands_them() -> None:
    runs = second_wave(c1=0.4, c2=0.2, c3=0.2)
    update = step_of({"wave": 2, "beam": ["1"]}, tree(beam=2, expand=2, max_steps=3), runs)
    assert update["runs"] == [{"id": "1.1", "score": 0.4}, {"id": "1.2", "score": 0.2}, {"id": "1.3", "score": 0.2}]
    assert update["beam"] == ["1.2", "1.3"] and update["depth"] == 2  # a tie goes to the earlier candidate
    assert update["wave"] == 3
    assert fields(update["tasks"], "id", "wave", "cap", "check_last") == [
        ("1.2.1", 3, 3, False), ("1.2.2", 3, 3, False), ("1.3.1", 3, 3, False), ("1.3.2", 3, 3, False),
    ]  # fmt: skip
    assert "selected_chain" not in update and "chain" not in update


def test_a_candidate_without_a_penalty_scores_worst() -> None:
    update = step_of({"wave": 2, "beam": ["1"]}, tree(beam=1, expand=1, max_steps=3), second_wave(c1=0.9, c3=0.95))
    assert update["runs"][1] == {"id": "1.2", "score": 1.0}
    assert update["beam"] == ["1.1"]


def test_candidates_that_searched_the_same_words_count_once() -> None:
    runs = second_wave(c1=0.1, c2=0.2, c3=0.3)
    runs[2]["chain"][1]["query"] = "Films, NOLAN?"  # 1.2 searched what 1.1 did
    update = step_of({"wave": 2, "beam": ["1"]}, tree(beam=2, expand=1, max_steps=3), runs)
    assert update["beam"] == ["1.1", "1.3"]


@pytest.mark.parametrize(
    ("beam", "remaining", "rolls"), [(2, None, True), (2, 6, True), (2, 5, False), (3, None, False)]
)
def test_rollouts_run_only_when_the_beam_must_choose_and_the_recursion_limit_has_room(
    beam: int, remaining: int | None, rolls: bool
) -> None:
    state: dict[str, Any] = {"wave": 2, "beam": ["1"]}
    if remaining is not None:
        state["remaining_steps"] = remaining
    update = step_of(state, tree(beam=beam, expand=3, rollouts=1, max_steps=4), second_wave(c1=0.3, c2=0.2, c3=0.1))
    if rolls:
        assert update == {"tasks": update["tasks"], "wave": 3}  # nothing scored yet
        assert [t["id"] for t in update["tasks"]] == ["1.1.r1", "1.2.r1", "1.3.r1"]
    else:
        assert [r["id"] for r in update["runs"]] == ["1.1", "1.2", "1.3"] and "score" in update["runs"][0]


def test_rollouts_score_their_candidate_by_their_mean_penalty() -> None:
    """The candidates rolled out score by where they lead; one that had finished keeps its own penalty."""
    runs = second_wave(c1=0.1, c2=0.05, c3=0.6)
    runs[3]["stop_reason"] = "sufficient"  # 1.3 was not rolled out
    runs += [
        rollout("1.2", 1, 0.9, wave=3, seq=0),
        rollout("1.2", 2, 0.8, wave=3, seq=1),
        rollout("1.1", 1, 1 / 3, wave=3, seq=2),
        rollout("1.1", 2, 0.0, wave=3, seq=3),
    ]
    update = step_of({"wave": 3, "beam": ["1"]}, tree(beam=2, expand=2, rollouts=2, max_steps=3), runs)
    # In the order the rollouts name them, then the others of the candidates' wave.
    assert update["runs"] == [{"id": "1.2", "score": 0.85}, {"id": "1.1", "score": 0.1667}, {"id": "1.3", "score": 0.6}]
    assert update["beam"] == ["1.1", "1.3"]
    assert [t["id"] for t in update["tasks"]] == ["1.1.1", "1.1.2"]  # the finished path is not extended
    assert update["wave"] == 4


def final_wave() -> list[ChainRun]:
    """A beam of a finished path (1.3) and an extended one (1.1), whose two candidates reached max_steps."""
    runs = second_wave(c1=0.4, c2=0.5, c3=0.3)
    runs[1]["score"] = 0.4
    runs[3].update(stop_reason="sufficient", score=0.3, warnings=["a structured reply fell back"])
    runs[3]["chain"][1].update(penalty=0.3, scorer="confidence")
    runs += [
        path("1.1.1", QUESTION, "nolan films", "inception 2010", wave=3, seq=0, penalty=0.35, stop_reason="step_cap"),
        path("1.1.2", QUESTION, "nolan films", "heist", wave=3, seq=1, penalty=0.2, stop_detail="the cap"),
    ]
    return runs


def test_a_finished_path_in_the_beam_competes_with_the_new_candidates_and_can_answer() -> None:
    runs = final_wave()
    update = step_of(
        {"wave": 3, "beam": ["1.1", "1.3"], "warnings": ["earlier"]}, tree(beam=2, expand=2, max_steps=3), runs
    )
    assert update["runs"] == [{"id": "1.1.1", "score": 0.35}, {"id": "1.1.2", "score": 0.2}]
    assert update["beam"] == ["1.1.2", "1.3"] and update["depth"] == 3
    assert update["tasks"] == [] and "wave" not in update
    # The best kept path answers: 1.1.2 (0.2) over the finished 1.3 (0.3).
    assert update["selected_chain"] == "1.1.2" and update["chain"] == runs[5]["chain"]
    assert update["passages"] == runs[5]["passages"]
    assert (update["stop_reason"], update["stop_detail"]) == ("step_cap", "the cap")  # none written: the cap
    summaries = update["sampled_chains"]
    assert [s["id"] for s in summaries] == ["1", "1.1", "1.2", "1.3", "1.1.1", "1.1.2"]
    assert [s["selected"] for s in summaries] == [False] * 5 + [True]
    assert summaries[4]["score"] == 0.35 and all("passages" not in s for s in summaries)
    assert update["warnings"] == ["earlier", "chain 1.3: a structured reply fell back"]
    assert update["notes"] and update["notes"][0].startswith("offline policy: tree's chains are not sampled")


def test_the_finished_path_answers_when_it_is_best() -> None:
    runs = final_wave()
    runs[5]["penalty"] = 0.31
    update = step_of({"wave": 3, "beam": ["1.1", "1.3"]}, tree(beam=1, expand=2, max_steps=3), runs)
    assert update["beam"] == ["1.3"] and update["depth"] == 2  # finished: nothing more to expand
    assert update["selected_chain"] == "1.3" and update["stop_reason"] == "sufficient"
    assert update["penalty_scorer"] == "confidence"


def test_an_unfinished_beam_member_is_not_carried_a_second_time() -> None:
    """1.1 was expanded (its candidates stand for it); only finished kept paths compete again."""
    runs = final_wave()
    runs[1]["score"] = 0.01
    update = step_of({"wave": 3, "beam": ["1.1", "1.3"]}, tree(beam=3, expand=2, max_steps=3), runs)
    assert update["beam"] == ["1.1.2", "1.3", "1.1.1"]


@pytest.mark.parametrize(("max_steps", "goes_on"), [(2, False), (3, True)])
def test_the_tree_goes_on_below_max_steps(max_steps: int, goes_on: bool) -> None:
    update = step_of({"wave": 2, "beam": ["1"]}, tree(beam=1, expand=1, max_steps=max_steps), second_wave(c1=0.1))
    assert update["depth"] == 2
    assert bool(update["tasks"]) is goes_on and ("selected_chain" in update) is not goes_on


def test_the_tree_answers_when_every_kept_path_has_stopped() -> None:
    runs = second_wave(c1=0.1, c2=0.2)
    runs[1]["stop_reason"] = runs[2]["stop_reason"] = "no_new_passages"
    update = step_of({"wave": 2, "beam": ["1"]}, tree(beam=2, expand=1, max_steps=5), runs)
    assert update["tasks"] == [] and update["selected_chain"] == "1.1" and update["stop_reason"] == "no_new_passages"


@pytest.mark.parametrize(("remaining", "stops"), [(5, True), (6, False)])
def test_a_recursion_limit_without_room_for_a_wave_ends_the_tree_with_its_best_path(
    remaining: int, stops: bool
) -> None:
    state = {"wave": 2, "beam": ["1"], "remaining_steps": remaining}
    update = step_of(state, tree(beam=1, expand=1, max_steps=3), second_wave(c1=0.4, c2=0.3))
    if not stops:
        assert [t["id"] for t in update["tasks"]] == ["1.2.1"]
        return
    reason = "the tree stopped at depth 2: recursion_limit leaves no room for another step"
    assert update["selected_chain"] == "1.2" and update["tasks"] == []
    assert (update["stop_reason"], update["stop_detail"]) == ("recursion_limit", reason)
    assert update["warnings"] == [reason]


def test_after_rollouts_the_best_score_answers_not_the_best_own_penalty() -> None:
    """1.1's own step looks better, but its rollouts lead nowhere: the tree answers with 1.2."""
    runs = second_wave(c1=0.1, c2=0.5)
    runs += [
        rollout("1.1", 1, 0.9, wave=3, seq=0),
        rollout("1.2", 1, 0.2, wave=3, seq=1),
    ]
    state = {"wave": 3, "beam": ["1"], "remaining_steps": 5}  # no room for another wave: answer now
    update = step_of(state, tree(beam=2, expand=2, rollouts=1, max_steps=3), runs)
    assert update["beam"] == ["1.2", "1.1"] and update["selected_chain"] == "1.2"


def test_a_state_without_a_wave_is_read_as_after_the_first() -> None:
    """A thread edited in Studio may lack the wave; the first wave's candidate is then scored and expanded."""
    first = path("1", QUESTION, wave=1, penalty=0.4, stop_reason="step_cap")
    run = Run("corag", tree(beam=1, expand=1, max_steps=3), None, OfflinePolicy())  # type: ignore[arg-type]
    update = _tree_step({"question": QUESTION, "beam": []}, run, [first], [first])
    assert update["runs"] == [{"id": "1", "score": 0.4}] and update["wave"] == 2
    assert [(t["id"], t["wave"]) for t in update["tasks"]] == [("1.1", 2)]


def test_a_step_without_its_query_is_an_empty_search() -> None:
    """A step edited without its query neither breaks the beam nor differs from an empty query."""
    runs = second_wave(c1=0.1, c2=0.2, c3=0.3)
    del runs[1]["chain"][1]["query"]
    runs[2]["chain"][1]["query"] = "?"  # no words: the same empty search as 1.1's
    update = step_of({"wave": 2, "beam": ["1"]}, tree(beam=2, expand=1, max_steps=3), runs)
    assert update["beam"] == ["1.1", "1.3"]


def test_best_of_n_answers_with_the_least_penalised_chain_the_earlier_on_a_tie() -> None:
    """A chain without a penalty counts as 1.0, as :func:`~arag_graph.corag.chain.chain_penalty` scores it."""
    chains = [path(str(i + 1), QUESTION, wave=1, seq=i, role="chain") for i in range(4)]
    chains[0]["penalty"], chains[1]["penalty"], chains[2]["penalty"] = 0.6, 0.3, 0.3
    assert _best(list(reversed(chains)))["id"] == "2"
    unscored, worst = chains[3], {**chains[2], "id": "5", "seq": 5, "penalty": 1.0}
    assert _best([worst, unscored])["id"] == "4"  # 1.0 each: the earlier one
