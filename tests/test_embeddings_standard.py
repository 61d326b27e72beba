"""LangChain's standard embeddings tests for the package's own encoders (:mod:`arag_graph.index.encoders`).

The integration suite embeds queries and documents, sync and async, and checks their shape and
types; it runs on the real model bundled in site-packages (no download), for each backend:
sentence-transformers on torch, and the ONNX export in float32 and int8.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.embeddings import Embeddings
from langchain_tests.integration_tests import EmbeddingsIntegrationTests

from arag_graph.index.encoders import OnnxSentenceEncoder, SentenceEncoder

pytestmark = pytest.mark.integration


class TestTorchEncoderStandard(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return SentenceEncoder

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {}


class TestOnnxEncoderStandard(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[Embeddings]:
        return OnnxSentenceEncoder

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {}


class TestOnnxInt8EncoderStandard(TestOnnxEncoderStandard):
    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"quantized": True}
