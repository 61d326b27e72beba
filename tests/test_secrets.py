"""API keys never leave the process: not in answers, trajectories, CLI output, errors or eval files.

Sentinel keys are set in the environment (``OPENAI_API_KEY``, ``LANGSMITH_API_KEY``) and really used:
the OpenAI stand-in checks that requests carry the key. Then everything a user can see or keep is
searched for any part of them (the marker ``SENTINEL`` they share): ``arag ask`` output (JSON and
text, stdout and stderr, in-process and as a process), and every file ``arag eval`` writes, for a
model that answers and for one whose errors quote the key back (as OpenAI's 401 does). Trace bodies
are checked in tests/test_tracing.py; the eval runner's LangSmith upload in tests/test_eval_runner.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.cli.main import main as cli_main
from arag_graph.index.sample import sample_questions_path
from arag_graph.llm import models
from tests.fakes import sentinel_key, sentinel_langsmith_key
from tests.reliability import record
from tests.stubs._http import RecordedRequest
from tests.stubs.openai_server import OpenAIStubServer, Reply, http_error, text, tool_call

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[1]
MARK = "SENTINEL"
OPENAI_KEY = sentinel_key("secrets")  # carries MARK
LANGSMITH_KEY = sentinel_langsmith_key("secrets")
OTHER_KEY = "-".join(("sk", "other", "9876543210fedcba"))  # a second key, without MARK
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


@pytest.fixture
def sentinel_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL", "ARAG_INDEX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("LANGSMITH_API_KEY", LANGSMITH_KEY)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "0")
    monkeypatch.setenv("ARAG_MODEL_TIMEOUT", "5.0")
    models._chat_openai.cache_clear()
    yield
    models._chat_openai.cache_clear()


def answering_model(request: RecordedRequest) -> Reply:
    """Searches once, then answers; grades every prediction correct when asked as a judge."""
    body = request.json() or {}
    schema = (body.get("response_format") or {}).get("json_schema", {}).get("name")
    if schema == "JudgeVerdict":
        return text(json.dumps({"reason": "It names the director.", "correct": True}))
    if schema is not None:
        return text("{}")
    if not any(m.get("role") == "tool" for m in body.get("messages") or []) and body.get("tools"):
        return tool_call("keyword_search", {"keywords": ["Leland"]})
    return text("Answer: John Doe")


def key_quoting_model(request: RecordedRequest) -> Reply:
    """Every call fails the way OpenAI answers a wrong key: by quoting it."""
    return http_error(401, f"Incorrect API key provided: {OPENAI_KEY}. Also tried {OTHER_KEY}.")


MODELS: dict[str, Callable[[RecordedRequest], Reply]] = {"answering": answering_model, "key_quoting": key_quoting_model}


def leaks(text: str) -> bool:
    return MARK in text or OTHER_KEY in text


def key_was_sent(server: OpenAIStubServer) -> None:
    assert server.completions, "the model was never called"
    assert all(r.headers.get("authorization") == f"Bearer {OPENAI_KEY}" for r in server.completions)


@pytest.mark.parametrize("behaviour", list(MODELS))
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_arag_ask_shows_no_key(
    behaviour: str,
    as_json: bool,
    openai_server: OpenAIStubServer,
    sentinel_env: None,
    sample_index: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script(MODELS[behaviour])
    argv = [
        "ask",
        QUESTION,
        "--index",
        str(sample_index.path),
        "--model",
        "gpt-4o-mini",
        "--base-url",
        openai_server.url,
    ]
    code = cli_main([*argv, "--json"] if as_json else argv)
    captured = capsys.readouterr()
    key_was_sent(openai_server)
    assert code == (0 if behaviour == "answering" else 1), captured.err
    assert not leaks(captured.out + captured.err), captured.out + captured.err
    if behaviour == "key_quoting":
        shown = json.loads(captured.out)["error"] if as_json else captured.err
        assert "HTTP 401" in shown and "***" in shown  # the key was there, and was replaced
    quoted = int(behaviour == "key_quoting")  # the fault: a provider error that quotes the key
    record("secrets", f"arag ask {behaviour} {'json' if as_json else 'text'}", trials=1, faults=quoted, survived=quoted)


def test_arag_ask_as_a_process_shows_no_key(openai_server: OpenAIStubServer, sample_index: Any) -> None:
    """The whole process output (library warnings and logging included) of a failing run."""
    openai_server.script(key_quoting_model)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OPENAI_", "ARAG_M"))}
    env.update({"OPENAI_API_KEY": OPENAI_KEY, "LANGSMITH_API_KEY": LANGSMITH_KEY, "LANGSMITH_TRACING": "false"})
    env["PYTHONPATH"] = str(REPO)
    argv = [
        "ask",
        QUESTION,
        "--index",
        str(sample_index.path),
        "--model",
        "gpt-4o-mini",
        "--base-url",
        openai_server.url,
    ]
    done = subprocess.run(
        [sys.executable, "-m", "arag_graph.cli.main", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    key_was_sent(openai_server)
    assert done.returncode == 1, done.stderr
    assert "HTTP 401" in done.stderr
    assert not leaks(done.stdout + done.stderr), done.stdout + done.stderr
    record("secrets", "arag ask process", trials=1, faults=1, survived=1)


@pytest.mark.parametrize("behaviour", list(MODELS))
def test_arag_eval_writes_no_key_anywhere(
    behaviour: str,
    openai_server: OpenAIStubServer,
    sentinel_env: None,
    sample_index: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    openai_server.script(MODELS[behaviour])
    out = tmp_path / "run"
    argv = ["eval", "--dataset", str(sample_questions_path()), "--index", str(sample_index.path), "--limit", "3"]
    argv += ["--graphs", "arag,naive_rag", "--model", "gpt-4o-mini", "--judge", "gpt-4o-mini"]
    argv += ["--base-url", openai_server.url, "--out", str(out), "--no-upload", "--quiet"]
    code = cli_main(argv)
    captured = capsys.readouterr()
    assert code == (0 if behaviour == "answering" else 1), captured.err  # every run failed: non-zero
    key_was_sent(openai_server)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files) and (out / "summary.json").exists()
    assert (out / "report.html").exists()
    for path in files:
        data = path.read_bytes()
        if path.suffix == ".html":  # report.html packs each question's steps (gzip in base64): read them unpacked
            blobs = re.findall(rb'<script type="application/gzip" id="[^"]*">([^<]*)</script>', data)
            assert blobs, "report.html without its packed details"
            data += b"".join(gzip.decompress(base64.b64decode(blob)) for blob in blobs)
        assert MARK.encode() not in data and OTHER_KEY.encode() not in data, f"a key in {path}"
    assert not leaks(captured.out + captured.err)
    records = [json.loads(line) for p in files if p.suffix == ".jsonl" for line in p.read_text().splitlines()]
    assert len(records) == 6
    if behaviour == "key_quoting":  # the failures were recorded, redacted, not dropped
        errors = [r["prediction"]["error"] for r in records]
        assert all(e and "HTTP 401" in e and "***" in e for e in errors), errors
    quoted = len(records) if behaviour == "key_quoting" else 0
    record("secrets", f"arag eval {behaviour}", trials=len(records), faults=quoted, survived=quoted, files=len(files))


# ---------------------------------------------------------------------------------------------
# The redaction rules themselves (arag_graph.core.safety), without a model: what mutation testing runs


@pytest.fixture
def no_known_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    from arag_graph.core import safety

    for name in safety._SECRET_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(safety, "_remembered", set())


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "ARAG_API_KEY", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "ARAG_JUDGE_API_KEY"]
)
def test_every_key_variable_is_a_secret_from_six_characters(
    no_known_secrets: None, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from arag_graph.core.safety import redact, secrets_in_env

    monkeypatch.setenv(name, "abcde")
    assert secrets_in_env() == [] and redact("abcde") == "abcde"
    monkeypatch.setenv(name, "plain6")
    assert secrets_in_env() == ["plain6"]
    assert redact("the key plain6 here") == "the key *** here"


def test_url_credentials_are_remembered_as_secrets(no_known_secrets: None) -> None:
    from arag_graph.core import safety
    from arag_graph.core.safety import remember_url_credentials, url_credentials, url_without_credentials

    remember_url_credentials(None)
    remember_url_credentials("")
    remember_url_credentials("http://short:pass5@h/v1")  # both under six characters
    remember_url_credentials("http://token-as-user-1@h/v1")  # a user alone is a token
    remember_url_credentials("http://someuser:pa%24%24word@h/v1")  # the password, quoted and not
    assert safety._remembered == {"token-as-user-1", "pa%24%24word", "pa$$word"}
    assert safety.redact("echo pa$$word and token-as-user-1, not someuser") == "echo *** and ***, not someuser"
    assert url_without_credentials("see http://u:p@h:1/x?Api-Key=abc&v=2;sig=s#f") == (
        "see http://***@h:1/x?Api-Key=***&v=2;sig=***#f"
    )
    assert url_credentials("http://u:p@h/x") == "u:p@"
    assert url_credentials("http://h/x?a=1&access_token=t") == "access_token=t"
    assert url_credentials("http://h/x?a=1") is None


def test_key_shaped_text_is_redacted(no_known_secrets: None) -> None:
    from arag_graph.core.safety import redact

    assert redact("a sk-abcdefgh and lsv2_pt_abcdefgh, not sk-short", ("not",)) == "a *** and ***, *** sk-short"
    assert redact("", ("",)) == ""


@pytest.mark.parametrize("secret", ["s3cret-value-1", "x" * 80])
def test_the_stream_redactor_never_gives_out_a_split_secret(
    no_known_secrets: None, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    from arag_graph.core.safety import StreamRedactor

    monkeypatch.setenv("ARAG_API_KEY", secret)
    text = f"before {secret} middle sk-abcdefghijkl then http://u:pw@h/ ?token=zzzzzz end " + "y" * 70
    for size in (1, 2, 5, 13):
        redactor = StreamRedactor()
        pieces = [redactor.feed(text[i : i + size]) for i in range(0, len(text), size)]
        assert all(secret[:6] not in piece and "sk-abcdefghijkl" not in piece for piece in pieces)
        shown = "".join(pieces) + redactor.flush()
        assert shown == "before *** middle *** then http://***@h/ ?token=*** end " + "y" * 70
        assert redactor.flush() == ""
    redactor = StreamRedactor()
    assert redactor.hold == max(len(secret), 64) - 1
    assert redactor.feed("z" * 200) == "z" * (200 - redactor.hold)  # plain text is not held back whole


@pytest.mark.parametrize("user", ["alice", "u" * 100])
def test_the_stream_redactor_holds_a_url_until_its_user_information_ends(no_known_secrets: None, user: str) -> None:
    """``http://USER:PASS@`` is only recognisable once the ``@`` arrives: a user part longer than the
    hold-back (64 characters) must not have gone out before it, whatever the pieces."""
    from arag_graph.core.safety import StreamRedactor, redact

    text = f"see http://{user}:pa55word-x@proxy.example/v1 and http://plain.example/x then " + "y" * 70
    assert redact(text) == "see http://***@proxy.example/v1 and http://plain.example/x then " + "y" * 70
    for size in (1, 7, 64):
        redactor = StreamRedactor()
        pieces = [redactor.feed(text[i : i + size]) for i in range(0, len(text), size)]
        assert all(user not in piece and "pa55word" not in piece for piece in pieces), (size, pieces)
        assert "".join(pieces) + redactor.flush() == redact(text)


def test_model_errors_read_as_one_line_with_what_to_check(no_known_secrets: None) -> None:
    import httpx
    import openai

    from arag_graph.core.errors import BudgetExceeded
    from arag_graph.core.safety import describe_model_error

    class Failure(Exception):
        def __init__(self, text: str, status_code: int | None = None) -> None:
            super().__init__(text)
            self.status_code = status_code

    assert describe_model_error(BudgetExceeded("cap sk-abcdefghij reached")) == "cap *** reached"
    assert describe_model_error(Failure("bad\n  thing", 500)) == (
        "model call failed: Failure (HTTP 500): bad thing; check the model name, base URL and API key, or retry later"
    )
    assert describe_model_error(Failure("x" * 400)).count("x") == 300
    assert describe_model_error(Failure("no", 401)).endswith("; check the API key")
    assert describe_model_error(Failure("Invalid API key")).endswith("; check the API key")
    assert describe_model_error(Failure("Authentication failed")).endswith("; check the API key")
    assert describe_model_error(Failure("slow", 429)).endswith(
        "; the provider is rate-limiting; retry later or lower --workers"
    )
    request = httpx.Request("POST", "http://h/v1", extensions={"timeout": {"read": 2.5}})
    unreachable = "; the model server could not be reached; check --base-url and that the server is up"
    assert describe_model_error(openai.APIConnectionError(request=request)).endswith(unreachable)
    assert describe_model_error(httpx.ConnectError("refused")).endswith(unreachable)
    assert describe_model_error(json.JSONDecodeError("x", "doc", 0)).endswith(
        "; the model server sent an incomplete or malformed reply; retry, and check any proxy in between"
    )
    assert describe_model_error(openai.APITimeoutError(request=request)) == (
        "model call failed: timed out (APITimeoutError: Request timed out.); the model server did not reply "
        "within 2.5 s per attempt: raise the limit with --model-timeout SECONDS (or $ARAG_MODEL_TIMEOUT, or the "
        "timeout setting) and --model-retries, or check that the server is up"
    )
    assert "did not reply: raise" in describe_model_error(TimeoutError("late"))
    assert "did not reply: raise" in describe_model_error(httpx.ReadTimeout("late"))


def test_the_stream_redactor_gives_out_everything_before_a_secret_or_key_at_once(
    no_known_secrets: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the held-back end starts: all of a secret or key-shaped text that could still grow is
    held (and the three characters before a key shape), nothing more."""
    from arag_graph.core.safety import StreamRedactor

    secret, key = "s3cret-value-1", "sk-abcdefghijkl"
    monkeypatch.setenv("ARAG_API_KEY", secret)
    length = 150
    for word, shown, margin in ((secret, "***", 0), (key, "***", 3)):
        for at in range(40, 110):
            redactor = StreamRedactor(extra=("extra-secret-9",))
            cut = length - redactor.hold
            text = "." * at + word + "." * (length - at - len(word))
            if at - margin < cut < at + len(word) or (margin and at - margin < cut and at + len(word) == cut):
                expected = "." * (at - margin) if at + len(word) > cut else "." * at + shown
            elif at + len(word) <= cut:
                expected = "." * at + shown + "." * (cut - at - len(word))
            else:
                expected = "." * cut
            out = redactor.feed(text)
            assert out == expected, (word, at)
            assert out + redactor.flush() == "." * at + shown + "." * (length - at - len(word))
    redactor = StreamRedactor(extra=("extra-secret-9",))
    assert redactor.feed("an extra-secret-9 " + "y" * 100) + redactor.flush() == "an *** " + "y" * 100
    redactor = StreamRedactor(extra=("extra-secret-9",))
    assert redactor.feed("extra-secret-9") == "" and redactor.flush() == "***"


