"""One endpoint rule: every client arag builds for a served run calls only what the operator allowed.

Issue 22, section 1. Each client (chat model, embeddings endpoint, Chroma server) is checked where
it is built, on the endpoint the built client will call (:func:`arag_graph.core.endpoints.check_endpoint`);
provider prefixes are read in one spelling before routing; URLs carrying credentials are never
written to a file; replies echoing the operator's key are redacted in everything a run returns or
streams. The same cases run against a real ``langgraph dev`` in tests/slow/test_served_security.py.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.core.endpoints import canonical_model, client_endpoint, serving
from arag_graph.core.errors import AragError
from arag_graph.core.safety import StreamRedactor, redact, url_without_credentials
from arag_graph.index import integrity
from arag_graph.index.build import build_index
from arag_graph.index.chroma import check_chroma_server
from arag_graph.index.layout import MANIFEST, build_path, read_current
from arag_graph.llm import models
from arag_graph.registry import GRAPHS
from arag_graph.run.policy import RunRefused, ServingPolicy
from arag_graph.run.runtime import index_for_context
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import sentinel_key
from tests.stubs._http import RecordedRequest
from tests.stubs.chroma_recorder import CHROMA_TOKEN_PROVIDER, ChromaRecorder
from tests.stubs.openai_server import OpenAIStubServer, Reply, text, tool_call

OPERATOR_KEY = sentinel_key("operator")
PLAIN_KEY = "operator-plain-key-4f9a2c7e"  # not shaped like a key: only knowing it redacts it
CHROMA_SECRET = "chroma-operator-token-7d1e"
URL_SECRET = "urlpass-51c0ffee"
QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"


@pytest.fixture
def operator(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A served deployment's environment: keys, an index root, no endpoint allowed yet."""
    for name in ("ARAG_MODEL", "ARAG_ALLOWED_MODELS", "ARAG_BASE_URL", "OPENAI_BASE_URL", "ARAG_ALLOWED_BASE_URLS"):
        monkeypatch.delenv(name, raising=False)
    for name in ("ARAG_CHROMA_URL", "ARAG_ALLOWED_CHROMA_URLS", "ARAG_INDEX", "ARAG_API_KEY", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", OPERATOR_KEY)
    monkeypatch.setenv("CHROMA_CLIENT_AUTH_PROVIDER", CHROMA_TOKEN_PROVIDER)
    monkeypatch.setenv("CHROMA_CLIENT_AUTH_CREDENTIALS", CHROMA_SECRET)
    monkeypatch.setenv("ARAG_MODEL_RETRIES", "0")
    root = tmp_path / "indexes"
    root.mkdir()
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(root))
    models._chat_openai.cache_clear()
    yield root
    models._chat_openai.cache_clear()


def plant_chroma_index(source: Path, dest: Path, chroma_url: str) -> Path:
    """A copy of a real index whose manifest says its sentences are on the Chroma server ``chroma_url``.

    Anyone who can write under the index root can do this; the manifest is not covered by checksums.
    """
    shutil.copytree(source, dest)
    build = read_current(dest)
    assert build is not None
    manifest_path = build_path(dest, build) / MANIFEST
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["chroma"] = {"mode": "http", "url": chroma_url, "collection": "sentences-planted", "ids": "rows"}
    # The seal is no secret: whoever plants a manifest can compute it again.
    manifest.pop("manifest_checksum", None)
    manifest["manifest_checksum"] = integrity.json_checksum(manifest)
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return dest


# ---------------------------------------------------------------------------------------------
# Chroma: the manifest's server passes the operator's Chroma allowlist


