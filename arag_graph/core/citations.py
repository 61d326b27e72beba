"""How chunks are shown to a model, and reading the final answer and its citations back out of its reply.

The prompts ask for a closing line ``Answer: <short answer> [<chunk IDs>]``. Models do not always
comply, so parsing is lenient: the last ``Answer:`` line wins when there is one, otherwise the
whole message is the answer; citations are bracketed IDs anywhere in the message that name chunks
of the index (so a stray ``[1]`` footnote only counts when chunk "1" exists).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_ANSWER_LINE = re.compile(r"^[\s*_#>-]*(?:final\s+)?answer[\s*_]*:\s*(?P<body>.*)$", re.IGNORECASE | re.MULTILINE)
_BRACKETS = re.compile(r"\[([^\[\]\n]{1,500})\]")
_CHUNK_PREFIX = re.compile(r"^(?:chunks?|ids?|chunk[_ ]ids?)\s*[:#]?\s*", re.IGNORECASE)


def _ids_in(group: str) -> list[str]:
    return [_CHUNK_PREFIX.sub("", part).strip().strip("'\"`") for part in re.split(r"[,;]", group)]


def parse_final_answer(text: str, is_chunk: Callable[[str], bool]) -> tuple[str, list[str]]:
    """Split a final message into ``(answer, citations)``.

    ``is_chunk`` says whether an ID exists in the index; a bracket group naming at least one such ID
    is removed from the answer text, and its existing IDs become citations (first-seen order, no
    duplicates; IDs the index does not have are dropped).
    """
    text = text or ""
    citations: list[str] = []

    def strip_citations(segment: str) -> str:
        def replace(match: re.Match[str]) -> str:
            valid = [i for i in _ids_in(match.group(1)) if i and is_chunk(i)]
            for i in valid:
                if i not in citations:
                    citations.append(i)
            return "" if valid else match.group(0)

        return _BRACKETS.sub(replace, segment)

    lines = list(_ANSWER_LINE.finditer(text))
    if lines:
        last = lines[-1]
        strip_citations(text[: last.start()])
        answer = strip_citations(last.group("body"))
        answer = text[last.end() :].strip() if not answer.strip() else answer
    else:
        answer = strip_citations(text)
    answer = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(answer.split())).strip().strip("*_ ").strip()
    return answer, citations


_WRITTEN_CALL = re.compile(r"^\s*functions\.(?P<name>[A-Za-z_][\w.-]*)\s*:", re.IGNORECASE)


def written_tool_call(text: str) -> str | None:
    """A tool call the model wrote out as text where it had to answer, in one short line (else None).

    Small models served through llama-cpp-python's ``chatml-function-calling`` format copy the
    format their earlier calls were shown in (``functions.keyword_search:`` then JSON arguments) into
    the reply that should answer; a bare JSON object is the same mistake in another form. A reply
    with an ``Answer:`` line is an answer whatever else it holds.
    """
    text = (text or "").strip()
    if not text or _ANSWER_LINE.search(text):
        return None
    found = _WRITTEN_CALL.match(text)
    if found:
        return f"functions.{found.group('name')}: ..."
    if text.startswith("{") and text.endswith("}"):
        try:
            import json

            if isinstance(json.loads(text), dict):
                return f"{text[:60]}..." if len(text) > 60 else text
        except ValueError:
            return None
    return None


def chunk_block(chunk_id: str, title: str | None, text: str, note: str = "") -> str:
    """How chunk text is shown to a model, everywhere: ``[chunk ID] title="..." note`` then the text.

    One format for tool results and answer prompts, so citations look the same whatever the graph.
    """
    head = f"[chunk {chunk_id}]" + (f' title="{title}"' if title else "") + (f" {note}" if note else "")
    return f"{head}\n{text}"


def without_citations(text: str, is_chunk: Callable[[str], bool]) -> str:
    """``text`` with every bracket group that names a chunk removed, the rest as written.

    Grading reads a whole reply (Contain-Acc, LLM-Acc): a citation ``[12, 40]`` our prompts ask for
    is not part of the answer, and its digits must not match a numeric gold answer such as "12".
    """
    return _BRACKETS.sub(
        lambda m: "" if any(i and is_chunk(i) for i in _ids_in(m.group(1))) else m.group(0), text or ""
    )
