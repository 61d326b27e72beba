"""A served graph never sends the operator's key where a caller points it (issue: key theft / SSRF).

A real ``langgraph dev`` runs with a sentinel ``OPENAI_API_KEY`` and an operator allowlist: one
allowed endpoint (a recording OpenAI stand-in) and models ``gpt-4o-mini`` and ``offline``. A second
recording server plays the attacker's host. Remote callers (``langgraph_sdk``) then ask for every
combination a hostile caller would try; the attacker's host must see zero requests, each refused
run must reach the client as its one-line reason, and the allowed endpoint must still work.

It also holds one run on a model server that accepts and does not answer until the test releases
it, and checks that another run on the same server finishes meanwhile (if runs waited for each
other, that run could never finish: the test fails by its timeout, whatever the machine's speed),
then that the held run, dropped, ends with a one-line error.
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
from tests.stubs.openai_server import OpenAIStubServer, disconnect, text

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SENTINEL_KEY = sentinel_key("operator-key")
RELEASE_HUNG = threading.Event()


def held_until(release: threading.Event) -> Any:
    """A responder that holds each request until ``release`` is set, then drops the connection."""

    def responder(request: Any) -> Any:
        release.wait(900)  # a bound only so a failed test leaves no thread behind for ever
        return disconnect()

    return responder


QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory, sample_index: Any
) -> Iterator[tuple[DevServer, OpenAIStubServer, OpenAIStubServer, OpenAIStubServer]]:
    with OpenAIStubServer() as allowed, OpenAIStubServer() as attacker, OpenAIStubServer() as hung:
        allowed.script([], then=text("Answer: Stephen King"))
        attacker.script([], then=text("Answer: pwned"))
        hung.script([], then=held_until(RELEASE_HUNG))
        env = {
            "OPENAI_API_KEY": SENTINEL_KEY,
            "ARAG_ALLOWED_BASE_URLS": f"{allowed.url},{hung.url}",
            "ARAG_ALLOWED_MODELS": "gpt-4o-mini",
            "ARAG_INDEX": str(sample_index.path),  # the operator's index, built already
            # longer than any test here: the held run ends when the test releases it, not by the clock
            "ARAG_MODEL_TIMEOUT": "3600",
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
    """One run is held on a model server until this test releases it; another run on the same
    server must finish meanwhile. No clock decides the order: the held run cannot end first."""
    server, _, _, hung = servers
    client = server.client()
    results: dict[str, Any] = {}

    def hung_run() -> None:
        thread = client.threads.create()
        results["hung"] = client.runs.wait(
            thread["thread_id"], "naive_rag", input={"question": QUESTION},
            context={"model": "gpt-4o-mini", "base_url": hung.url},
        )  # fmt: skip

    with server.log_on_failure():
        worker = threading.Thread(target=hung_run)
        worker.start()
        try:
            deadline = time.monotonic() + 120
            while not hung.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            assert hung.requests, "the held run never reached its model server"
            thread = client.threads.create()
            quick = client.runs.wait(
                thread["thread_id"], "arag", input={"question": QUESTION}, context={"max_steps": 2}
            )
            assert quick.get("error") is None and quick["answer"]  # type: ignore[union-attr]
            assert "hung" not in results and worker.is_alive()  # still held: it cannot end before release
        finally:
            RELEASE_HUNG.set()
        worker.join(timeout=300)
        assert not worker.is_alive(), "the held run never ended after its model server dropped it"
        error = results["hung"].get("error") or ""
        assert error and "\n" not in error, results["hung"]
    record("served_security", "a hung model run beside an offline run", trials=2, faults=1, survived=1)
