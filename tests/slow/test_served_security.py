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

The endpoint rule of issue 22 on the same server: an index planted under the operator's index root
whose manifest names the attacker's Chroma server (a recorder of ``Authorization`` headers) must
not get the operator's Chroma credentials, and a model endpoint that echoes the key back must not
reach the caller's answer, stream or thread state with it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import sentinel_key
from tests.reliability import record
from tests.slow.devserver import DevServer, running_dev_server
from tests.stubs._http import RecordedRequest
from tests.stubs.chroma_recorder import CHROMA_TOKEN_PROVIDER, ChromaRecorder
from tests.stubs.openai_server import OpenAIStubServer, Reply, disconnect, text
from tests.test_endpoint_rule import plant_chroma_index

pytestmark = [pytest.mark.slow, pytest.mark.integration]

SENTINEL_KEY = sentinel_key("operator-key")
CHROMA_SECRET = "chroma-operator-token-served-5e2b"
RELEASE_HUNG = threading.Event()


def held_until(release: threading.Event) -> Any:
    """A responder that holds each request until ``release`` is set, then drops the connection."""

    def responder(request: Any) -> Any:
        release.wait(900)  # a bound only so a failed test leaves no thread behind for ever
        return disconnect()

    return responder


QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


def echo_key(request: RecordedRequest) -> Reply:
    """A proxy quoting the request's Authorization header back in its reply."""
    header = request.headers.get("authorization", "")
    return text(f"Answer: your header was {header}")


@pytest.fixture(scope="module")
def hosts(
    tmp_path_factory: pytest.TempPathFactory, sample_index: Any
) -> Iterator[tuple[OpenAIStubServer, ChromaRecorder, Path]]:
    """An allowed model endpoint that echoes the key, the attacker's Chroma, an index root with a planted index."""
    root = tmp_path_factory.mktemp("served-index-root")
    with OpenAIStubServer() as echo, ChromaRecorder() as chroma:
        echo.script(echo_key)
        plant_chroma_index(sample_index.path, root / "planted", chroma.root_url)
        yield echo, chroma, root


@pytest.fixture(scope="module")
def servers(
    tmp_path_factory: pytest.TempPathFactory,
    sample_index: Any,
    hosts: tuple[OpenAIStubServer, ChromaRecorder, Path],
    exported_encoder: Path,
) -> Iterator[tuple[DevServer, OpenAIStubServer, OpenAIStubServer, OpenAIStubServer]]:
    echo, _, root = hosts
    with OpenAIStubServer() as allowed, OpenAIStubServer() as attacker, OpenAIStubServer() as hung:
        allowed.script([], then=text("Answer: Stephen King"))
        attacker.script([], then=text("Answer: pwned"))
        hung.script([], then=held_until(RELEASE_HUNG))
        env = {
            "OPENAI_API_KEY": SENTINEL_KEY,
            "ARAG_ALLOWED_BASE_URLS": f"{allowed.url},{hung.url},{echo.url}",
            "ARAG_ALLOWED_MODELS": "gpt-4o-mini",
            "ARAG_INDEX": str(sample_index.path),  # the operator's index, built already
            "ARAG_INDEX_ROOT": str(root),
            "CHROMA_CLIENT_AUTH_PROVIDER": CHROMA_TOKEN_PROVIDER,
            "CHROMA_CLIENT_AUTH_CREDENTIALS": CHROMA_SECRET,
            # longer than any test here: the held run ends when the test releases it, not by the clock
            "ARAG_MODEL_TIMEOUT": "3600",
            "ARAG_MODEL_RETRIES": "0",
        }
        workdir = tmp_path_factory.mktemp("langgraph-dev-security")
        with running_dev_server(workdir, env, encoder=exported_encoder) as server:
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


SERVED_GRAPHS = list(json.loads((Path(__file__).resolve().parents[2] / "langgraph.json").read_text())["graphs"])
UNKNOWN_KEYS = [({"max_stpes": 3}, "'max_stpes'"), ({"top_k": 5, "evil": 1}, "'evil'")]


@pytest.mark.parametrize("graph", SERVED_GRAPHS)
def test_a_context_key_the_graph_lacks_is_refused_in_one_line(servers: Any, graph: str) -> None:
    """LangGraph's server drops context keys the schema does not list: a typo (``max_stpes``) or a
    stray key ran with the defaults and no word. The run is refused, naming the key and the settings."""
    server = servers[0]
    with server.log_on_failure():
        for context, named in UNKNOWN_KEYS:
            message = refusal(server, context, graph)
            assert message.startswith("ContextError: ") and named in message, message
            assert "; its settings are: " in message and "top_k" in message, message
    record("served_security", f"{graph}: unknown context keys", trials=2, faults=2, survived=2)


def test_an_assistant_with_a_key_the_graph_lacks_is_refused_when_it_runs(servers: Any) -> None:
    """An assistant's context reaches the run merged with the caller's: the same rule covers it."""
    server = servers[0]
    client = server.client()
    with server.log_on_failure():
        assistant = client.assistants.create("corag", context={"max_stpes": 1})
        message = refusal(server, {"max_steps": 1}, assistant["assistant_id"])
        assert "CoragContext has no setting 'max_stpes'" in message, message
        thread = client.threads.create()
        out: Any = client.runs.wait(
            thread["thread_id"], "corag", input={"question": QUESTION}, context={"max_steps": 1}
        )
        assert out.get("error") is None and out["answer"], out  # known keys still run


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


def test_a_planted_index_gets_no_chroma_credentials(servers: Any, hosts: Any) -> None:
    """An index under the operator's root names the attacker's Chroma server: refused, nothing sent."""
    server = servers[0]
    _, chroma, _ = hosts
    client = server.client()
    with server.log_on_failure():
        for graph in ("naive_rag", "arag"):
            thread = client.threads.create()
            try:
                out: Any = client.runs.wait(
                    thread["thread_id"], graph, input={"question": QUESTION}, context={"index_path": "planted"}
                )
            except Exception as exc:  # the SDK raises the run's error with the server's message
                message = str(exc)
            else:
                message = str(out.get("error") if isinstance(out, dict) else out)
            assert "ARAG_ALLOWED_CHROMA_URLS" in message and "\n" not in message.strip(), message
        assert chroma.requests == [], f"the attacker's Chroma got {chroma.authorizations}"
        assert CHROMA_SECRET not in server.log_tail(200_000)
    record("served_security", "an index naming the attacker's Chroma server", trials=2, faults=2, survived=2)


def test_an_echoed_key_reaches_no_answer_stream_or_thread_state(servers: Any, hosts: Any) -> None:
    server = servers[0]
    echo, _, _ = hosts
    client = server.client()
    with server.log_on_failure():
        thread = client.threads.create()
        parts = client.runs.stream(
            thread["thread_id"],
            "naive_rag",
            input={"question": QUESTION},
            context={"model": "gpt-4o-mini", "base_url": echo.url},
            stream_mode=["messages-tuple", "values", "updates", "events"],
        )
        streamed = [json.dumps(part.data, default=str) for part in parts]
        state = json.dumps(client.threads.get_state(thread["thread_id"]), default=str)
    assert echo.completions and echo.completions[-1].headers["authorization"] == f"Bearer {SENTINEL_KEY}"
    assert streamed and "your header was Bearer ***" in state, state[:2000]
    assert not [part for part in streamed if SENTINEL_KEY in part]
    assert SENTINEL_KEY not in state
    record("served_security", "a model endpoint echoing the key", trials=1, faults=1, survived=1)