def test_a_chosen_index_cannot_send_the_chroma_credentials_to_the_host_it_names(
    operator: Path, sample_index: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ChromaRecorder() as attacker:
        plant_chroma_index(sample_index.path, operator / "planted", attacker.root_url)
        with pytest.raises(RunRefused) as refused:
            index_for_context({"index_path": "planted"})
        message = str(refused.value)
        assert "\n" not in message and "ARAG_ALLOWED_CHROMA_URLS" in message and attacker.root_url in message
        assert attacker.requests == [], "a request went to a Chroma server the operator did not allow"

        # The check is what held them back: once the operator allows the host, the client calls it.
        monkeypatch.setenv("ARAG_ALLOWED_CHROMA_URLS", attacker.root_url + "/")
        with pytest.raises(AragError):  # the recorder is no Chroma server: the load fails past the check
            index_for_context({"index_path": "planted"})
        assert f"Bearer {CHROMA_SECRET}" in attacker.authorizations


def test_the_chroma_rule_compares_scheme_host_port_and_path(operator: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARAG_ALLOWED_CHROMA_URLS", "chroma-a:8000, https://chroma-b")
    monkeypatch.setenv("ARAG_CHROMA_URL", "http://chroma-c:9000")
    allowed = ServingPolicy.from_env().endpoints("chroma")
    assert allowed == {"http://chroma-a:8000", "https://chroma-b:443", "http://chroma-c:9000"}
    policy = ServingPolicy.from_env()
    policy.check_endpoint("chroma", "http://CHROMA-A:8000/", "store")
    for other in ("https://chroma-a:8000", "http://chroma-a:8001", "http://chroma-a:8000/x", "http://chroma-d:8000"):
        with pytest.raises(RunRefused, match="ARAG_ALLOWED_CHROMA_URLS"):
            policy.check_endpoint("chroma", other, "store")
    # A Chroma server is not a model endpoint, and the other way round: each gets its own secret only.
    with pytest.raises(RunRefused, match="ARAG_ALLOWED_BASE_URLS"):
        policy.check_endpoint("model", "http://chroma-a:8000", "model")


def test_the_chroma_client_is_checked_before_its_first_request(operator: Path) -> None:
    with ChromaRecorder() as host:
        with serving(ServingPolicy.from_env()), pytest.raises(RunRefused):
            check_chroma_server(host.root_url, 5)
        assert host.requests == []
        with contextlib.suppress(AragError):  # outside a served run the operator's own URL is called
            check_chroma_server(host.root_url, 5)
        assert host.requests


# ---------------------------------------------------------------------------------------------
# Credentials in URLs are never written


@pytest.mark.parametrize(
    "spelling",
    ["http://user:{secret}@{host}/v1", "http://{secret}@{host}/v1", "http://{host}/v1?api_key={secret}"],
    ids=["user-password", "token-as-user", "query-key"],
)
def test_an_embedding_url_with_credentials_is_refused_and_written_nowhere(
    operator: Path, tmp_path: Path, openai_server: OpenAIStubServer, capsys: pytest.CaptureFixture[str], spelling: str
) -> None:
    host = openai_server.url.removeprefix("http://").removesuffix("/v1")
    url = spelling.format(secret=URL_SECRET, host=host)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"id": "a", "title": "A", "text": "The Nile flows north. It is long."}) + "\n")
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps([{"id": "q1", "question": "Which way?", "answer": "north"}]))
    embedding = ["--embedding", "openai:stub-embed", "--embedding-base-url", url]
    evaluation = ["eval", "--dataset", str(questions), "--corpus", str(corpus), "--graphs", "naive_rag"]
    evaluation += ["--model", "offline", "--no-upload", "--quiet", "--out", str(tmp_path / "run")]
    for argv in (["index", str(corpus), "--out", str(tmp_path / "index"), *embedding], [*evaluation, *embedding]):
        line = assert_one_error_line(*run_cli(argv, capsys))
        assert "carries credentials" in line and URL_SECRET not in line, line
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name not in ("corpus.jsonl", "questions.json")]
    assert not [p for p in written if URL_SECRET.encode() in p.read_bytes()]
    assert not openai_server.embedding_requests


def test_a_chroma_url_with_credentials_is_refused(operator: Path, tmp_path: Path) -> None:
    with pytest.raises(AragError, match="carries credentials") as refused:
        build_index([], tmp_path / "i", chroma_url=f"http://admin:{URL_SECRET}@127.0.0.1:1", backend="chroma")
    assert URL_SECRET not in str(refused.value)


def test_the_one_rule_for_urls_in_files_hides_userinfo_and_secret_parameters() -> None:
    shown = url_without_credentials(
        f"see http://u:{URL_SECRET}@h:1/v1?api-version=2&api_key={URL_SECRET}&sig={URL_SECRET}&x=1 and more"
    )
    assert URL_SECRET not in shown and "api-version=2" in shown and "x=1" in shown and "h:1/v1" in shown


# ---------------------------------------------------------------------------------------------
# Provider names in any case route the same way; the built client's endpoint is what is checked


@pytest.mark.parametrize("spec", ["OpenAI:gpt-4o-mini", "openai:gpt-4o-mini", " OPENAI :gpt-4o-mini", "gpt-4o-mini"])
def test_an_openai_prefix_in_any_case_takes_the_configured_endpoint(
    operator: Path, openai_server: OpenAIStubServer, monkeypatch: pytest.MonkeyPatch, spec: str
) -> None:
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "*")
    monkeypatch.setenv("ARAG_BASE_URL", openai_server.url)
    openai_server.script([], then=text("Answer: Stephen King"))
    out = GRAPHS["naive_rag"].build().invoke({"question": QUESTION}, context={"model": spec})
    assert out.get("error") is None and out["answer"] == "Stephen King", out
    assert openai_server.completions[-1].body["model"] == "gpt-4o-mini"


