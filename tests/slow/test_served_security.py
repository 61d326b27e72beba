"""A served graph never sends the operator's key where a caller points it (issue: key theft / SSRF).

A real ``langgraph dev`` runs with a sentinel ``OPENAI_API_KEY`` and an operator allowlist: one
allowed endpoint (a recording OpenAI stand-in) and models ``gpt-4o-mini`` and ``offline``. A second
recording server plays the attacker's host. Remote callers (``langgraph_sdk``) then ask for every
combination a hostile caller would try; the attacker's host must see zero requests, each refused
run must reach the client as its one-line reason, and the allowed endpoint must still work.

It also holds one run on a model server that accepts and never answers, and checks that another
run on the same server finishes meanwhile, and that the hung one ends with a one-line timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes import sentinel_key
from tests.reliability import record
from tests.slow.devserver import DevServer, running_dev_server
from tests.stubs.openai_server import OpenAIStubServer, stall, text

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SENTINEL_KEY = sentinel_key("operator-key")
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, sample_index: Any
) -> Iterator[tuple[DevServer, OpenAIStubServer, OpenAIStubServer, OpenAIStubServer]]:
    with OpenAIStubServer() as allowed, OpenAIStubServer() as attacker, OpenAIStubServer() as hung:
        allowed.script([], then=text("Answer: Stephen King"))
        attacker.script([], then=text("Answer: pwned"))
        hung.script([], then=stall(600))
        env = {
            "OPENAI_API_KEY": SENTINEL_KEY,
            "ARAG_ALLOWED_BASE_URLS": f"{allowed.url},{hung.url}",
            "ARAG_ALLOWED_MODELS": "gpt-4o-mini",
            "ARAG_INDEX": str(sample_index.path),  # the operator's index, built already
            "ARAG_MODEL_TIMEOUT": "8",
            "ARAG_MODEL_RETRIES": "0",
        }
        with running_dev_server(tmp_path_factory.mktemp("langgraph-dev-security"), env) as server:
            yield server, allowed, attacker, hung


def refusal(server: DevServer, context: dict[str, Any], graph: str = "arag") -> str:
    """Run ``graph`` with ``context`` as a remote caller; return the error the client receives."""
    client = server.client()
    thread = client.threads.create()
    try:
        out: Any = client.runs.wait(thread["thread_id"], graph, input={"question": QUESTION}, context=context)
    except Exception as exc:  # the SDK raises the run's error, with the message the server sent
        message = str(exc)
    else:
        pytest.fail(f"the run was not refused: {out}")
    assert "\n" not in message.strip() and "internal error" not in message.lower(), message
    assert message.startswith(("RunRefused: ", "ContextError: ")), message
    return message


HOSTILE = [
    ({"model": "gpt-4o-mini", "base_url": "ATTACKER"}, "base_url"),
    ({"base_url": "ATTACKER"}, "base_url"),
    ({"model": "gpt-4o-mini", "base_url": "ATTACKER/"}, "base_url"),
    ({"model": "gpt-4o-mini", "base_url": "http://user:pass@127.0.0.1:1/v1"}, "credentials"),
    ({"model": "anthropic:claude-sonnet-4-5"}, "not allowed"),
    ({"model": "gpt-4o"}, "not allowed"),
    ({"index_path": "/etc"}, "index"),
    ({"index_path": "../../../../etc"}, "index"),
    ({"top_k": 10_000}, "top_k"),
    ({"temperature": "nan"}, "temperature"),
]


@pytest.mark.parametrize("graph", ["arag", "naive_rag", "corag"])
def test_no_caller_setting_sends_the_key_elsewhere(servers: Any, graph: str) -> None:
    server, _, attacker, _ = servers
    with server.log_on_failure():
        for hostile, fragment in HOSTILE:
            context = {k: v.replace("ATTACKER", attacker.url) if isinstance(v, str) else v for k, v in hostile.items()}
            assert fragment in refusal(server, context, graph), context
        assert attacker.requests == [], "a request reached a host the operator did not allow"
        assert SENTINEL_KEY not in server.log_tail(200_000)
    n = len(HOSTILE)
    record("served_security", f"{graph}: hostile run contexts", trials=n, faults=n, survived=n)


def test_the_allowed_endpoint_gets_the_key_and_answers(servers: Any) -> None:
    server, allowed, attacker, _ = servers
    client = server.client()
    before = len(allowed.completions)
    with server.log_on_failure():
        thread = client.threads.create()
        out: Any = client.runs.wait(
            thread["thread_id"],
            "naive_rag",
            input={"question": QUESTION},
            context={"model": "gpt-4o-mini", "base_url": allowed.url},
        )
        assert out.get("error") is None and out["answer"] == "Stephen King", out
    sent = allowed.completions[before:]
    assert sent and all(r.headers.get("authorization") == f"Bearer {SENTINEL_KEY}" for r in sent)
    assert attacker.requests == []
    record("served_security", "the allowed endpoint answers with the operator's key", trials=1)


def test_a_hung_model_run_does_not_hold_other_runs(servers: Any) -> None:
    """One run waits on a server that never answers; another run on the same server finishes first."""
    server, _, _, hung = servers
    client = server.client()
    results: dict[str, Any] = {}

    def hung_run() -> None:
        thread = client.threads.create()
        results["hung"] = client.runs.wait(
            thread["thread_id"], "naive_rag", input={"question": QUESTION},
            context={"model": "gpt-4o-mini", "base_url": hung.url},
        )  # fmt: skip
        results["hung_done"] = time.monotonic()

    with server.log_on_failure():
        worker = threading.Thread(target=hung_run)
        worker.start()
        deadline = time.monotonic() + 60
        while not hung.requests and time.monotonic() < deadline:
            time.sleep(0.1)
        assert hung.requests, "the hung run never reached its model server"
        thread = client.threads.create()
        quick = client.runs.wait(thread["thread_id"], "arag", input={"question": QUESTION}, context={"max_steps": 2})
        quick_done = time.monotonic()
        assert quick.get("error") is None and quick["answer"]  # type: ignore[union-attr]
        worker.join(timeout=120)
        assert not worker.is_alive(), "the hung run never ended"
        assert quick_done < results["hung_done"], "the offline run waited for the hung one"
        error = results["hung"].get("error") or ""
        assert "timed out" in error and "\n" not in error, results["hung"]
    record("served_security", "a hung model run beside an offline run", trials=2, faults=1, survived=1)
