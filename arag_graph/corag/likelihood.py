"""The log-likelihood of a fixed reply, read from a chat endpoint's token log-probabilities.

CoRAG scores a chain step by how likely the model would answer "No relevant information found"
given the step's documents. A chat API cannot score a string it did not generate, but endpoints
that return log-probabilities (OpenAI, vLLM and the other OpenAI-compatible servers, asked with
``logprobs`` and ``top_logprobs``) give, at every position of the reply, the logprob of the token
chosen and of the runners-up. Walking the reply while it spells the target out, and taking the
target's next token from the runners-up where the reply leaves it, gives the target's
log-likelihood exactly when the model wrote the target, and an upper bound otherwise: the walk
stops at the first position where the reply leaves the target, and the probabilities of the
target's remaining tokens, all at most 1, are left out. A target token missing from the runners-up
is bounded by the least likely runner-up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["content_logprobs", "target_logprob"]


def content_logprobs(response_metadata: Mapping[str, Any] | None) -> list[Mapping[str, Any]] | None:
    """The per-token entries (``token``, ``logprob``, ``top_logprobs``) of a reply, or None when the
    endpoint sent none (it ignores ``logprobs``, or the provider has no such thing)."""
    logprobs = (response_metadata or {}).get("logprobs")
    if not isinstance(logprobs, Mapping):
        return None
    content = logprobs.get("content")
    if not isinstance(content, Sequence) or not content:
        return None
    if not all(isinstance(t, Mapping) and isinstance(t.get("logprob"), int | float) for t in content):
        return None
    return list(content)


def _alternatives(entry: Mapping[str, Any]) -> list[tuple[str, float]]:
    pairs = [(str(entry.get("token", "")), float(entry["logprob"]))]
    for alt in entry.get("top_logprobs") or []:
        if isinstance(alt, Mapping) and isinstance(alt.get("logprob"), int | float):
            pairs.append((str(alt.get("token", "")), float(alt["logprob"])))
    return pairs


def target_logprob(tokens: Sequence[Mapping[str, Any]], target: str) -> float | None:
    """log P(the reply starts with ``target``), from a reply's token logprobs (see the module docstring).

    Leading whitespace of the reply is skipped by comparing without it. Returns None when there are
    no tokens.
    """
    if not tokens:
        return None
    total = 0.0
    prefix = ""
    for entry in tokens:
        alternatives = _alternatives(entry)
        first = not prefix

        def norm(token: str, first: bool = first) -> str:
            return token.lstrip() if first else token

        chosen = norm(alternatives[0][0])
        if first and not chosen:  # a leading space or newline token
            continue
        rest = target[len(prefix) :]
        if rest.startswith(chosen) or chosen.startswith(rest):
            total += alternatives[0][1]
            prefix += chosen
            if len(prefix) >= len(target):
                return total
            continue
        # The reply leaves the target here: the target's own next token among the runners-up.
        matches = [
            lp
            for tok, lp in alternatives[1:]
            if norm(tok) and (rest.startswith(norm(tok)) or norm(tok).startswith(rest))
        ]
        total += max(matches) if matches else min(lp for _tok, lp in alternatives)
        return total
    return total