def test_a_url_credential_of_exactly_six_characters_is_remembered(no_known_secrets: None) -> None:
    from arag_graph.core import safety

    safety.remember_url_credentials("http://someone:pass66@h/v1")
    assert safety._remembered == {"pass66"}


def _largest_safe_cut(text: str, secret: str, cut: int) -> int:
    """The largest position at or before ``cut`` that no occurrence of ``secret`` straddles."""
    starts = [i for i in range(len(text)) if text.startswith(secret, i)]
    while any(s < cut < s + len(secret) for s in starts):
        cut -= 1
    return cut


@pytest.mark.parametrize(
    "secret", ["s3cret-value-1", "ab" * 7, "s3cret-value-s"], ids=["plain", "overlapping", "ends-as-it-starts"]
)
def test_the_stream_redactor_holds_back_exactly_the_secrets_that_could_straddle(
    no_known_secrets: None, monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    from arag_graph.core.safety import StreamRedactor

    monkeypatch.setenv("ARAG_API_KEY", secret)
    texts = []
    for length in (70, 83, 150):
        for at in range(0, length - 20):
            texts.append("." * at + secret + "." * (length - at - len(secret)))
            texts.append("." * at + secret * 2 + "." * (length - at - 2 * len(secret)))  # back to back
            texts.append("." * at + secret + secret[1:] + "." * (length - at - 2 * len(secret) + 1))
            texts.append("." * 3 + secret + "." * at + "ab" * 10 + "." * (length - at - 23 - len(secret)))
    for whole in texts:
        redactor = StreamRedactor()
        cut = _largest_safe_cut(whole, secret, max(0, len(whole) - redactor.hold))
        assert redactor.feed(whole) == whole[:cut].replace(secret, "***"), whole
        assert redactor.flush() == whole[cut:].replace(secret, "***"), whole


def test_describe_model_error_knows_other_clients_connection_and_cut_off_errors(no_known_secrets: None) -> None:
    import httpx

    from arag_graph.core.safety import describe_model_error

    class APIConnectionError(Exception):  # another provider's SDK, named as OpenAI's
        pass

    class ConnectError(Exception):
        pass

    class CutOffReplyError(Exception):
        pass

    unreachable = "; the model server could not be reached; check --base-url and that the server is up"
    for error in (APIConnectionError("down"), ConnectError("down"), httpx.ReadError("reset")):
        assert describe_model_error(error).endswith(unreachable), error
    assert describe_model_error(CutOffReplyError("cut")) == (
        "model call failed: CutOffReplyError: cut; the model server sent an incomplete or malformed reply; retry, "
        "and check any proxy in between"
    )
    assert describe_model_error(ValueError("plain")) == (
        "model call failed: ValueError: plain; check the model name, base URL and API key, or retry later"
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_streamed_tool_call_arguments_are_redacted_before_anyone_sees_them(
    openai_server: OpenAIStubServer, sentinel_env: None, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """A model that quotes a key inside a tool call's arguments, streamed in 7-character pieces (the
    stand-in's split): what the stream hands on (each call's argument pieces, in order, and any raw
    ``tool_calls`` kept beside them) and the reassembled call hold ``***``, never the key."""
    import asyncio

    from langchain_core.messages import AIMessageChunk

    monkeypatch.setenv("ARAG_API_KEY", "plain-operator-secret")  # not key-shaped: only the value says it is one
    quoted = ["Leland", f"Bearer {OPENAI_KEY}", "plain-operator-secret", OTHER_KEY]
    openai_server.script([tool_call("keyword_search", {"keywords": quoted})])
    model = models.resolve_chat_model("gpt-4o-mini", base_url=openai_server.url).bind_tools(
        [{"type": "function", "function": {"name": "keyword_search", "parameters": {"type": "object"}}}]
    )

    async def collect() -> list[Any]:
        return [chunk async for chunk in model.astream("search")]

    chunks = list(model.stream("search")) if mode == "sync" else asyncio.run(collect())
    pieces: dict[Any, str] = {}
    raw: dict[Any, str] = {}
    for chunk in chunks:
        assert isinstance(chunk, AIMessageChunk)
        for call in chunk.tool_call_chunks:
            pieces[call.get("index")] = pieces.get(call.get("index"), "") + (call.get("args") or "")
        for call in chunk.additional_kwargs.get("tool_calls") or []:
            arguments = (call.get("function") or {}).get("arguments") or ""
            raw[call.get("index")] = raw.get(call.get("index"), "") + arguments
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk
    assert openai_server.completions and openai_server.completions[0].stream
    assert list(pieces) == [0] and set(raw) <= {0}
    for shown in (pieces[0], *raw.values(), repr(whole)):
        assert not leaks(shown) and "plain-operator-secret" not in shown, shown
    assert json.loads(pieces[0]) == {"keywords": ["Leland", "Bearer ***", "***", "***"]}
    assert whole.tool_calls[0]["args"] == {"keywords": ["Leland", "Bearer ***", "***", "***"]}
