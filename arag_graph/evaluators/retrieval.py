"""Retrieval and cost metrics: evidence recall and precision, corpus tokens, steps, usage and cost.

A-RAG's claim is not only accuracy but accuracy per token retrieved, and its failure analysis
separates "never found the evidence" (Naive RAG) from "found it and reasoned wrongly" (A-RAG).
These metrics make both visible per question.

Evidence metrics compare the question's gold supporting chunks (the chunks of the index that hold
its gold supporting passages, ``reference_outputs["gold_chunk_ids"]``) with the chunk IDs a run
recorded. The graphs record two sets:

``retrieved_chunks``
    every chunk that surfaced in a tool result: a keyword or semantic search snippet, or a chunk
    read in full. For the pipeline baselines (Naive RAG, HyDE, ...) this is the top-k passages.
``read_chunks``
    chunks whose full text reached the model: A-RAG's ``chunk_read`` calls, and for the pipelines
    the same top-k passages (their text is handed over whole).

Definitions (chunk IDs compared as strings, duplicates ignored):

* ``evidence_recall = |gold ∩ (retrieved ∪ read)| / |gold|``: did the run's retrieval *surface*
  the evidence at all, in any form. This is the issue's "gold supporting chunks among the chunks
  the run retrieved and read" and the quantity behind the paper's failure analysis.
* ``read_recall = |gold ∩ read| / |gold|``: the stricter version, evidence whose full text the
  model saw. An agent that only skims snippets scores lower here than on ``evidence_recall``.
* ``evidence_precision = |gold ∩ read| / |read|``: how much of the full text put into the context
  was evidence (the spirit of ARAGOG's Context Precision, without an LLM). Precision is taken over
  the read set, not the retrieved set, because search snippets are short previews: counting each
  as a context item would punish the very behaviour (skim widely, read narrowly) A-RAG is about.

Every evidence metric is ``None`` (unavailable, never zero) when the question has no gold chunk
IDs, and precision is ``None`` when the run read no chunk in full (0/0): averaging a made-up zero
there would mix "read nothing" into "read the wrong things".

Usage and cost come from the chat model's ``usage_metadata`` on the AI messages of the final
state; runs whose model reports none (the offline policy, most fakes) have no usage and no cost.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from arag_graph.core.errors import AragError
from arag_graph.evaluators.fields import chunk_ids
from arag_graph.evaluators.scoring import named

__all__ = [
    "DEFAULT_PRICES",
    "cost_usd",
    "evidence_precision_evaluator",
    "evidence_recall_evaluator",
    "evidence_scores",
    "load_prices",
    "make_usage_evaluator",
    "read_recall_evaluator",
    "retrieved_tokens_evaluator",
    "steps_evaluator",
    "usage_from_messages",
]

Usage = dict[str, int]
Prices = Mapping[str, Sequence[float]]

# --- evidence --------------------------------------------------------------------------------------


def evidence_scores(
    gold_chunk_ids: Iterable[Any], read_chunks: Iterable[Any] = (), retrieved_chunks: Iterable[Any] = ()
) -> dict[str, float | None]:
    """``evidence_recall``, ``read_recall`` and ``evidence_precision`` as defined in the module docstring.

    >>> evidence_scores(["1", "2"], read_chunks=["2", "7"], retrieved_chunks=["1", "2", "7", "9"])
    {'evidence_recall': 1.0, 'read_recall': 0.5, 'evidence_precision': 0.5}
    """
    gold = set(chunk_ids(gold_chunk_ids))
    read = set(chunk_ids(read_chunks))
    seen = read | set(chunk_ids(retrieved_chunks))
    if not gold:
        return {"evidence_recall": None, "read_recall": None, "evidence_precision": None}
    return {
        "evidence_recall": len(gold & seen) / len(gold),
        "read_recall": len(gold & read) / len(gold),
        "evidence_precision": (len(gold & read) / len(read)) if read else None,
    }


def _evidence(outputs: Mapping[str, Any] | None, reference_outputs: Mapping[str, Any] | None, key: str) -> dict:
    outputs, reference = outputs or {}, reference_outputs or {}
    scores = evidence_scores(
        reference.get("gold_chunk_ids") or (), outputs.get("read_chunks") or (), outputs.get("retrieved_chunks") or ()
    )
    comment = None
    if scores[key] is None:
        if not chunk_ids(reference.get("gold_chunk_ids")):
            comment = "unavailable: the question has no gold supporting chunk ids"
        else:
            comment = "unavailable: the run read no chunk in full, so precision is undefined"
    return {"key": key, "score": scores[key], "comment": comment}


@named("evidence_recall")
def evidence_recall_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """Share of gold chunks among the chunks the run retrieved or read (key ``evidence_recall``)."""
    return _evidence(outputs, reference_outputs, "evidence_recall")


@named("read_recall")
def read_recall_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """Share of gold chunks among the chunks the run read in full (key ``read_recall``)."""
    return _evidence(outputs, reference_outputs, "read_recall")


@named("evidence_precision")
def evidence_precision_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """Share of the chunks read in full that are gold chunks (key ``evidence_precision``)."""
    return _evidence(outputs, reference_outputs, "evidence_precision")


# --- tokens and steps ------------------------------------------------------------------------------


def _count(outputs: Mapping[str, Any] | None, key: str) -> dict[str, Any]:
    value = (outputs or {}).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return {"key": key, "score": None, "comment": f"unavailable: the run reported no {key!r}"}
    return {"key": key, "score": int(value), "comment": None}


@named("retrieved_tokens")
def retrieved_tokens_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any] | None = None) -> dict:
    """Corpus tokens (o200k_base) the run's tools returned to the model, as the graph counted them."""
    return _count(outputs, "retrieved_tokens")


