"""Reading a run's outputs and an example's references: the fields every evaluator needs.

Each metric module reads the same few fields of the same two dicts (the target's ``outputs`` and
the example's ``reference_outputs``), tolerant in the same ways (a numeric chunk ID from JSON, a
gold answer given as one string or a list of aliases). They are read here, once, under public names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from arag_graph.core.errors import DatasetError

__all__ = ["GRADED_TEXT", "chunk_ids", "golds_of", "prediction_of", "question_of", "reply_of", "response_of"]

GRADED_TEXT = {
    "contain_acc": "the whole final reply",
    "llm_acc": "the whole final reply",
    "exact_match": "the short answer (the reply's Answer: line)",
    "f1": "the short answer (the reply's Answer: line)",
}
"""Which text of a run each answer metric grades, as the summary states it.

The A-RAG paper's released evaluator gives its whole final message to Contain-Acc and to the judge,
so a reply that names the gold answer in its reasoning and a shorter form on its last line
("... directed by Stephen King.\nAnswer: King") is correct, as in the paper's tables. EM (CoRAG) and
F1 (SRAG) are defined on a short answer, so they read the parsed ``Answer:`` line.
"""


def prediction_of(outputs: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """The predicted answer, plus a comment when the run produced none (scored as wrong)."""
    value = (outputs or {}).get("answer")
    if value is None:
        keys = ", ".join(sorted(outputs or {})) or "none"
        return "", f"the run returned no 'answer' (output keys: {keys}); scored as wrong"
    return (value if isinstance(value, str) else str(value)), None


def response_of(outputs: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """The model's whole final answer (``response``: its last message, reasoning and ``Answer:`` line),
    else the parsed short ``answer`` for outputs that do not carry it (a caller's own target)."""
    value = (outputs or {}).get("response")
    if isinstance(value, str) and value.strip():
        return value, None
    return prediction_of(outputs)


def reply_of(outputs: Mapping[str, Any] | None) -> tuple[str, str | None]:
    """The text Contain-Acc and LLM-Acc grade (:data:`GRADED_TEXT`): the whole final reply.

    Bracketed citations of chunks the run saw are removed (our prompts ask for them, the paper's do
    not, and "[12]" must not match the gold "12"). A run that failed is graded on its parsed answer
    (empty: wrong), not on stray text of its last message; outputs without a ``response`` (a
    caller's own target) are graded on their ``answer``.
    """
    from arag_graph.core.citations import without_citations

    out = outputs or {}
    if out.get("error"):
        return prediction_of(outputs)
    value = out.get("response")
    if not (isinstance(value, str) and value.strip()):
        return prediction_of(outputs)
    seen = {cid for key in ("citations", "retrieved_chunks", "read_chunks") for cid in chunk_ids(out.get(key))}
    return without_citations(value, seen.__contains__), None


def golds_of(reference_outputs: Mapping[str, Any] | None) -> list[str]:
    """The gold answer's aliases (``answers`` list and/or ``answer``), each once; one-line error when none."""
    reference = reference_outputs or {}
    golds: list[str] = []
    for key in ("answer", "answers"):
        value = reference.get(key)
        if isinstance(value, str):
            golds.append(value)
        elif isinstance(value, Sequence):
            golds.extend(str(alias) for alias in value if alias is not None)
        elif value is not None:
            golds.append(str(value))
    if not any(gold.strip() for gold in golds):
        keys = ", ".join(sorted(reference)) or "none"
        raise DatasetError(
            f"the example's reference outputs have no gold answer (keys: {keys}); "
            "put the gold answer in 'answers' (list of aliases) or 'answer' (string)"
        )
    return list(dict.fromkeys(golds))


def chunk_ids(value: Any) -> list[str]:
    """Distinct chunk IDs as strings, in order; tolerant of None, one bare ID and numeric IDs from JSON."""
    if value is None or isinstance(value, bytes):
        return []
    if isinstance(value, str):
        return [value] if value else []
    if not isinstance(value, (list, tuple, set, frozenset)):
        return []
    return list(dict.fromkeys(str(item) for item in value if item is not None and str(item) != ""))


def question_of(*sources: Mapping[str, Any] | None) -> str:
    """The question a run answered: the first non-empty ``question`` of ``sources`` (inputs first)."""
    for source in sources:
        value = (source or {}).get("question")
        if isinstance(value, str) and value.strip():
            return value
    return ""
