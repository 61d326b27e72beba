"""Matching an answer with its gold aliases: Contain-Acc (the A-RAG paper), exact match (CoRAG), token F1 (SRAG).

All three compare a free-text prediction with one or more gold aliases after the usual
multi-hop QA normalisation, and take the best alias. They are pure functions in the library, not in
the evaluation package, because the library needs them too: CoRAG's rejection sampling keeps a
chain whose answer matches (:mod:`arag_graph.corag.rejection_sampling`). The evaluation runner,
notebooks and tests score answers with the same functions; :mod:`arag_graph.evaluators.answers`
wraps them for ``langsmith.evaluate``.

Normalisation follows SQuAD/HotpotQA (lowercase, drop punctuation, drop articles, collapse
whitespace) with two Unicode-aware extensions, because model output is full of typographic
characters that gold answers lack: text is NFKC-normalised and case-folded, and every Unicode
punctuation character is dropped, not only ASCII ones (curly quotes, en dashes, ...). Punctuation is
deleted, not replaced by a space, as in the reference scripts, so "Jean-Paul" becomes "jeanpaul"
on both sides.

Decisions a reader of the scores should know:

* Contain-Acc is the paper's rule by default: the normalised gold is a character substring of
  the normalised prediction, so our numbers are comparable with the published ones. That rule has
  a known blind spot: it scores "I do not know" as correct for the gold "no" (inside "not" and
  "know") and "19930" as containing "1993", which rewards abstaining on HotpotQA's yes/no
  comparison questions. ``whole_words=True`` requires the gold to be a run of complete tokens
  instead; use it to check that a gain is not an artefact of substring matching.
* A gold that normalises to the empty string (an article such as "The", or the band "The The")
  is compared with articles kept, so it is neither a free match for every prediction nor
  unmatchable. A gold made only of punctuation or whitespace can never match.
* An empty prediction never matches and scores 0, even against an empty gold.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

__all__ = ["answer_scores", "contain_match", "exact_match", "normalize_answer", "token_f1"]

_ARTICLES = re.compile(r"\b(?:a|an|the)\b")
# HotpotQA scores these answers all-or-nothing: "yes" must not earn partial credit against "no way".
_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})
_ASCII_PUNCTUATION = frozenset(string.punctuation)


@lru_cache(maxsize=4096)
def _is_punctuation(char: str) -> bool:
    # ASCII punctuation includes symbols such as "$" and "+", which the reference scripts drop too.
    return char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P")


def _normalize(text: str, *, drop_articles: bool) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(char for char in text if not _is_punctuation(char))
    if drop_articles:
        text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def normalize_answer(text: str) -> str:
    """Return ``text`` lowercased, without punctuation and articles, with single spaces.

    >>> normalize_answer("  The Eiffel   Tower! ")
    'eiffel tower'
    """
    return _normalize(text, drop_articles=True)


def _as_golds(golds: str | Sequence[str]) -> Sequence[str]:
    # A bare string is one gold answer; iterating it would score each character as an alias.
    return (golds,) if isinstance(golds, str) else golds


def _comparable(prediction: str, gold: str) -> tuple[str, str] | None:
    """Normalise a prediction and one gold alias the same way, or None when the gold is unusable.

    When the gold is nothing but articles, both sides keep their articles (see the module
    docstring); the prediction must be normalised like the gold for the comparison to mean anything.
    """
    normalised_gold = _normalize(gold, drop_articles=True)
    if normalised_gold:
        return _normalize(prediction, drop_articles=True), normalised_gold
    normalised_gold = _normalize(gold, drop_articles=False)
    if normalised_gold:
        return _normalize(prediction, drop_articles=False), normalised_gold
    return None


def _comparable_pairs(prediction: str, golds: str | Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for gold in _as_golds(golds):
        pair = _comparable(prediction or "", gold)
        if pair is not None and pair[0]:
            pairs.append(pair)
    return pairs


def contain_match(prediction: str, golds: str | Sequence[str], *, whole_words: bool = False) -> bool:
    """True when some normalised gold alias occurs in the normalised prediction.

    Long-form model answers ("The answer is Paris, the capital of France") are correct when they
    contain the gold, which is why A-RAG reports this rather than exact match. The default is the
    paper's character-substring test; ``whole_words=True`` also requires the gold to align with
    token boundaries (see the module docstring for the cases where the two differ).
    """
    for normalised_prediction, normalised_gold in _comparable_pairs(prediction, golds):
        if whole_words:
            # Both sides are single-space separated, so padding makes the test token-aligned.
            if f" {normalised_gold} " in f" {normalised_prediction} ":
                return True
        elif normalised_gold in normalised_prediction:
            return True
    return False


def exact_match(prediction: str, golds: str | Sequence[str]) -> bool:
    """True when the normalised prediction equals some normalised gold alias (CoRAG's EM)."""
    return any(
        normalised_prediction == normalised_gold
        for normalised_prediction, normalised_gold in _comparable_pairs(prediction, golds)
    )


def _f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = Counter(prediction_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: str | Sequence[str]) -> float:
    """Best token-level F1 between the normalised prediction and any gold alias (SRAG's F1).

    Tokens are the words of the normalised text, counted with multiplicity. When either side is
    exactly "yes", "no" or "noanswer" and the two differ, the score is 0, as in HotpotQA's scorer.
    """
    best = 0.0
    for normalised_prediction, normalised_gold in _comparable_pairs(prediction, golds):
        if normalised_prediction != normalised_gold and (
            normalised_prediction in _CLOSED_ANSWERS or normalised_gold in _CLOSED_ANSWERS
        ):
            continue
        best = max(best, _f1(normalised_prediction.split(), normalised_gold.split()))
    return best


def answer_scores(prediction: str, golds: str | Sequence[str]) -> dict[str, float]:
    """All three metrics under the feedback keys the LangSmith evaluators use."""
    return {
        "contain_acc": float(contain_match(prediction, golds)),
        "exact_match": float(exact_match(prediction, golds)),
        "f1": token_f1(prediction, golds),
    }
