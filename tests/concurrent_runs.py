"""What concurrent runs against one index must show, for the in-process and the server tests alike.

Two kinds of run, both deterministic so that any interference shows:

- the offline policy on the sample questions: a run's read set, trajectory and answer must equal
  those of the same question run alone, and its read set may hold only chunks that its own tool
  calls returned (each trajectory step records the chunk IDs it returned);
- a model behind the OpenAI stand-in (:func:`shared_chunk_model`) that has *every* run read one
  shared chunk plus a chunk of its own, then ask for the shared chunk again, then answer. A run
  must get the shared chunk's text on its first read (another run having read it does not count)
  and the "already read" notice on its second (its own earlier read does). So the read-chunk set is
  private to a run in both directions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import Reply, text, tool_call

RUN_TAG = re.compile(r"^\[run (\d+)\]")


def returned_chunks(out: dict[str, Any]) -> set[str]:
    """Chunk IDs the run's own tool calls returned."""
    return {cid for step in out.get("trajectory") or [] for cid in step.get("chunk_ids") or []}


def check_own_reads(out: dict[str, Any], where: str) -> None:
    assert out.get("error") is None, f"{where}: {out.get('error')}"
    read = set(out.get("read_chunks") or [])
    assert read, f"{where}: the run read nothing"
    foreign = read - returned_chunks(out)
    assert not foreign, f"{where}: read chunks its own tool calls never returned: {sorted(foreign)}"


def fingerprint(out: dict[str, Any]) -> dict[str, Any]:
    """What a deterministic run must reproduce whatever runs beside it."""
    return {
        "answer": out.get("answer"),
        "citations": list(out.get("citations") or []),
        "read_chunks": sorted(out.get("read_chunks") or []),
        "trajectory": [
            (s.get("tool"), s.get("args"), s.get("tokens"), list(s.get("chunk_ids") or []))
            for s in out.get("trajectory") or []
        ],
        "steps": out.get("steps"),
    }


def tagged_question(run: int) -> str:
    return f"[run {run}] Which chunk belongs to this run?"


def shared_chunk_model(shared: str, own: Sequence[str]) -> Callable[[RecordedRequest], Reply]:
    """A stand-in responder: run N reads ``[shared, own[N]]``, then ``[shared]`` again, then answers.

    Stateless: the step is the number of tool results already in the request, the run comes from
    the question's ``[run N]`` tag, so concurrent requests of different runs cannot mix it up.
    """

    def reply(request: RecordedRequest) -> Reply:
        messages = (request.json() or {}).get("messages") or []
        question = next((m.get("content") for m in messages if m.get("role") == "user"), "") or ""
        match = RUN_TAG.match(str(question))
        if match is None:
            return text("Answer: no run tag")
        run = int(match.group(1))
        done = sum(1 for m in messages if m.get("role") == "tool")
        if done == 0:
            return tool_call("chunk_read", {"chunk_ids": [shared, own[run]]})
        if done == 1:
            return tool_call("chunk_read", {"chunk_ids": [shared]})
        return text(f"Run {run} read its chunk.\nAnswer: run {run} [{own[run]}]")

    return reply


def check_shared_chunk_run(out: dict[str, Any], run: int, shared: str, own: Sequence[str]) -> None:
    where = f"run {run}"
    check_own_reads(out, where)
    first, second = out["trajectory"]
    assert first["chunk_ids"] == [shared, own[run]] and first["tokens"] > 0, f"{where}: {first}"
    assert second["chunk_ids"] == [shared] and second["tokens"] == 0, f"{where}: shared chunk not 'already read'"
    assert sorted(out["read_chunks"]) == sorted({shared, own[run]}), f"{where}: {out['read_chunks']}"
    assert out["answer"] == f"run {run}" and out["citations"] == [own[run]], f"{where}: {out['answer']!r}"
