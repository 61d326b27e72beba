"""LangChain's standard VectorStore tests (langchain-tests) against :class:`AragVectorStore`.

The peer suite every LangChain vector store passes: adding, upserting by id, deleting, reading by
id and searching, synchronously and asynchronously, each on a fresh index directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from arag_graph.index.vectorstore import AragVectorStore


class TestAragVectorStore(VectorStoreIntegrationTests):
    @pytest.fixture()
    def vectorstore(self, tmp_path: Path) -> Iterator[VectorStore]:  # type: ignore[override]
        yield AragVectorStore(path=tmp_path / "index", embedding=self.get_embeddings())