@named("steps")
def steps_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any] | None = None) -> dict:
    """Tool (retrieval) steps the run took, as the graph counted them."""
    return _count(outputs, "steps")


# --- usage and cost --------------------------------------------------------------------------------


def usage_from_messages(messages: Iterable[Any]) -> Usage | None:
    """Token usage summed over the AI messages that carry ``usage_metadata``; None when none does.

    None, not zeros, because "the provider did not say" must stay distinguishable from "free".
    Serialised messages (dicts with a ``usage_metadata`` field) count too. Only calls whose reply
    is in ``messages`` are counted; ``arag eval`` counts a run's side calls (structured sub-steps,
    HyDE) too, with a usage callback on the run (evaluators/runner.py).
    """
    total = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    found = False
    for message in messages:
        meta = (
            message.get("usage_metadata") if isinstance(message, Mapping) else getattr(message, "usage_metadata", None)
        )
        if not meta:
            continue
        found = True
        input_tokens = int(meta.get("input_tokens") or 0)
        output_tokens = int(meta.get("output_tokens") or 0)
        total["input_tokens"] += input_tokens
        total["output_tokens"] += output_tokens
        total["total_tokens"] += int(meta.get("total_tokens") or input_tokens + output_tokens)
    return total if found else None


DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    # model: (USD per 1M input tokens, USD per 1M output tokens); OpenAI standard list prices.
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5": (1.25, 10.00),
}
"""List-price estimates in USD per million tokens, as ``(input, output)``.

They are estimates: they ignore cached-input discounts (cached tokens are charged at the full
input price, so the figure is an upper bound), batch pricing and later price changes. Reasoning
tokens are part of ``output_tokens`` in LangChain's usage metadata and are charged as output.
Pass ``prices=`` (a mapping or a JSON file ``{"model": [input_per_million, output_per_million]}``)
to correct or extend the table; entries there replace the defaults of the same name.
"""

