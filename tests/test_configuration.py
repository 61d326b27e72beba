"""Context schemas: what Studio renders, what a caller may set, and the one-line refusals."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from arag_graph.core.errors import AragError
from arag_graph.registry import GRAPHS, config_for
from arag_graph.run.configuration import (
    TOP_K_MAX,
    AragContext,
    ContextError,
    CoragContext,
    GraphContext,
    NaiveRagContext,
    SragContext,
)
from arag_graph.run.policy import RunRefused, ServingPolicy


def test_text_values_from_forms_are_coerced() -> None:
    cfg = AragContext(max_steps="3", hyde="true", temperature="0.5")  # type: ignore[arg-type]
    assert (cfg.max_steps, cfg.hyde, cfg.temperature) == (3, True, 0.5)
    assert NaiveRagContext(sentence_window="off").sentence_window is False  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cls", "values", "fragment"),
    [
        (AragContext, {"max_steps": "many"}, "max_steps='many'"),
        (AragContext, {"max_steps": 2.5}, "max_steps=2.5"),
        (AragContext, {"max_steps": 0}, "greater than or equal to 1"),
        (AragContext, {"top_k": 99}, f"less than or equal to {TOP_K_MAX}"),
        (AragContext, {"top_k": 0}, "greater than or equal to 1"),
        (AragContext, {"tools": "everything"}, "'full', 'no_keyword_search'"),
        (AragContext, {"hyde": "maybe"}, "hyde='maybe'"),
        (AragContext, {"temperature": math.nan}, "finite number"),
        (AragContext, {"temperature": "nan"}, "finite number"),
        (AragContext, {"max_tokens": math.inf}, "finite number"),
        (AragContext, {"max_tokens": "inf"}, "max_tokens='inf'"),
        (NaiveRagContext, {"retriever": "sparse"}, "'dense', 'bm25', 'hybrid', 'amr' or 'dsi'"),
        (CoragContext, {"loop_similarity": 1.5}, "less than or equal to 1"),
        (CoragContext, {"loop_similarity": 0}, "greater than 0"),
        (SragContext, {"relevance_threshold": -0.1}, "relevance_threshold=-0.1"),
    ],
)
def test_bad_values_fail_with_one_line_naming_the_field(cls: type, values: dict, fragment: str) -> None:
    with pytest.raises(ContextError) as err:
        cls(**values)
    assert fragment in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, AragError)


def test_every_field_of_every_graph_has_a_description_and_numbers_have_bounds() -> None:
    """What `langgraph dev` serves to Studio as the graph's form (its context JSON schema)."""
    for name, spec in GRAPHS.items():
        schema = spec.config.model_json_schema()
        for field, prop in schema["properties"].items():
            assert prop.get("description"), f"{name}.{field} has no description"
            if prop.get("type") in ("integer", "number"):
                low = "minimum" in prop or "exclusiveMinimum" in prop
                high = "maximum" in prop or "exclusiveMaximum" in prop
                assert low and high, f"{name}.{field} has no bounds"
        assert spec.config().top_k == 5, name
        assert config_for(name, top_k=7, not_a_field=1).top_k == 7


def test_a_context_that_is_not_ours_gives_the_defaults() -> None:
    """A parent graph's own context reaches a subgraph: it is ignored, not an error."""

    class ParentCtx(BaseModel):
        user_id: str = "u1"
        top_k: str = "lots"

    @dataclasses.dataclass
    class ParentDataclass:
        max_steps: int = 99

    assert AragContext.of_run(ParentCtx()) == AragContext()
    assert AragContext.of_run(ParentDataclass()) == AragContext()
    assert AragContext.of_run(None) == AragContext()
    assert AragContext.of_run({"max_steps": "4", "user_id": "x"}).max_steps == 4  # unknown keys ignored
    shared = AragContext.of_run(CoragContext(top_k=3, max_steps=2))
    assert (shared.top_k, shared.max_steps) == (3, 15)  # what the graphs share is kept, the rest defaults


# ---------------------------------------------------------------------------------------------
# What a caller may choose (the operator's policy)


@pytest.fixture
def operator_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("ARAG_MODEL", "ARAG_ALLOWED_MODELS", "ARAG_BASE_URL", "OPENAI_BASE_URL", "ARAG_ALLOWED_BASE_URLS"):
        monkeypatch.delenv(name, raising=False)
    root = tmp_path / "indexes"
    (root / "mine").mkdir(parents=True)
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(root))
    monkeypatch.delenv("ARAG_INDEX", raising=False)
    return root


