"""Context schemas: what Studio renders, what a caller may set, and the one-line refusals."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from arag_graph.arag.context import AragContext
from arag_graph.baselines.context import NaiveRagContext
from arag_graph.corag.context import CoragContext
from arag_graph.core.errors import AragError
from arag_graph.registry import GRAPHS, config_for
from arag_graph.run.configuration import TOP_K_MAX, ContextError, GraphContext
from arag_graph.run.policy import RunRefused, ServingPolicy
from arag_graph.srag.context import SragContext


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


def test_each_kind_of_client_reaches_only_its_own_endpoints_and_is_refused_in_one_exact_line(
    operator_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ServingPolicy.check_endpoint, the rule every client builder calls in a served run: model and
    embeddings clients share the base-URL list (OpenAI's own API when no default is configured), a
    Chroma client has its own list from both Chroma settings, in Chroma's spellings (``HOST:PORT``
    is http, port 8000 by default); a URL that is not http(s) is never allowed."""
    from arag_graph.run.policy import OPENAI_API, chroma_endpoint, normalize_url

    for name in ("ARAG_CHROMA_URL", "ARAG_ALLOWED_CHROMA_URLS"):
        monkeypatch.delenv(name, raising=False)
    # Chroma's spellings, one endpoint each
    assert chroma_endpoint(" chroma-a:9000 ") == "http://chroma-a:9000"
    assert chroma_endpoint("chroma-a") == "http://chroma-a:8000"
    assert chroma_endpoint("https://chroma-b/db") == "https://chroma-b:443/db"
    assert chroma_endpoint("http://chroma-b/db?x=1") == "http://chroma-b:8000/db"
    assert chroma_endpoint("[::1]") == "http://[::1]:8000"
    for typo, shown in (("chroma-a:80OO", "http://chroma-a:80OO"), ("https://chroma-a:99999", None)):
        with pytest.raises(RunRefused) as err:  # never silently the default port
            chroma_endpoint(typo)
        assert str(err.value) == (
            f"Chroma URL {shown or typo!r} is not an http(s) URL; give one such as http://localhost:8000/v1"
        )
    with pytest.raises(RunRefused) as err:
        chroma_endpoint("ftp://chroma-a:21")
    assert str(err.value) == (
        "Chroma URL 'ftp://chroma-a:21' is not an http(s) URL; give one such as http://localhost:8000/v1"
    )
    # base URLs: a port that is not a number is refused, IPv6 hosts keep their brackets, the path is exact
    for bad in ("http://gpu-box:port/v1", "http://gpu-box:99999/v1"):
        with pytest.raises(RunRefused, match=r"is not an http\(s\) URL"):
            normalize_url(bad)
    long_url = "ftp://" + "x" * 200
    with pytest.raises(RunRefused) as err:
        normalize_url(long_url)
    assert str(err.value).startswith(f"base_url {long_url[:100]!r} is not")
    assert normalize_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
    assert normalize_url("http://[FE80::1]/v1") == "http://[fe80::1]:80/v1"
    assert normalize_url("http://h/v1/X//") == "http://h:80/v1/X"

    monkeypatch.setenv("ARAG_ALLOWED_CHROMA_URLS", "chroma-a:9000, https://chroma-b")
    monkeypatch.setenv("ARAG_CHROMA_URL", "chroma-c")
    policy = ServingPolicy.from_env()
    assert policy.endpoints("chroma") == {"http://chroma-a:9000", "https://chroma-b:443", "http://chroma-c:8000"}
    for kind in ("model", "embeddings"):
        assert policy.endpoints(kind) == {normalize_url(OPENAI_API)}  # no default: OpenAI's own API only
        assert policy.allows(kind, OPENAI_API) and not policy.allows(kind, "http://chroma-c:8000")
    assert policy.allows("chroma", "http://CHROMA-C:8000/") and not policy.allows("chroma", OPENAI_API)
    assert not policy.allows("chroma", "chroma-c:8000")  # a client's URL is checked as it is called
    policy.check_endpoint("chroma", "http://chroma-a:9000", "the sentence store")
    policy.check_endpoint("model", OPENAI_API + "/", "the chat model")
    with pytest.raises(RunRefused) as err:
        policy.check_endpoint("chroma", "http://user:secret@chroma-d:8000", "the sentence store")
    assert str(err.value) == (
        "the sentence store would send requests to 'http://***@chroma-d:8000', an endpoint this server does "
        "not allow; the operator may add it to ARAG_ALLOWED_CHROMA_URLS, or choose another"
    )
    with pytest.raises(RunRefused) as err:
        policy.check_endpoint("embeddings", "http://chroma-a:9000/" + "v" * 200, "the embeddings client")
    assert str(err.value) == (
        f"the embeddings client would send requests to {('http://chroma-a:9000/' + 'v' * 200)[:100]!r}, an "
        "endpoint this server does not allow; the operator may add it to ARAG_ALLOWED_BASE_URLS, or choose another"
    )
    with pytest.raises(RunRefused) as err:
        policy.check_endpoint("model", None, "the chat model")
    assert str(err.value) == (
        "the chat model: cannot tell which endpoint it would call, so this server does not build it; the "
        "operator may choose another model"
    )
    # with a default endpoint configured, OpenAI's own API is no longer implied
    monkeypatch.setenv("ARAG_BASE_URL", "http://gpu-box:9000/v1")
    policy = ServingPolicy.from_env()
    assert policy.endpoints("model") == {"http://gpu-box:9000/v1"} == policy.endpoints("embeddings")
    with pytest.raises(RunRefused, match="ARAG_ALLOWED_BASE_URLS"):
        policy.check_endpoint("model", OPENAI_API, "the chat model")
    # each Chroma setting alone fills the Chroma list; neither: no Chroma server at all
    monkeypatch.delenv("ARAG_CHROMA_URL")
    assert ServingPolicy.from_env().endpoints("chroma") == {"http://chroma-a:9000", "https://chroma-b:443"}
    monkeypatch.delenv("ARAG_ALLOWED_CHROMA_URLS")
    assert ServingPolicy.from_env().endpoints("chroma") == frozenset()
    monkeypatch.setenv("ARAG_CHROMA_URL", "chroma-c")
    assert ServingPolicy.from_env().endpoints("chroma") == {"http://chroma-c:8000"}


