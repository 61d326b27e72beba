"""Embedding models with query and document prompts (E5, BGE, Qwen3-Embedding): applied, recorded, kept.

A tiny sentence-transformers folder is made here (tests/test_embedding_models.make_tiny_model) and
given the ``prompts`` of ``config_sentence_transformers.json`` that instruction-tuned embedders ship.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arag_graph.core.errors import IndexMismatchError
from arag_graph.index.build import build_index
from arag_graph.index.encoders import PROMPTS_CONFIG, SentenceEncoder, default_embeddings, read_prompts
from arag_graph.index.load import load_index
from tests.test_embedding_models import DOCS, make_tiny_model

E5 = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": None}


def with_prompts(folder: Path, config: dict[str, Any]) -> Path:
    path = folder / PROMPTS_CONFIG
    current = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    path.write_text(json.dumps({**current, **config}), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("prompted") / "model"
    make_tiny_model(folder)
    return with_prompts(folder, E5)


def test_the_prompts_of_a_folder_are_read_as_sentence_transformers_defines_them(tmp_path: Path) -> None:
    assert read_prompts(with_prompts(tmp_path, E5)) == {"query": "query: ", "document": "passage: "}
    qwen = {"prompts": {"query": "Instruct: Find passages.\nQuery:", "document": ""}, "default_prompt_name": None}
    assert read_prompts(with_prompts(tmp_path, qwen)) == {"query": "Instruct: Find passages.\nQuery:"}
    default = {"prompts": {"retrieval": "Represent: "}, "default_prompt_name": "retrieval"}
    (tmp_path / PROMPTS_CONFIG).unlink()
    assert read_prompts(with_prompts(tmp_path, default)) == {"query": "Represent: ", "document": "Represent: "}
    (tmp_path / PROMPTS_CONFIG).write_text("{not json", encoding="utf-8")
    assert read_prompts(tmp_path) == {} and read_prompts(tmp_path / "absent") == {}


def test_queries_and_passages_are_encoded_behind_their_prompts(tiny: Path) -> None:
    encoder = SentenceEncoder(str(tiny))
    assert encoder.prompts == {"query": "query: ", "document": "passage: "}
    text = "Which river flows into the sea?"
    assert np.allclose(encoder.embed_query(text), encoder.encode(["query: " + text])[0])
    assert np.allclose(encoder.embed_documents([text])[0], encoder.encode(["passage: " + text])[0])
    assert not np.allclose(encoder.embed_query(text), encoder.encode([text])[0])  # the prompt changes the vector


def test_an_index_records_the_prompts_and_queries_with_them_whatever_the_folder_says_later(
    tiny: Path, tmp_path: Path
) -> None:
    model = tmp_path / "model"
    import shutil

    shutil.copytree(tiny, model)
    index = build_index(DOCS, tmp_path / "index", embeddings=str(model), progress=False)
    assert index.manifest.embedding_prompts == {"query": "query: ", "document": "passage: "}
    hits = index.semantic_search("Which river flows into the sea?", 1)
    assert hits

    with_prompts(model, {"prompts": {"query": "search: "}})  # the folder changes after the build
    again = load_index(tmp_path / "index", cache=False)
    assert again.embeddings.prompts == {"query": "query: ", "document": "passage: "}  # the recorded ones
    assert [h.chunk_id for h in again.semantic_search("Which river flows into the sea?", 1)] == [hits[0].chunk_id]

    with pytest.raises(IndexMismatchError, match="prompts"):
        load_index(tmp_path / "index", embeddings=SentenceEncoder(str(model)), cache=False)


def test_the_default_onnx_encoder_has_no_prompts_and_its_index_records_none(sample_index: Any) -> None:
    assert default_embeddings().prompts == {}
    assert sample_index.manifest.embedding_prompts == {}
    assert sample_index.semantic_search("Leland, North Carolina", 1)
