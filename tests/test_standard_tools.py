"""LangChain's own standard test suites (langchain-tests) for the three A-RAG tools.

The tools are made the way an app makes them once at import: ``create_retrieval_tools()`` with no
index, so each call uses the index its run names (here the bundled sample).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

from arag_graph.tools.toolkit import create_retrieval_tools

KEYWORD, SEMANTIC, READ = create_retrieval_tools()
EXAMPLES: dict[str, dict[str, Any]] = {
    "keyword_search": {"keywords": ["Leland", "Maximum Overdrive"], "top_k": 3},
    "semantic_search": {"query": "Which films were shot in Leland, North Carolina?", "top_k": 3},
    "chunk_read": {"chunk_ids": ["5", "6"], "adjacent": True},
}


@pytest.fixture(autouse=True)
def _sample_index_built(sample_index: Any) -> None:
    """The runs' default index (the bundled sample), built once per session by the fixture."""


class _StandardTool:
    made: BaseTool

    @property
    def tool_constructor(self) -> BaseTool:
        return self.made

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return EXAMPLES[self.made.name]


class TestKeywordSearchUnit(_StandardTool, ToolsUnitTests):
    made = KEYWORD


class TestKeywordSearchIntegration(_StandardTool, ToolsIntegrationTests):
    made = KEYWORD


class TestSemanticSearchUnit(_StandardTool, ToolsUnitTests):
    made = SEMANTIC


class TestSemanticSearchIntegration(_StandardTool, ToolsIntegrationTests):
    made = SEMANTIC


class TestChunkReadUnit(_StandardTool, ToolsUnitTests):
    made = READ


class TestChunkReadIntegration(_StandardTool, ToolsIntegrationTests):
    made = READ