def test_a_chosen_index_models_folder_loads_only_from_the_index_root_or_the_model_roots(
    operator_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The policy's rule on a manifest's model folder, without building an index (the end-to-end run
    is in tests/test_embedding_models.py): a folder outside the index root and
    ARAG_EMBEDDING_MODEL_ROOTS is refused in one exact line, each root (reached through a link too)
    allows it, the operator's default index (any spelling of it) is not checked, and the manifest's
    endpoint is checked first."""
    from types import SimpleNamespace

    from arag_graph.index.encoders import DEFAULT_MODEL_ID

    monkeypatch.delenv("ARAG_EMBEDDING_MODEL_ROOTS", raising=False)
    outside = tmp_path / "models" / ("minilm-" + "l" * 100)  # a message shows its first 100 characters
    outside.mkdir(parents=True)
    (operator_env / "models" / "inside").mkdir(parents=True)
    chosen = str(operator_env / "mine")
    folder = SimpleNamespace(embedding_model=str(outside), embedding_base_url=None)
    policy = ServingPolicy.from_env()
    with pytest.raises(RunRefused) as err:
        policy.check_index_models(folder, chosen)
    assert str(err.value) == (
        f"this index loads its embedding model from {str(outside.resolve())[:100]!r}, outside the folders this server "
        "allows; the operator may add that folder to ARAG_EMBEDDING_MODEL_ROOTS, or choose another index"
    )
    # a folder under the index root, or named through a link that resolves to it, is the operator's
    policy.check_index_models(SimpleNamespace(embedding_model=str(operator_env / "models" / "inside")), chosen)
    (tmp_path / "root-link").symlink_to(operator_env, target_is_directory=True)
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(tmp_path / "root-link"))
    linked_root = ServingPolicy.from_env()
    linked_root.check_index_models(SimpleNamespace(embedding_model=str(operator_env / "models" / "inside")), chosen)
    with pytest.raises(RunRefused, match="outside the folders this server allows"):
        linked_root.check_index_models(folder, chosen)
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(operator_env))

    # the model roots, each of them, allow it: a link to a root counts as the root
    (tmp_path / "models-link").symlink_to(tmp_path / "models", target_is_directory=True)
    for roots in ([tmp_path / "elsewhere", tmp_path / "models"], [tmp_path / "models-link"]):
        monkeypatch.setenv("ARAG_EMBEDDING_MODEL_ROOTS", os.pathsep.join(map(str, roots)))
        ServingPolicy.from_env().check_index_models(folder, chosen)
    monkeypatch.setenv("ARAG_EMBEDDING_MODEL_ROOTS", str(tmp_path / "elsewhere"))
    with pytest.raises(RunRefused, match="outside the folders"):
        ServingPolicy.from_env().check_index_models(folder, chosen)
    # without an index root, only the model roots count
    monkeypatch.delenv("ARAG_INDEX_ROOT")
    monkeypatch.setenv("ARAG_EMBEDDING_MODEL_ROOTS", str(tmp_path / "models"))
    ServingPolicy.from_env().check_index_models(folder, chosen)
    with pytest.raises(RunRefused, match="outside the folders"):
        ServingPolicy.from_env().check_index_models(
            SimpleNamespace(embedding_model=str(operator_env / "models" / "inside")), chosen
        )
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(operator_env))
    monkeypatch.delenv("ARAG_EMBEDDING_MODEL_ROOTS")

    # the operator's default index is theirs, however the run spells its path; another index is not
    monkeypatch.setenv("ARAG_INDEX", chosen)
    ServingPolicy.from_env().check_index_models(folder, str(operator_env / "x" / ".." / "mine"))
    (tmp_path / "mine-link").symlink_to(operator_env / "mine", target_is_directory=True)
    ServingPolicy.from_env().check_index_models(folder, tmp_path / "mine-link")
    (operator_env / "other").mkdir()
    with pytest.raises(RunRefused, match="outside the folders"):
        ServingPolicy.from_env().check_index_models(folder, str(operator_env / "other"))
    monkeypatch.delenv("ARAG_INDEX")

    # no folder to check: the packaged model, a model name, an endpoint, no model named
    for spec in (DEFAULT_MODEL_ID, "sentence-transformers/all-MiniLM-L6-v2", "", str(tmp_path / "missing")):
        policy.check_index_models(SimpleNamespace(embedding_model=spec), chosen)
    policy.check_index_models(SimpleNamespace(), chosen)
    # nor is a folder of the working directory read for a manifest naming no model; and with
    # ARAG_EMBEDDING_MODEL_ROOTS unset, no folder there is a model root either
    monkeypatch.chdir(tmp_path)
    for name in ("None", "XXXX"):
        (tmp_path / name / "model").mkdir(parents=True)
    for nothing in (SimpleNamespace(), SimpleNamespace(embedding_model=None), SimpleNamespace(embedding_model="")):
        ServingPolicy.from_env().check_index_models(nothing, chosen)
    for name in ("None", "XXXX"):
        with pytest.raises(RunRefused, match="outside the folders"):
            ServingPolicy.from_env().check_index_models(
                SimpleNamespace(embedding_model=str(tmp_path / name / "model")), chosen
            )
    # the endpoint a manifest names is checked as well, before anything else
    collector = SimpleNamespace(embedding_model="openai:e", embedding_base_url="http://collector.example/v1")
    with pytest.raises(RunRefused, match=r"this index embeds queries at 'http://collector\.example/v1'"):
        policy.check_index_models(collector, chosen)


def test_resolve_fills_what_a_run_leaves_empty_with_the_operators_defaults(
    operator_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ServingPolicy.resolve: each choice checked by its own rule, each empty one the default."""
    from arag_graph.run.policy import RunChoice

    monkeypatch.setenv("ARAG_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("ARAG_BASE_URL", "http://gpu-box:9000/v1")
    monkeypatch.setenv("ARAG_INDEX", str(operator_env / "mine"))
    policy = ServingPolicy.from_env()
    assert policy.resolve("", " ", "") == RunChoice("gpt-4o-mini", "http://gpu-box:9000/v1", str(operator_env / "mine"))
    other = str(operator_env / "other")
    assert policy.resolve("offline", "http://GPU-box:9000/v1/", "other") == RunChoice(
        "offline", "http://GPU-box:9000/v1/", other
    )
    for model, url, index, refused in (
        ("gpt-5", "", "", "model 'gpt-5'"),
        ("", "http://elsewhere/v1", "", "base_url 'http://elsewhere/v1'"),
        ("", "", "../out", "index_path '../out'"),
    ):
        with pytest.raises(RunRefused, match=refused):
            policy.resolve(model, url, index)


def test_models_are_chosen_among_those_the_operator_allows(operator_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert AragContext().choice().model == "offline"
    assert AragContext().choice().index_path is None  # no ARAG_INDEX: the bundled sample
    with pytest.raises(RunRefused, match="model 'gpt-4o' is not allowed"):
        AragContext(model="gpt-4o")
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "b-model, a-model")
    with pytest.raises(RunRefused) as err:
        ServingPolicy.from_env().model("gpt-4o")
    assert str(err.value) == (
        "model 'gpt-4o' is not allowed on this server; choose one of: a-model, b-model, offline "
        "(the operator sets ARAG_ALLOWED_MODELS)"
    )
    monkeypatch.setenv("ARAG_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "gpt-5-mini")
    assert AragContext().choice().model == "gpt-4o-mini"
    assert AragContext(model="gpt-5-mini").choice().model == "gpt-5-mini"
    assert AragContext(model="offline").choice().model == "offline"
    monkeypatch.setenv("ARAG_ALLOWED_MODELS", "*")
    assert AragContext(model="anything").choice().model == "anything"


def test_index_paths_stay_under_the_operators_root(
    operator_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert AragContext(index_path="mine").choice().index_path == str(operator_env / "mine")
    assert AragContext(index_path=str(operator_env / "mine")).choice().index_path == str(operator_env / "mine")
    assert AragContext(index_path="a/../mine/").choice().index_path == str(operator_env / "mine")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for escape in ("../elsewhere", str(outside), "/etc", "mine/../../elsewhere", "mine\x00"):
        with pytest.raises(RunRefused, match="outside the index root"):
            AragContext(index_path=escape)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARAG_INDEX_ROOT", "indexes")  # a relative root: an absolute request is outside it
    for escape in ("/etc", str(operator_env / "mine")):
        with pytest.raises(RunRefused, match="outside the index root"):
            AragContext(index_path=escape)
    assert AragContext(index_path="mine").choice().index_path == os.path.join("indexes", "mine")
    long_escape = "../" + "x" * 300
    with pytest.raises(RunRefused) as err:
        ServingPolicy.from_env().index_path(long_escape)
    assert str(err.value) == (
        f"index_path {long_escape[:200]!r} is outside the index root this server allows; give a path "
        "relative to that root"
    )


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
    with pytest.raises(RunRefused) as err:
        AragContext(index_path="/srv/indexes/other")
    assert str(err.value) == (
        "this server does not let runs choose an index (the operator sets ARAG_INDEX_ROOT to allow "
        "indexes under it); leave index_path empty"
    )


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
    from arag_graph.arag.graph import build_arag_graph
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
    import sys
    import typing

    from arag_graph.run.configuration import RetrievalContext

    # Every registered graph's schema, and the shared bases, each with its Dict in the same module.
    schemas = {GraphContext, RetrievalContext, *(spec.config for spec in GRAPHS.values())}
    names = {s.__name__ for s in schemas}
    assert {"AragContext", "AragNaiveContext", "CoragContext", "SragContext", "NaiveRagContext"} <= names
    for schema in schemas:
        settings = getattr(sys.modules[schema.__module__], f"{schema.__name__}Dict", None)
        assert settings is not None, f"{schema.__name__} has no {schema.__name__}Dict beside it"
        fields = {name: field.annotation for name, field in schema.model_fields.items()}
        assert typing.get_type_hints(settings) == fields, schema.__name__
        assert not settings.__required_keys__, schema.__name__
