"""HyDE (ARAGOG): embed a model-written hypothetical answer passage instead of the raw query.

A question and its answer passage are worded differently; embedding a plausible passage moves the
query vector towards the passages that answer it. Used by ``naive_rag``, ``corag`` and A-RAG's
semantic_search when the configuration turns ``hyde`` on.

The offline policy cannot write a passage, so with it HyDE embeds the question unchanged (HyDE
off, in effect); that is stated here rather than faked.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig

from arag_graph.index import HierarchicalIndex

HYDE_PROMPT = """\
Write one short encyclopedia-style paragraph (three or four sentences) that answers the question \
below. If you are unsure of facts, write what such a paragraph would plausibly say; it is only used \
to search for real documents.

Question: {question}\
"""


def hypothetical_passage(model: BaseChatModel, question: str, config: RunnableConfig | None = None) -> str:
    """The passage to embed for ``question`` (the question itself for the offline policy)."""
    from arag_graph.offline import OfflinePolicy

    if isinstance(model, OfflinePolicy):
        return question
    reply = model.invoke([HumanMessage(HYDE_PROMPT.format(question=question))], config)
    text = reply.text.strip()
    return text or question


def hyde_vector(
    index: HierarchicalIndex, model: BaseChatModel, question: str, config: RunnableConfig | None = None
) -> Sequence[float]:
    """The query vector HyDE searches with (same encoder as the index, query-side)."""
    return index.embeddings.embed_query(hypothetical_passage(model, question, config))
