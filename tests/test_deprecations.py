"""Breaking changes bump the version and keep old names working for one release (CHANGELOG.md).

The redesign removed ``HierarchicalIndex.as_retriever`` and moved modules (``arag_graph.agent`` is
``arag_graph.arag``, ...) with no deprecation path, and the version stayed 0.1.0. The old names now
warn (``DeprecationWarning``, naming the new one and the release that drops the old, at the line that
used them) and work, and the changelog's newest version is the package's.
"""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest
from langchain_core.documents import Document

import arag_graph
from arag_graph.core.deprecation import REMOVED_IN
from arag_graph.index.build import build_index
from tests.fakes import WordHashEmbeddings

REPO = Path(__file__).resolve().parents[1]
CHANGELOG = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
MOVED = {
    "arag_graph.agent": "arag_graph.arag",
    "arag_graph.agent.graph": "arag_graph.arag.graph",
    "arag_graph.agent.tools": "arag_graph.tools.toolkit",
    "arag_graph.agent.mcp_server": "arag_graph.tools.mcp_server",
    "arag_graph.retrieval": "arag_graph.retrievers",
    "arag_graph.retrieval.retrievers": "arag_graph.retrievers.passages",
    "arag_graph.retrieval.techniques": "arag_graph.retrievers.techniques",
    "arag_graph.retrieval.automerge": "arag_graph.retrievers.automerge",
    "arag_graph.retrieval.summaries": "arag_graph.retrievers.summaries",
    "arag_graph.retrieval.langchain_retriever": "arag_graph.retrievers.langchain_retriever",
}


def test_the_changelog_names_the_package_version() -> None:
    versions = re.findall(r"^## (\d+\.\d+\.\d+)", CHANGELOG, flags=re.M)
    assert versions and versions[0] == arag_graph.__version__, versions[:3]
    assert versions[0] != "0.1.0"  # the breaking changes below 0.1.0's heading bumped it
    assert versions == sorted(versions, key=lambda v: tuple(map(int, v.split("."))), reverse=True)


def test_the_old_as_retriever_warns_and_works(tmp_path: Path) -> None:
    from arag_graph import make_retriever

    docs = [Document(f"Passage {n} about lighthouse keepers and island {n}.", id=f"d{n}") for n in range(6)]
    index = build_index(docs, tmp_path / "index", embeddings=WordHashEmbeddings(), progress=False)
    with pytest.warns(DeprecationWarning, match=r"make_retriever\(index, search_type, k=k\)") as caught:
        retriever = index.as_retriever("semantic", k=2)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert REMOVED_IN in str(caught[0].message)
    expected = make_retriever(index, "semantic", k=2).invoke("island 3")
    assert retriever.invoke("island 3") == expected and len(expected) == 2


@pytest.mark.parametrize(("old", "new"), MOVED.items(), ids=list(MOVED))
def test_an_old_module_path_warns_and_forwards_every_name(old: str, new: str) -> None:
    moved = importlib.import_module(new)
    for name in [m for m in sys.modules if m == old or m.startswith(old + ".")]:
        del sys.modules[name]  # the alias warns when it is imported, so import it afresh
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alias = importlib.import_module(old)
    mine = [w for w in caught if issubclass(w.category, DeprecationWarning) and str(w.message).startswith(old + " ")]
    assert [str(w.message) for w in mine] == [f"{old} is deprecated: use {new} (the old name goes in {REMOVED_IN})"]
    public = [n for n in vars(moved) if not n.startswith("_")]
    assert all(getattr(alias, n) is getattr(moved, n) for n in public)
    with pytest.raises(AttributeError, match=f"now '{new}'"):
        alias.no_such_name  # noqa: B018
    assert f"`{old}` | `{new}`" in CHANGELOG
