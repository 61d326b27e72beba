"""Rule-based sentence splitting for encyclopedic prose and light markdown.

A-RAG's ``semantic_search`` embeds sentences and its snippets are sentences, so every tool depends
on where this module cuts. NLTK's Punkt needs downloaded data and spaCy a language model, both
ruled out by CONTRIBUTING (nothing downloads at run time); a small rule set tuned on the
Wikipedia-style text this package indexes (HotpotQA, 2WikiMultihopQA) needs no dependency, returns
exact character spans, which chunks and snippets are built from, and runs at a few microseconds
per sentence.

What counts as a boundary
-------------------------
Terminal punctuation (``.``, ``?``, ``!``, ``…``, with any closing quotes or brackets right after
it) followed by whitespace ends a sentence unless the next word starts with a lower-case letter
(``"Who?" he asked``, ``etc. and``) or the next mark continues the sentence (``(1176? – 1216)``).
An ellipsis with no word before it (``" ...Baby One More Time"``) ends nothing. A single period is
looked at more closely, by the word it closes:

* titles and other prefixes (``Dr.``, ``St.``, ``Gen.``, ``e.g.``, ``vs.``, ``c.``/``ca.``/``fl.``)
  and single lower-case letters (``b. 1950``, ``Roe v. Wade``) never end a sentence;
* reference abbreviations (``No.``, ``pp.``, ``vol.``, month names) do not end one before a
  number (``No. 5``, ``Jan. 1920``) and are ordinary words otherwise (``the answer was no.``);
* words that can close a sentence as well as sit inside one (``etc.``, ``Inc.``, ``Jr.``,
  ``U.S.``, ``a.m.``, initials such as the ``W.`` of ``George W. Bush``) end a sentence only when
  the next word is a typical sentence opener (``The``, ``He``, ``In`` ...) or a line break
  follows (not after an initial: names get wrapped too); so ``U.S. Army`` stays whole while
  ``the U.S. The ...`` is cut, and a run of initials (``J. R. R. Tolkien``) is never cut;
* a number that opens its line (``1. First step``) is a list marker, not a sentence.

CJK full stops (``。！？``) end a sentence without needing a space after them.

Newlines
--------
Line structure is honoured without breaking hard-wrapped prose:

* a blank line always ends a sentence;
* a line break ends a sentence when the next line starts a list item, heading, quote or table row
  (``-``, ``*``, ``+``, ``•``, ``#``, ``>``, ``|``, ``1.``, ``2)``);
* ... or when the line before is a ``#`` heading;
* ... or when the next line does not start with a lower-case letter and the line before is a list
  item, ends with a colon, or looks like a title: under 50 characters, no terminal punctuation,
  and not ending mid-phrase (on a comma or a word such as "of" or "and");
* a line ending with terminal punctuation ends a sentence by the punctuation rule above (a line
  break counts as whitespace there), so ``Dr.`` at the end of a wrapped line does not cut.

Any other single newline is inner whitespace of a wrapped sentence.
"""

from __future__ import annotations

import re

__all__ = ["sentence_spans", "split_sentences"]

# Terminal punctuation plus the closers that belong to the sentence it ends; Latin terminals need
# whitespace (or the end) after them, so "1.70", "v1.2" and "example.com" are never candidates.
# The lookbehind starts a match only at the start of a run of marks, which keeps a long run of
# dots not followed by a space linear instead of quadratic.
_CANDIDATE = re.compile(
    r"""(?<![.!?…‽])[.!?…‽]+[)\]}"'”’»]*(?=\s|\Z)"""
    r"""|[。！？]+[」』）〕】"'”’]*"""
)
# The whitespace after a candidate, the opening punctuation of the next sentence and its first word.
_NEXT = re.compile(r"""(\s*)[(\[{"'“‘«¿¡]*(\w*)""")


def _words(spaced: str) -> frozenset[str]:
    return frozenset(spaced.split())


# Never end a sentence: titles and prefixes that are always followed by the word they belong to.
_PREFIXES = _words(
    """
    mr mrs ms messrs mme mlle dr drs prof rev hon fr st ste mt ft gen lt col maj capt cpt cmdr
    adm brig sgt cpl pvt gov sen rep pres supt insp det atty
    e.g i.e cf viz vs v ca c fl approx a.k.a aka
    """
)
# Do not end a sentence before a number ("No. 5", "pp. 12", "Jan. 1920"); ordinary words otherwise.
_NUMBERED = _words(
    """
    no nos nr vol vols p pp pg ch chap sec art fig figs op ed eds ser pt
    jan feb mar apr jun jul aug sep sept oct nov dec
    """
)
# Can end a sentence or sit inside one; decided by the next word.
_AMBIGUOUS = _words(
    """
    etc inc ltd co corp plc llc jr sr bros al esq ave blvd rd dept univ assn est ibid lit translit
    """
)
# Words that open sentences in encyclopedic prose and are seldom part of a name, so that
# "Inc. The" is cut while "Inc. Records" or "George W. Bush" are not.
_OPENING_WORDS = _words(
    """
    The A An He She It They We You His Her Its Their Our My Your This That These Those There
    Here In On At By For From With Without After Before During Since As But And Or Nor Yet So
    However Although Though While When Whenever Where Whereas If Unless Because Despite Upon
    Under Over Between Among Through Throughout Until Following According Also Both Each Every
    Some Many Most Several Such Other Another One Two Three Today Later Then Thus
    Meanwhile Moreover Furthermore Nevertheless Instead Originally Currently Eventually Finally
    Born What Who Whom Whose Which Why How Not No Neither Either All Only Unlike Like
    """
)
# Inside a whitespace-delimited token, the word a period closes starts after these ("(1240–c.").
_WORD_SEPARATORS = re.compile(r"""[([{"“‘«¿¡–—/<>]""")
_DOTTED_ACRONYM = re.compile(r"(?:[A-Za-z]{1,3}\.)+[A-Za-z]{1,3}")
_ROMAN = re.compile(r"[IVXLC]+")