_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def load_prices(prices: Prices | str | os.PathLike[str] | None = None) -> dict[str, tuple[float, float]]:
    """The default table updated with ``prices`` (a mapping, or the path of a JSON file of one).

    Raises :class:`AragError` with a one-line fix for an unreadable file or a malformed entry, so a
    typo in a price file fails before an evaluation starts rather than after it.
    """
    table = dict(DEFAULT_PRICES)
    if prices is None:
        return table
    source = "prices"
    if isinstance(prices, (str, os.PathLike)):
        path = Path(prices)
        source = str(path)
        try:
            prices = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AragError(f"{path}: no such price file; give a JSON file of {{model: [input, output]}}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise AragError(
                f"{path}: cannot read the price file ({type(error).__name__}); "
                'write it as JSON like {"gpt-4o-mini": [0.15, 0.60]} (USD per 1M input, output tokens)'
            ) from None
    if not isinstance(prices, Mapping):
        raise AragError(f"{source}: prices must be an object {{model: [input_per_million, output_per_million]}}")
    for model, pair in prices.items():
        ok = (
            isinstance(pair, Sequence)
            and not isinstance(pair, str)
            and len(pair) == 2
            and all(isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in pair)
        )
        if not ok:
            raise AragError(
                f"{source}: the price of {model!r} must be [input_per_million, output_per_million] "
                f"as two non-negative numbers, not {pair!r}"
            )
        table[_model_name(str(model))] = (float(pair[0]), float(pair[1]))
    return table


def _model_name(model: str) -> str:
    name = model.strip().lower()
    return name.removeprefix("openai:")


def cost_usd(
    model: str | None, usage: Mapping[str, Any] | None, prices: Prices | str | os.PathLike[str] | None = None
) -> float | None:
    """Estimated cost in USD of ``usage`` with ``model``, or None when the model or usage is unknown.

    ``model`` is a model spec as given to ``--model`` (``gpt-4o-mini``, ``openai:gpt-4o-mini``,
    ``gpt-4o-mini-2024-07-18``); a dated snapshot is priced like its base model. See
    :data:`DEFAULT_PRICES` for what the estimate includes and how to override it.

    >>> cost_usd("gpt-4o-mini", {"input_tokens": 1_000_000, "output_tokens": 500_000})
    0.45
    """
    if not model or not usage:
        return None
    table = load_prices(prices)  # a few entries: validating per call costs microseconds
    name = _model_name(model)
    price = table.get(name) or table.get(_SNAPSHOT.sub("", name))
    if price is None:
        return None
    input_tokens = int(usage.get("input_tokens") or 0)
    output_tokens = int(usage.get("output_tokens") or 0)
    return round((input_tokens * price[0] + output_tokens * price[1]) / 1_000_000, 10)


def make_usage_evaluator(
    model: str | None = None, prices: Prices | str | os.PathLike[str] | None = None
) -> Callable[..., dict[str, Any]]:
    """An evaluator reporting ``input_tokens``, ``output_tokens`` and ``cost_usd`` of a run.

    Usage is read from ``outputs["usage"]`` (as the runner records it) or, failing that, summed
    from ``outputs["messages"]``. The model to price is ``model``, else ``outputs["model"]``. The
    price table is loaded here, once, so a bad price file fails before any question runs.
    """
    table = load_prices(prices)

    @named("usage")
    def usage_evaluator(outputs: dict[str, Any], reference_outputs: dict[str, Any] | None = None) -> dict[str, Any]:
        outputs = outputs or {}
        usage = outputs.get("usage")
        if usage is None and outputs.get("messages"):
            usage = usage_from_messages(outputs["messages"])
        name = model or outputs.get("model")
        if not usage:
            comment = "unavailable: the model reported no usage metadata"
            return {
                "results": [
                    {"key": "input_tokens", "score": None, "comment": comment},
                    {"key": "output_tokens", "score": None, "comment": comment},
                    {"key": "cost_usd", "score": None, "comment": comment},
                ]
            }
        cost = cost_usd(name, usage, table)
        cost_comment = None if cost is not None else f"unavailable: no price for model {name!r}; pass prices="
        return {
            "results": [
                {"key": "input_tokens", "score": int(usage.get("input_tokens") or 0), "comment": None},
                {"key": "output_tokens", "score": int(usage.get("output_tokens") or 0), "comment": None},
                {"key": "cost_usd", "score": cost, "comment": cost_comment},
            ]
        }

    return usage_evaluator