def test_allowlisted_models_match_in_the_routing_spelling(operator: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "gpt-4o-mini")
    policy = ServingPolicy.from_env()
    assert policy.model("OpenAI:gpt-4o-mini") == "OpenAI:gpt-4o-mini"
    assert canonical_model("OpenAI:gpt-4o-mini") == canonical_model("gpt-4o-mini") == "gpt-4o-mini"
    assert canonical_model("Anthropic:claude-x") == "anthropic:claude-x"
    with pytest.raises(RunRefused):
        policy.model("anthropic:gpt-4o-mini")


def test_a_routing_slip_is_caught_on_the_built_client(
    operator: Path, openai_server: OpenAIStubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Were the prefix read wrongly again, the client LangChain builds would call api.openai.com: refused."""
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "*")
    monkeypatch.setenv("ARAG_BASE_URL", openai_server.url)
    monkeypatch.setattr(models, "canonical_model", lambda spec: spec.replace("OpenAI:", "azure_openai:", 1))
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://operator-not-allowed.example")
    monkeypatch.setenv("OPENAI_API_VERSION", "2024-06-01")
    with serving(ServingPolicy.from_env()), pytest.raises(RunRefused) as refused:
        models.resolve_chat_model("OpenAI:gpt-4o-mini", base_url=openai_server.url)
    assert "operator-not-allowed.example" in str(refused.value) and "\n" not in str(refused.value)


def test_without_a_configured_endpoint_the_default_is_openais_own(operator: Path) -> None:
    policy = ServingPolicy.from_env()
    with serving(policy):
        model = models.resolve_chat_model("gpt-4o-mini")
    assert client_endpoint(model) == "https://api.openai.com/v1/"
    with pytest.raises(RunRefused):
        policy.check_endpoint("model", "https://api.openai.com.evil.example/v1", "model")


# ---------------------------------------------------------------------------------------------
# A reply echoing the key


def echo_key(request: RecordedRequest) -> Reply:
    """A proxy that quotes the request's Authorization header back, as the answer and in a tool call."""
    header = request.headers.get("authorization", "")
    body = request.json() or {}
    if body.get("tools") and not any(m.get("role") == "tool" for m in body.get("messages") or []):
        return tool_call("keyword_search", {"keywords": ["Leland", header]})
    return text(f"Answer: the header was {header}, key {header.removeprefix('Bearer ')}")


@pytest.mark.parametrize("key", [OPERATOR_KEY, PLAIN_KEY], ids=["key-shaped", "plain"])
@pytest.mark.parametrize("graph", ["arag", "naive_rag"])
def test_a_served_run_returns_and_streams_no_echoed_key(
    operator: Path,
    openai_server: OpenAIStubServer,
    monkeypatch: pytest.MonkeyPatch,
    sample_index: Any,
    key: str,
    graph: str,
) -> None:
    monkeypatch.setenv("ARAG_API_KEY", key)
    monkeypatch.setenv("ARAG_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("ARAG_BASE_URL", openai_server.url)
    openai_server.script(echo_key)
    compiled = GRAPHS[graph].build()
    seen: list[str] = []
    for mode, event in compiled.stream(
        {"question": QUESTION}, context={"max_steps": 2} if graph == "arag" else {}, stream_mode=["messages", "values"]
    ):
        seen.append(repr(event))
        if mode == "values":
            final = event
    assert openai_server.completions and openai_server.completions[0].headers["authorization"] == f"Bearer {key}"
    assert "***" in final["answer"], final["answer"]
    assert key not in repr(final) and not [e for e in seen if key in e]


def test_stream_redaction_holds_however_the_reply_is_split(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARAG_API_KEY", PLAIN_KEY)
    reply = f"Bearer {PLAIN_KEY} then {OPERATOR_KEY} and http://u:{URL_SECRET}@h/v1?token={URL_SECRET} end. " * 3
    for seed in range(50):
        pieces, at, rng = [], 0, random.Random(seed)
        while at < len(reply):
            step = rng.randint(1, 9)
            pieces.append(reply[at : at + step])
            at += step
        redactor = StreamRedactor()
        out = "".join([redactor.feed(p) for p in pieces] + [redactor.flush()])
        assert out == redact(reply), seed
        assert PLAIN_KEY not in out and OPERATOR_KEY not in out and URL_SECRET not in out


def test_any_providers_model_gets_the_same_redaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models of other providers (built by ``init_chat_model``) get the redaction by :func:`models.redacting`."""
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    monkeypatch.setenv("ARAG_API_KEY", PLAIN_KEY)
    reply = f"the key is {PLAIN_KEY} indeed"
    model = models.redacting(GenericFakeChatModel(messages=iter([AIMessage(content=reply)] * 2)))
    assert models.redacting(model) is model and type(model).__mro__.count(type(model).__mro__[1]) == 1
    assert model.invoke("hi").content == "the key is *** indeed"
    streamed = "".join(str(chunk.content) for chunk in model.stream("hi"))
    assert streamed == "the key is *** indeed"


# ---------------------------------------------------------------------------------------------
# The hook itself (arag_graph.core.endpoints), without a server: what mutation testing runs


class RecordingGuard:
    """A guard that records what it was asked and refuses one URL."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str | None, str]] = []

    def check_endpoint(self, kind: Any, url: str | None, what: str) -> None:
        self.calls.append((kind, url, what))
        if url == "http://refused.example":
            raise RunRefused(f"{what} at {url} is not allowed")


def test_the_endpoint_hook_checks_only_inside_a_served_run_and_restores_the_outer_guard() -> None:
    from arag_graph.core.endpoints import check_endpoint

    check_endpoint("model", "http://refused.example", "model")  # the operator's own code: no guard
    outer, inner = RecordingGuard(), RecordingGuard()
    with serving(outer):
        check_endpoint("chroma", "http://a.example", "chroma server")
        with serving(None):  # a trusted caller inside a served run stays checked by the outer guard
            check_endpoint("model", "http://b.example", "model")
        with serving(inner):
            check_endpoint("embeddings", None, "embeddings")
            with pytest.raises(RunRefused, match=r"model at http://refused\.example"):
                check_endpoint("model", "http://refused.example", "model")
        check_endpoint("model", "http://c.example", "model")
    check_endpoint("model", "http://refused.example", "model")
    assert outer.calls == [
        ("chroma", "http://a.example", "chroma server"),
        ("model", "http://b.example", "model"),
        ("model", "http://c.example", "model"),
    ]
    assert inner.calls == [("embeddings", None, "embeddings"), ("model", "http://refused.example", "model")]


def test_the_endpoint_hook_restores_the_outer_guard_after_a_refusal() -> None:
    from arag_graph.core.endpoints import check_endpoint

    outer, inner = RecordingGuard(), RecordingGuard()
    with serving(outer):
        with pytest.raises(RunRefused), serving(inner):
            check_endpoint("model", "http://refused.example", "model")
        check_endpoint("model", "http://after.example", "model")
    assert outer.calls == [("model", "http://after.example", "model")]


class Holder:
    """An object with some of the fields providers keep their endpoint in."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


@pytest.mark.parametrize(
    "field", ["base_url", "openai_api_base", "anthropic_api_url", "api_base", "endpoint", "azure_endpoint"]
)
def test_client_endpoint_reads_every_field_providers_use(field: str) -> None:
    assert client_endpoint(Holder(**{field: "https://x.example/v1"})) == "https://x.example/v1"


def test_client_endpoint_prefers_the_sdk_client_underneath_and_ignores_non_urls() -> None:
    sdk = Holder(base_url="https://sdk.example/v1/")
    assert client_endpoint(Holder(base_url="https://field.example", root_client=sdk)) == "https://sdk.example/v1/"
    inner = Holder(_client=Holder(base_url="https://embeddings.example/v1"))
    assert client_endpoint(Holder(openai_api_base=None, client=inner)) == "https://embeddings.example/v1"
    assert client_endpoint(Holder(client=Holder(api_base="https://inner.example"))) == "https://inner.example"
    assert client_endpoint(Holder(_client=Holder(endpoint="https://private.example"))) == "https://private.example"
    # a value that is no URL (a deployment name) is skipped for the next field or holder
    assert client_endpoint(Holder(base_url="gpt-4o", api_base="http://next.example")) == "http://next.example"
    assert client_endpoint(Holder(base_url="", root_client=Holder(base_url=None))) is None
    assert client_endpoint(object()) is None


@pytest.mark.parametrize(
    ("spec", "canonical"),
    [
        ("gpt-4o-mini", "gpt-4o-mini"),
        ("  gpt-4o-mini ", "gpt-4o-mini"),
        ("OpenAI:gpt-4o-mini", "gpt-4o-mini"),
        (" openai : gpt-4o-mini ", "gpt-4o-mini"),
        ("Azure-OpenAI:dep", "azure_openai:dep"),
        ("Anthropic: Claude-X ", "anthropic:Claude-X"),
        ("ollama:llama3:8b", "ollama:llama3:8b"),
        ("OpenAI:ft:gpt-4o:org", "ft:gpt-4o:org"),  # only the first colon ends the provider
        ("", ""),
    ],
)
def test_canonical_model_spelling(spec: str, canonical: str) -> None:
    assert canonical_model(spec) == canonical
