"""What a model is told about the retrieval tools: each tool's description and its keyword argument's, in
two wordings, true to the index the tools search.

``package`` is ours. ``paper`` carries the instructions of the A-RAG paper's released tool
descriptions, written here in our own words: keywords of one to three words, with good and bad
examples, and "read a chunk before you answer from it". Either way the text says what the tool does
on the index at hand (issue 35, defect 10): how a keyword matches (at the start of a word, or anywhere
inside the text as the paper's substring rule does) and whether a chunk's title counts (only on an
index with contextual headers), so a model is never told of matches the index cannot make.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ToolStyle", "keyword_argument", "tool_description"]

ToolStyle = Literal["package", "paper"]

_KEYWORD_RULE = {
    "word": "Each is matched case-insensitively at the start of a word; longer keywords count more.",
    "substring": "Each is matched case-insensitively wherever its letters occur, inside longer words too "
    "('eland' matches 'Leland'); longer keywords count more.",
}
_KEYWORDS = {
    "package": "Exact words or short phrases to find, e.g. names, titles, dates. ",
    "paper": "One to three keywords, each of one to three words: names, titles, dates or specific terms that "
    "must appear in the text. ",
}

_BASE = {
    ("package", "keyword_search"): "Find chunks that contain exact words or phrases (names, titles, numbers, rare "
    "terms). Best when you know a precise string that must appear in the evidence.",
    ("package", "semantic_search"): "Find chunks whose sentences are closest in meaning to a natural-language "
    "query. Best when you know what you are looking for but not its exact wording.",
    ("paper", "keyword_search"): "Search the collection for chunks that contain given keywords, matched as text, "
    "not by meaning. Use short keywords of one to three words that must appear in the evidence. Good: "
    '["Marie Curie"], ["Nobel Prize", "1911"]. Bad: ["which prize did Marie Curie win"] (a question, not a '
    'keyword), ["the prize"] (too common to point anywhere).',
    ("paper", "semantic_search"): "Search the collection by meaning: describe the information you need in a "
    "natural-language query; it finds sentences close to it even when their wording differs.",
}
_SNIPPETS = {
    "keyword_search": " Returns chunk IDs with up to five of each chunk's sentences that contain a keyword",
    "semantic_search": " Returns chunk IDs with their sentences closest to the query",
}
_TITLE_NOTE = " (a chunk matched only by its title shows its first sentence)"
_READ_NOTE = {
    "package": ". Use chunk_read to see a whole chunk.",
    "paper": ": a preview only, so read a chunk with chunk_read before you answer from it.",
}
_FULL_TEXT_NOTE = " Returns the full text of each chunk found."
_CHUNK_READ = {
    "package": "Read the full text of chunks by ID, after a search showed they look relevant. A chunk already "
    "read in this run is not repeated. Each chunk shows its previous and next chunk IDs; set adjacent=true to "
    "read those too when a passage continues across chunks.",
    "paper": "Read the full text of chunks by their IDs: read the chunks a search pointed to before you answer "
    "from them. A chunk already read in this run is not repeated. Set adjacent=true to read the chunks before "
    "and after too, when a passage continues across chunks.",
}


def keyword_argument(style: ToolStyle, rule: str) -> str:
    """The ``keywords`` argument's description: what to give, and how the index matches it."""
    return _KEYWORDS[style] + _KEYWORD_RULE.get(rule, _KEYWORD_RULE["word"])


def tool_description(
    name: str, style: ToolStyle, *, full_text: bool = False, can_read: bool = True, title_matches: bool = True
) -> str:
    """A tool's description as this variant behaves: whole chunks, or snippets (and chunk_read).

    ``title_matches``: the index matches a chunk's title too (contextual headers), which keyword_search's
    description then says.
    """
    if name == "chunk_read":
        return _CHUNK_READ[style]
    base = _BASE[(style, name)]
    if full_text:
        return base + _FULL_TEXT_NOTE
    snippets = _SNIPPETS[name] + (_TITLE_NOTE if name == "keyword_search" and title_matches else "")
    return base + snippets + (_READ_NOTE[style] if can_read else ".")