def test_a_caller_cannot_point_the_model_at_another_host(operator_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RunRefused, match=r"base_url 'http://attacker\.example/v1' is not allowed") as err:
        AragContext(base_url="http://attacker.example/v1")
    assert "\n" not in str(err.value)
    monkeypatch.setenv("ARAG_ALLOWED_BASE_URLS", "http://localhost:8000/v1/, http://gpu-box:9000/v1")
    assert AragContext(base_url="http://LOCALHOST:8000/v1").choice().base_url == "http://LOCALHOST:8000/v1"
    with pytest.raises(RunRefused):
        AragContext(base_url="http://localhost:8001/v1")
    with pytest.raises(RunRefused, match="credentials"):
        AragContext(base_url="http://user:secret@localhost:8000/v1")


def test_allowed_base_urls_are_compared_with_their_path(operator_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README promises an exact comparison (scheme, host, port, path): another path on an allowed
    host is another endpoint (a proxy's other route, a caller's collector), for runs and for indexes."""
    from types import SimpleNamespace

    monkeypatch.setenv("ARAG_ALLOWED_BASE_URLS", "http://gpu-box:9000/v1")
    assert AragContext(base_url="http://gpu-box:9000/v1/").choice().base_url == "http://gpu-box:9000/v1/"
    policy = ServingPolicy.from_env()
    for other in (
        "http://gpu-box:9000/v2",
        "http://gpu-box:9000/",
        "http://gpu-box:9000",
        "http://gpu-box:9000/v1/collect",
        "http://gpu-box:9000/attacker/v1",
        "http://gpu-box:9000/V1",
    ):
        with pytest.raises(RunRefused, match=r"is not allowed on this server") as err:
            AragContext(base_url=other)
        assert repr(other) in str(err.value)
        manifest = SimpleNamespace(embedding_model="openai:text-embedding-3-small", embedding_base_url=other)
        with pytest.raises(RunRefused, match="an endpoint this server does not allow"):
            policy.check_index_endpoint(manifest)
    allowed = SimpleNamespace(
        embedding_model="openai:text-embedding-3-small", embedding_base_url="http://gpu-box:9000/v1"
    )
    policy.check_index_endpoint(allowed)  # the allowed endpoint itself passes


def test_every_endpoint_refusal_says_what_is_allowed_and_who_sets_it(
    operator_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killing bench/mutation.py's survivors in policy.py: each refusal's exact line (what was asked,
    what is allowed, the setting that allows more), credentials in any part of the URL, the spellings
    that are one endpoint, and the default endpoint from OPENAI_BASE_URL."""
    from types import SimpleNamespace

    from arag_graph.run.policy import normalize_url

    with pytest.raises(RunRefused) as err:
        normalize_url("ftp://files.example/v1")
    assert str(err.value) == (
        "base_url 'ftp://files.example/v1' is not an http(s) URL; give one such as http://localhost:8000/v1"
    )
    for no_host in ("http:///v1", "https://"):
        with pytest.raises(RunRefused, match=r"is not an http\(s\) URL"):
            normalize_url(no_host)
    for secret in ("http://user@host:1/v1", "http://:pw@host:1/v1", "http://user:pw@host:1/v1"):
        with pytest.raises(RunRefused) as err:
            normalize_url(secret)
        assert str(err.value) == "base_url must not contain credentials; the server's environment provides keys"
    assert normalize_url(" HTTPS://GPU-Box.Example:9000/v1/ ") == "https://gpu-box.example:9000/v1"
    assert normalize_url("http://h/v1?x=1").endswith("/v1?x=1") and normalize_url("http://h/v1#frag").endswith("/v1")
    assert normalize_url("http://h/v1") == normalize_url("http://h:80/v1")  # one endpoint, both spellings

    with pytest.raises(RunRefused) as err:
        ServingPolicy.from_env().base_url("http://elsewhere/v1")
    assert str(err.value) == (
        "base_url 'http://elsewhere/v1' is not allowed on this server; allowed: none besides the default "
        "(the operator sets ARAG_ALLOWED_BASE_URLS)"
    )
    monkeypatch.setenv("ARAG_ALLOWED_BASE_URLS", "http://b:2/v1,http://a:1/v1")
    with pytest.raises(RunRefused) as err:
        ServingPolicy.from_env().base_url("http://elsewhere/v1")
    assert "; allowed: http://a:1/v1, http://b:2/v1 (the operator sets ARAG_ALLOWED_BASE_URLS)" in str(err.value)

    monkeypatch.delenv("ARAG_ALLOWED_BASE_URLS")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://openai-proxy:8080/v1")
    policy = ServingPolicy.from_env()
    assert policy.default_base_url == "http://openai-proxy:8080/v1" and policy.base_url("") == policy.default_base_url
    assert policy.base_url("http://OPENAI-PROXY:8080/v1/") == "http://OPENAI-PROXY:8080/v1/"

    long_url = "http://collector.example/" + "x" * 200
    manifest = SimpleNamespace(embedding_model="openai:text-embedding-3-small", embedding_base_url=long_url)
    with pytest.raises(RunRefused) as err:
        policy.check_index_endpoint(manifest)
    assert str(err.value) == (
        f"this index embeds queries at {long_url[:100]!r}, an endpoint this server does not allow; the "
        "operator may add it to ARAG_ALLOWED_BASE_URLS, or choose another index"
    )
    not_http = SimpleNamespace(embedding_model="openai:e", embedding_base_url="file:///etc/passwd")
    with pytest.raises(RunRefused, match="an endpoint this server does not allow"):
        policy.check_index_endpoint(not_http)
    policy.check_index_endpoint(SimpleNamespace(embedding_model="openai:e", embedding_base_url=None))  # env's own
    policy.check_index_endpoint(SimpleNamespace(embedding_model="/models/minilm", embedding_base_url=long_url))
    policy.check_index_endpoint(SimpleNamespace(embedding_base_url=long_url))  # no model named: the default one


def test_models_are_chosen_among_those_the_operator_allows(operator_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert AragContext().choice().model == "offline"
    with pytest.raises(RunRefused, match="model 'gpt-4o' is not allowed"):
        AragContext(model="gpt-4o")
    monkeypatch.setenv("ARAG_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "gpt-5-mini")
    assert AragContext().choice().model == "gpt-4o-mini"
    assert AragContext(model="gpt-5-mini").choice().model == "gpt-5-mini"
    assert AragContext(model="offline").choice().model == "offline"
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "*")
    assert AragContext(model="anything").choice().model == "anything"


def test_index_paths_stay_under_the_operators_root(operator_env: Path, tmp_path: Path) -> None:
    assert AragContext(index_path="mine").choice().index_path == str(operator_env / "mine")
    assert AragContext(index_path=str(operator_env / "mine")).choice().index_path == str(operator_env / "mine")
    assert AragContext(index_path="a/../mine/").choice().index_path == str(operator_env / "mine")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for escape in ("../elsewhere", str(outside), "/etc", "mine/../../elsewhere"):
        with pytest.raises(RunRefused, match="outside the index root"):
            AragContext(index_path=escape)


def _planted_and_linked(root: Path, private: Path) -> None:
    """Under the root: ``planted``, a real index directory whose build files link to the private
    index's (identical bytes, so its checksums match), and ``linked``, a link to the private index."""
    from arag_graph.index.layout import BUILDS, CURRENT

    planted = root / "planted"
    shutil.copytree(private, planted, symlinks=True)
    build = (planted / CURRENT).read_text(encoding="utf-8").strip()
    for path in (planted / BUILDS / build).iterdir():
        if path.name.startswith(("chunks", "keywords")):
            path.unlink()
            path.symlink_to(private / BUILDS / build / path.name)
    (root / "linked").symlink_to(private, target_is_directory=True)


def test_a_served_run_reads_no_index_through_a_symbolic_link(
    operator_env: Path, tmp_path: Path, sample_index: Any
) -> None:
    """The issue's severe case: an index planted under the root whose files link to a private index
    outside it served that corpus. Every link below the root is refused, in one line naming the path
    as the caller gave it, never the operator's directories; the real copy still loads."""
    from arag_graph.run.runtime import load_run_index

    private = tmp_path / "private"
    shutil.copytree(sample_index.path, private, symlinks=True)
    _planted_and_linked(operator_env, private)
    shutil.copytree(private, operator_env / "real", symlinks=True)
    for name, fragment in (
        ("planted", "is a symbolic link, which arag does not follow"),
        ("linked", "'linked' is a symbolic link, which arag does not follow under the index root"),
        ("mine", "no index found"),
        ("missing/deeper", "'missing' cannot be read (it is missing)"),
    ):
        with pytest.raises(RunRefused) as caught:
            load_run_index(AragContext(index_path=name).choice().index_path, served=True)
        message = str(caught.value)
        assert fragment in message and "\n" not in message, message
        assert str(tmp_path) not in message, message  # neither the root nor the private index
    assert len(load_run_index(AragContext(index_path="real").choice().index_path, served=True)) == len(sample_index)


def test_a_served_run_on_a_bad_index_fails_with_a_line_the_server_passes_on(operator_env: Path) -> None:
    """LangGraph's server sends a caller the message of a ValueError only (others: "An internal
    error occurred"): a served run's index that cannot be loaded is refused as one."""
    from arag_graph.registry import build_graph

    graph = build_graph("naive_rag")
    with pytest.raises(ValueError, match="index_path 'mine' cannot be used: mine: no index found") as caught:
        graph.invoke({"question": "Which town?"}, context={"index_path": "mine"})
    assert str(operator_env) not in str(caught.value)


def test_without_an_index_root_runs_cannot_choose_an_index(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARAG_INDEX_ROOT", raising=False)
    monkeypatch.setenv("ARAG_INDEX", "/srv/indexes/main")
    assert AragContext().choice().index_path == "/srv/indexes/main"
    assert AragContext(index_path="/srv/indexes/main").choice().index_path == "/srv/indexes/main"
    with pytest.raises(RunRefused, match="does not let runs choose an index"):
        AragContext(index_path="/srv/indexes/other")


def test_the_operator_sets_anything_through_trusted(operator_env: Path) -> None:
    """The CLI and the evaluation runner are the operator: their own contexts are not policed."""
    cfg = AragContext.trusted(base_url="http://localhost:1/v1", model="gpt-4o", top_k=None)
    assert (cfg.choice().base_url, cfg.choice().model, cfg.top_k) == ("http://localhost:1/v1", "gpt-4o", 5)
    assert CoragContext.of_run(cfg).choice().base_url == "http://localhost:1/v1"  # trust carries over
    with pytest.raises(ContextError):
        AragContext.trusted(top_k=0)  # bounds still hold


def test_the_policy_reads_the_environment_when_a_run_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARAG_BASE_URL", "http://localhost:7/v1")
    monkeypatch.delenv("ARAG_ALLOWED_BASE_URLS", raising=False)
    policy = ServingPolicy.from_env()
    assert policy.default_base_url == "http://localhost:7/v1"
    assert policy.base_url("") == "http://localhost:7/v1"
    assert policy.base_url("http://localhost:7/v1/") == "http://localhost:7/v1/"  # the same endpoint
    with pytest.raises(RunRefused):
        GraphContext(base_url="https://localhost:7/v1")  # another scheme is another endpoint


def test_an_unknown_context_key_is_a_warning_in_a_library_run(sample_index: Any) -> None:
    """``max_step`` (for ``max_steps``) was dropped in silence: the run went on with the default cap."""
    from arag_graph.agent.graph import build_arag_graph
    from arag_graph.run.configuration import UnknownContextKeyWarning

    graph = build_arag_graph(sample_index, "offline")
    with pytest.warns(
        UnknownContextKeyWarning, match=r"AragContext has no setting 'max_step'; its settings are: .*max_steps"
    ):
        out = graph.invoke({"question": "Who directed Maximum Overdrive?"}, context={"max_step": 2, "top_k": 3})
    assert out.get("error") is None and out["answer"]


def test_an_unknown_context_key_is_refused_in_one_line_by_the_served_graph_factory() -> None:
    """LangGraph's server drops context keys the schema lacks before the graph sees them; the graph
    factory of langgraph.json sees the run's context first and refuses them (the SDK test is in
    tests/slow/test_served_security.py). Other uses of the factory (schemas, state) are not runs."""
    from langgraph_sdk.runtime import _ExecutionRuntime, _ReadRuntime

    from arag_graph.registry import served_graph

    factory = served_graph("corag")
    run = _ExecutionRuntime(access_context="threads.create_run", user=None, store=None, context={"beams": 2})
    refused = r"^CoragContext has no setting 'beams'; its settings are: .*beam,"
    with pytest.raises(ContextError, match=refused) as caught:
        factory(run)
    assert "\n" not in str(caught.value)
    known = _ExecutionRuntime(access_context="threads.create_run", user=None, store=None, context={"beam": 2})
    read = _ReadRuntime(access_context="assistants.read", user=None, store=None)
    assert factory(known) is factory(read)  # one compiled graph; settings come from each run's context
    with pytest.raises(ContextError, match="unknown configuration field"):
        AragContext.trusted(max_step=3)  # the operator's own contexts refuse one in words of their own


def test_each_context_schema_has_a_typeddict_with_the_same_fields_and_types() -> None:
    """``context={...}`` is typed by ``<Schema>Dict`` (tests/test_typing.py): it must list exactly the
    schema's fields, with the same types, none required, or mypy would pass a mistake or refuse a
    right call."""
    import typing

    from arag_graph.run import configuration

    schemas = [v for v in vars(configuration).values() if isinstance(v, type) and issubclass(v, GraphContext)]
    names = {s.__name__ for s in schemas}
    assert {"AragContext", "AragNaiveContext", "CoragContext", "SragContext", "NaiveRagContext"} <= names
    for schema in schemas:
        settings = getattr(configuration, f"{schema.__name__}Dict", None)
        assert settings is not None, f"{schema.__name__} has no {schema.__name__}Dict"
        fields = {name: field.annotation for name, field in schema.model_fields.items()}
        assert typing.get_type_hints(settings) == fields, schema.__name__
        assert not settings.__required_keys__, schema.__name__