# A line that starts a list item, heading, block quote or table row.
_ITEM_START = re.compile(r"[ \t]*(?:[-*+•▪◦‣–—][ \t]|#{1,6}(?:[ \t]|(?=\n)|\Z)|>|\||\d{1,3}[.)][ \t]|\(?[a-z]\)[ \t])")
# Characters that continue a sentence rather than open one: "Henry (1176? – 1216)".
_CONTINUATION = frozenset(",;:)]}–—-/%&")
_HEADING = re.compile(r"[ \t]*#{1,6}(?:[ \t]|\Z)")
_LINE_BREAK = re.compile(r"\n\s*")
_SHORT_LINE = 50
_CONNECTING_WORDS = _words(
    """
    a an the and or nor but of to in on at by for with from into onto as than that which who whose
    is was were are be been his her its their our my your this these those
    """
)


def _period_ends_sentence(text: str, dot: int, gap: str, next_word: str, after: int) -> bool:
    """Whether the single period at ``dot`` closes its sentence (the next word is not lower-case)."""
    before = text[max(0, dot - 48) : dot]
    if not before or before[-1].isspace():
        return True
    word = _WORD_SEPARATORS.split(before.split()[-1])[-1].lstrip("'")
    if not word:
        return True
    lower = word.lower()
    if lower in _PREFIXES or (len(word) == 1 and word.islower()):
        return False
    if lower in _NUMBERED and (next_word[:1].isdigit() or _ROMAN.fullmatch(next_word)):
        return False
    if word.isdigit() and len(word) <= 3 and _opens_line(text, dot - len(word)):
        return False  # a list marker such as "1. Introduction"
    initial = len(word) == 1 and word.isupper()
    if not (initial or lower in _AMBIGUOUS or _DOTTED_ACRONYM.fullmatch(word)):
        return True
    if len(next_word) == 1 and next_word.isupper() and text.startswith(".", after):
        return False  # another initial follows: "M. A. Thirumugham", "J. R. R. Tolkien"
    if initial:
        # A line break after an initial is more likely a wrapped name than a sentence end.
        return next_word in _OPENING_WORDS
    return "\n" in gap or next_word in _OPENING_WORDS


def _opens_line(text: str, pos: int) -> bool:
    # Scan back over blanks only: a search for the previous newline would make long lines quadratic.
    while pos > 0 and text[pos - 1] in " \t":
        pos -= 1
    return pos == 0 or text[pos - 1] in "\r\n"


def _punctuation_cuts(text: str) -> list[int]:
    cuts: list[int] = []
    for match in _CANDIDATE.finditer(text):
        end = match.end()
        if end >= len(text):
            break
        token = match.group()
        if token[0] in "。！？":
            cuts.append(end)
            continue
        following = _NEXT.match(text, end)
        gap, next_word, after = following.group(1), following.group(2), following.end()
        if next_word[:1].islower() or (not next_word and text[after : after + 1] in _CONTINUATION):
            continue  # blank lines are cut by _newline_cuts whatever follows them
        start = match.start()
        if token[0] == "…" or token.startswith(".."):
            if start == 0 or (not text[start - 1].isalnum() and text[start - 1] not in ")]}\"'”’"):
                continue  # a leading ellipsis, as in '" ...Baby One More Time"'
        elif token[0] == "." and not _period_ends_sentence(text, start, gap, next_word, after):
            continue
        cuts.append(end)
    return cuts


def _newline_cuts(text: str) -> list[int]:
    cuts: list[int] = []
    for match in _LINE_BREAK.finditer(text):
        start, end = match.span()
        if end >= len(text):
            break
        if match.group().count("\n") > 1 or _ITEM_START.match(text, end):
            cuts.append(start)
            continue
        line_start = text.rfind("\n", 0, start) + 1
        line = text[line_start:start].strip()
        if not line:
            continue
        if _HEADING.match(line):
            cuts.append(start)
            continue
        if text[end].islower():
            continue
        if (
            _ITEM_START.match(line)
            or line.endswith(":")
            or (len(line) < _SHORT_LINE and not _ends_terminal(line) and not _continues(line))
        ):
            cuts.append(start)
    return cuts


def _continues(line: str) -> bool:
    """Whether a line ends mid-phrase ("daughter of", "Smith and"), so it cannot be a title."""
    return line[-1] in ",;-–—(/&" or line.rsplit(None, 1)[-1] in _CONNECTING_WORDS


def _ends_terminal(line: str) -> bool:
    return line.rstrip(")]}\"'”’»")[-1:] in {".", "!", "?", "…", "‽"}


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text``, in order.

    Every span is an exact substring with no surrounding whitespace, and together the spans cover
    every non-whitespace character of ``text`` exactly once: the splitter only chooses cut
    points, it never drops or rewrites text.
    """
    cuts = _punctuation_cuts(text)
    if "\n" in text:
        cuts = sorted(set(cuts).union(_newline_cuts(text)))
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in [*cuts, len(text)]:
        piece = text[start:cut]
        stripped = piece.strip()
        if stripped:
            first = start + (len(piece) - len(piece.lstrip()))
            spans.append((first, first + len(stripped)))
        start = cut
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` as exact substrings (see :func:`sentence_spans`)."""
    return [text[start:end] for start, end in sentence_spans(text)]
