"""Calls mypy must REJECT (tests/test_typing.py), as in context_mistakes.py: each line whose comment
starts `rejected:` must be a mypy error whose line contains the rest of that comment, and no other
line may be one. Never run, only checked.

Each was accepted before (issue 37): ``invoke()``'s plain call returned ``dict[str, Any] | Any``, so
a misspelt output key or a wrong type passed; ``create_retrieval_tools(tools=...)`` took any string.
"""

from __future__ import annotations

from arag_graph import create_retrieval_tools, load_index
from arag_graph.arag.graph import build_arag_graph
from arag_graph.corag.graph import build_corag_graph

index = load_index("indexes/sample")
graph = build_arag_graph(index, "offline")

out = graph.invoke({"question": "Who directed Maximum Overdrive?"})
answer: str = out["answer"]
out["answr"]  # rejected: TypedDict "AragOutputState" has no key "answr"
steps: int = out["answer"]  # rejected: [assignment]


async def later() -> None:
    done = await build_corag_graph(index).ainvoke({"question": "q"}, context={"decoding": "tree"})
    chain = done["chain"]
    done["chians"]  # rejected: TypedDict "CoragOutputState" has no key "chians"
    print(chain)


create_retrieval_tools(index, tools=["keyword_search", "chunk_read"])
create_retrieval_tools(index, tools=["keyword_serch"])  # rejected: [list-item]
