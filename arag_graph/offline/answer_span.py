"""The offline policy's reader: the short answer a question asks for, taken from the passages read.

The offline policy is a no-LLM baseline, so its answers must come from rules anyone can check. A
whole sentence is not an answer ("Grace Krilanovich (born October 5, 1979) is an American author."
for "... is based where?"): this module reads the question for what it asks and returns that span
of the evidence ("Columbus, Ohio"), with the chunk it came from. The rules, in order:

1. **What the question asks** (:func:`question_kind`), from its wh-words and answer-type cues:

   * *choice*: two names joined by "or" ("Which band was formed first, The Exies or Circus
     Diablo?"), or "between A and B, which ...": the answer is one of the two;
   * *yes/no*: the question (or its last sentence) opens with an auxiliary verb ("Are", "Were",
     "Does", ...) and has no wh-cue;
   * *number*: "how many / much / old / long / far / tall", "what number / percentage";
   * *year*: "what / which year"; *date*: "when", "what / which date", "century", "born when";
   * *place*: "where", or "what / which" + a place noun (city, state, country, ...);
   * *person*: "who / whom / whose", "name the", or "what / which" + a person noun (actress,
     director, singer, father, ...);
   * *name*: any other "what / which" (a title, band, company, ...);
   * *fragment*: no question mark and no wh-word first (a "who" inside a statement asks
     nothing): a statement to complete (the 2Wiki lookup questions are the first part of a
     passage's sentence).

2. **Candidates** from every sentence read: runs of capitalised words (connectors such as "of",
   "the", "de" may join them; "Columbus, Ohio" joins a name and the region after its comma), quoted
   titles, dates ("5 October 1979", "October 5, 1979", "March 1986", years, decades, centuries) and
   numbers (digits with an optional "million" / "billion", number words, "twice"). A candidate the
   question already says is never the answer (unless the question is a choice).

3. **Score** of a candidate = the relevance of its sentence (given by the caller: the policy's
   embedding-plus-overlap score) + ``TYPE_WEIGHT`` x how well it fits the expected type (a full
   date for a date, a name after "in" / "at" / "from" for a place, a name after "by" or before
   "(born" for a person, ...) + ``PROXIMITY_WEIGHT`` x its nearness (in words) to the question's
   content words in that sentence. For numbers, dates and years only fitting candidates compete.
   The best wins; ties go to the earlier sentence and the earlier span.

4. **Choices and yes/no** compare the two names' own evidence (the sentences of the passage titled
   with the name, else the sentences naming it): a temporal comparative ("first", "earlier",
   "oldest" / "last", "later", "youngest") picks the name whose evidence's first year is earliest /
   latest; otherwise the name whose evidence holds more of the question's other content words. Yes/no
   asks whether every name's evidence holds all the question's other content words ("Are A and B
   both film directors?"); "the same X" asks whether the names' evidence shares a name given with X
   ("Jiangsu province", "province of Jiangsu"), else any name other than their own.

5. **Fragments** are completed: the words that follow the fragment's last three words in the
   best sentence containing them; without such a sentence, the best sentence.

Whatever the rules find, an answer is never empty when a sentence was read: with no candidate of
the kind asked for, the best sentence is the answer (the old sentence-picker's output).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

TYPE_WEIGHT = 1.0
PROXIMITY_WEIGHT = 0.5
FRAGMENT_TAIL = 3
"""How many of a fragment's last words locate it in a sentence."""

Kind = Literal["choice", "yes_no", "number", "year", "date", "place", "person", "name", "fragment"]


@dataclass(frozen=True)
class Sentence:
    """One sentence read, with the chunk it came from and its relevance to the question."""

    chunk_id: str
    text: str
    score: float
    title: str = ""


@dataclass(frozen=True)
class Answer:
    text: str
    chunk_id: str
    kind: Kind


_MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December|"
    "Jan\\.|Feb\\.|Mar\\.|Apr\\.|Jun\\.|Jul\\.|Aug\\.|Sep\\.|Sept\\.|Oct\\.|Nov\\.|Dec\\."
)
_YEAR = r"(?:1[0-9]|20)\d{2}"
_FULL_DATE = re.compile(rf"\b(?:(?:{_MONTHS})\s+\d{{1,2}},?\s+{_YEAR}|\d{{1,2}}\s+(?:{_MONTHS})\s+{_YEAR})\b")
_MONTH_YEAR = re.compile(rf"\b(?:{_MONTHS})\s+{_YEAR}\b")
_YEAR_RE = re.compile(rf"\b{_YEAR}\b")
_ERA = re.compile(r"\b(?:\d{1,2}(?:st|nd|rd|th)\s+century|(?:1[0-9]|20)\d0s)\b", re.IGNORECASE)
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|twenty|"
    "thirty|forty|fifty|hundred|once|twice|thrice"
)
_NUMBER_RE = re.compile(
    rf"(?<![\w.])(?:\d{{1,3}}(?:,\d{{3}})+|\d+(?:\.\d+)?)(?:\s+(?:million|billion|thousand|hundred))?\b"
    rf"|\b(?:{_NUMBER_WORDS})(?:-time)?\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"[\"“”](\w[^\"“”\n]{1,79})[\"“”]")
_TOKEN = re.compile(r"\w(?:[\w'’&-]*\w)?|[^\w\s]")
_WORD = re.compile(r"\w+")

_AUXILIARIES = {"is", "are", "was", "were", "do", "does", "did", "can", "could", "has", "have", "had", "will", "would"}
_CONNECTORS = {"of", "the", "de", "da", "del", "von", "van", "der", "du", "la", "le", "&", "and"}
_FUNCTION_CAPS = {
    "the", "a", "an", "he", "she", "it", "they", "his", "her", "its", "their", "this", "that", "these", "in",
    "on", "at", "after", "before", "during", "since", "as", "from", "by", "for", "with", "when", "while",
    "there", "however", "although", "following", "i", "we", "you", "if", "but", "and", "or", "of",
    "between", "among", "besides", "both", "under", "about", "through", "unlike",
}  # fmt: skip
_STOPWORDS = _FUNCTION_CAPS | _AUXILIARIES | {
    "who", "what", "which", "when", "where", "why", "how", "whose", "whom", "to", "be", "been", "than",
    "into", "about", "also", "not", "both", "either", "name", "one", "same", "other", "most", "more",
    "many", "much", "did", "does", "do", "known", "called", "named", "has", "have", "had", "was", "were",
}  # fmt: skip
_PLACE_NOUNS = {
    "city", "state", "country", "town", "county", "province", "location", "place", "island", "region",
    "continent", "nation", "village", "district", "capital", "area", "territory", "borough",
}  # fmt: skip
_PERSON_NOUNS = {
    "person", "man", "woman", "actor", "actress", "singer", "director", "author", "writer", "musician",
    "player", "politician", "rapper", "producer", "painter", "president", "king", "queen", "member",
    "founder", "father", "mother", "wife", "husband", "son", "daughter", "senator", "coach", "artist",
    "composer", "cricketer", "footballer", "dj", "guitarist", "vocalist", "drummer", "poet", "novelist",
    "character", "comedian", "host", "model", "scientist", "emperor", "general", "leader", "brother",
    "sister", "godfather", "chairman", "ceo", "designer", "architect", "photographer", "journalist",
}  # fmt: skip
_TEMPORAL_EARLY = {"first", "earlier", "earliest", "older", "oldest", "before", "preceded"}
_TEMPORAL_LATE = {"last", "later", "latest", "newer", "newest", "younger", "youngest", "recent", "after"}
_ORG_WORDS = {
    "company", "inc", "records", "radio", "university", "college", "school", "film", "festival", "award",
    "awards", "airport", "club", "league", "team", "party", "church", "group", "band", "series", "magazine",
    "corporation", "ltd", "entertainment", "institute", "academy", "hall", "museum", "hospital",
}  # fmt: skip
_PLACE_WORDS = {
    "county", "city", "state", "states", "united", "kingdom", "republic", "river", "street", "island",
    "province", "district", "north", "south", "east", "west", "new",
}  # fmt: skip
_PLACE_LEADS = {"in", "at", "near", "from", "of", "to", "outside", "across"}
_PERSON_LEADS = {"by", "actress", "actor", "singer", "director", "daughter", "son", "wife", "husband", "with"}


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _stem(word: str) -> str:
    """Plural and possessive endings off, so "directors" meets "director"."""
    for suffix in ("'s", "’s", "ies", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


def content_stems(text: str) -> set[str]:
    return {_stem(w) for w in _words(text) if w not in _STOPWORDS and len(w) > 1}


def _norm(text: str) -> str:
    return " ".join(_words(text))


# ---------------------------------------------------------------------------------------------
# 1. What the question asks


def _pair(question: str, joiner: str) -> tuple[str, str] | None:
    """The two names a question joins with ``joiner`` ("or" / "and"), as they are written."""
    names = _name_spans(question)
    for (_, a_end, a), (b_start, _, b) in itertools.pairwise(names):
        between = question[a_end:b_start].lower()
        if re.fullmatch(rf"[\s,]*{joiner}\s+(?:the\s+)?", between):
            return a, b
    return None


def compared_names(question: str) -> tuple[str, str] | None:
    """The two names a choice or a two-name yes/no question compares, if any."""
    return _pair(question, "or") or _pair(question, "and")


def question_kind(question: str) -> Kind:
    """The kind of answer ``question`` asks for (rule 1 of the module docstring)."""
    q = " ".join(question.lower().split())
    words = _words(q)
    asking = {"who", "whom", "whose", "what", "which", "when", "where", "how"}
    if not q.endswith("?") and words[:1] and words[0] not in asking | {"name"}:
        return "fragment"  # "... a Ukrainian peasant who": a "who" inside a statement asks nothing
    wh = asking & set(words)
    if wh and (_pair(question, "or") or (re.search(r"\bbetween\b", q) and _pair(question, "and"))):
        return "choice"
    counted = wh and re.search(r"\b(?:population|attendance|capacity)\b", q)
    if counted or re.search(
        r"\bhow (?:many|much|old|long|far|tall|large|big|high)\b|\b(?:what|which) (?:number|percentage)\b", q
    ):
        return "number"
    if re.search(r"\b(?:what|which) year\b|\byear (?:was|did|were)\b", q):
        return "year"
    if re.search(r"\bwhen\b|\b(?:what|which) (?:date|day|century|decade)\b", q):
        return "date"
    if re.search(r"\bwhere\b", q):
        return "place"
    following = re.findall(r"\b(?:what|which)\s+((?:[\w'-]+\s+){0,2}[\w'-]+)", q)
    nouns = [set(map(_stem, f.split())) for f in following]
    if any(n & _PLACE_NOUNS for n in nouns):
        return "place"
    if re.search(r"\b(?:who|whom|whose)\b|^name\b", q) or any(n & {_stem(p) for p in _PERSON_NOUNS} for n in nouns):
        return "person"
    if wh:
        return "name"
    last = re.split(r"(?<=[.?!])\s+", question.strip())[-1]
    if _words(last)[:1] and _words(last)[0] in _AUXILIARIES:
        return "yes_no"
    return "name" if q.endswith("?") else "fragment"


# ---------------------------------------------------------------------------------------------
# 2. Candidates


@dataclass(frozen=True)
class _Span:
    start: int
    end: int
    text: str
    kind: str  # "name", "title", "date", "year", "era", "number"


def _name_spans(text: str) -> list[tuple[int, int, str]]:
    """Runs of capitalised words (connectors inside allowed), with their character offsets."""
    spans: list[tuple[int, int, str]] = []
    run: list[re.Match[str]] = []

    def close() -> None:
        while run and (run[-1].group().lower() in _CONNECTORS or not run[-1].group()[0].isalnum()):
            run.pop()
        while run and run[0].group().lower() in _FUNCTION_CAPS | _AUXILIARIES | {"who", "what", "which", "where"}:
            run.pop(0)
        if run:
            start, end = run[0].start(), run[-1].end()
            spans.append((start, end, text[start:end]))
        run.clear()

    for m in _TOKEN.finditer(text):
        token = m.group()
        inner = bool(run) and ((token[:1].isdigit() and len(token) <= 4) or token.lower() in _CONNECTORS - {"and"})
        if token[:1].isupper() or inner:
            run.append(m)
        elif run and token == "." and len(run[-1].group()) == 1 and run[-1].end() == m.start():
            run.append(m)  # an initial: "J." stays inside "Waylon J. Smithers"
        else:
            close()
    close()
    return spans


def candidates(sentence: str) -> list[_Span]:
    """Every candidate answer span of ``sentence`` (rule 2)."""
    out: list[_Span] = []
    for regex, kind in ((_FULL_DATE, "date"), (_MONTH_YEAR, "month"), (_ERA, "era"), (_YEAR_RE, "year")):
        out.extend(_Span(m.start(), m.end(), m.group(), kind) for m in regex.finditer(sentence))
    dated = [(s.start, s.end) for s in out]
    for m in _NUMBER_RE.finditer(sentence):
        if not any(a <= m.start() < b for a, b in dated):
            out.append(_Span(m.start(), m.end(), m.group(), "number"))
    out.extend(_Span(m.start(1), m.end(1), m.group(1).strip(), "title") for m in _QUOTED.finditer(sentence))
    names = [n for n in _name_spans(sentence) if not any(a < n[1] and n[0] < b for a, b in dated)]
    for start, end, text in names:
        if not text[:1].isdigit() and text.lower() not in _MONTHS.lower().split("|"):
            out.append(_Span(start, end, text, "name"))
    for (a_start, a_end, _), (b_start, b_end, b) in itertools.pairwise(names):
        if sentence[a_end:b_start] == ", " and len(b.split()) <= 3:  # "Columbus, Ohio"
            out.append(_Span(a_start, b_end, sentence[a_start:b_end], "name"))
    return out


# ---------------------------------------------------------------------------------------------
# 3. Scores


def _before(sentence: str, span: _Span, n: int = 2) -> list[str]:
    return _words(sentence[: span.start])[-n:]


def described(question: str) -> set[str]:
    """The words describing the answer: those after "what" / "which" ("which Bollywood actress")."""
    found = re.findall(r"\b(?:what|which)\s+((?:[\w'-]+\s+){0,2}[\w'-]+)", question.lower())
    return {_stem(w) for f in found for w in f.split() if w not in _STOPWORDS}


def _fit(kind: Kind, span: _Span, sentence: str, description: set[str], question_stems: set[str]) -> float:
    """How well ``span`` fits the kind of answer asked for, 0 to 1.5 (0: not that kind at all).

    A name right after the question's description of its answer ("father of Bollywood actress
    Antara Mali" for "which Bollywood actress") fits better by the share of that description there.
    """
    fit = _type_fit(kind, span, sentence, question_stems)
    if fit and description:
        near = {_stem(w) for w in _before(sentence, span, 3)}
        fit += 0.5 * len(description & near) / len(description)
    return fit


def _type_fit(kind: Kind, span: _Span, sentence: str, question_stems: set[str]) -> float:
    before = _before(sentence, span)
    after = sentence[span.end : span.end + 8].lower()
    words = span.text.split()
    if kind == "year":
        return 1.0 if span.kind == "year" else 0.0
    if kind == "date":
        return {"date": 1.0, "month": 0.8, "era": 0.8, "year": 0.6}.get(span.kind, 0.0)
    if kind == "number":
        if span.kind != "number":
            return 0.0
        return 0.4 if _YEAR_RE.fullmatch(span.text) else 1.0
    if span.kind not in ("name", "title"):
        return 0.0
    orgish = any(w.lower().strip(".,") in _ORG_WORDS for w in words)
    if kind == "place":
        lead = bool(before) and before[-1] in _PLACE_LEADS
        score = (0.6 if lead else 0.2) + (0.4 if "," in span.text else 0.0)
        return max(0.0, score - (0.4 if orgish else 0.0) - (0.2 if span.kind == "title" else 0.0))
    if kind == "person":
        score = 0.3 if 2 <= len(words) <= 4 else 0.1
        if (before[-1:] and before[-1] in _PERSON_LEADS) or after.startswith(" ("):
            score += 0.5
        if before[-1:] == ["by"] and before[:1] and _stem(before[0]) in question_stems:
            score += 0.2  # "directed by Stephen King" for "Who directed ...?"
        placeish = any(w.lower().strip(".,") in _PLACE_WORDS for w in words)
        penalty = (0.3 if orgish or placeish else 0.0) + (0.2 if span.kind == "title" else 0.0)
        return max(0.0, score - penalty)
    return 1.0 if span.kind == "title" else 0.7  # name


def _proximity(sentence: str, span: _Span, question_stems: set[str]) -> float:
    """How closely the question's content words surround ``span`` in ``sentence``, 0 to 1: each
    distinct one adds 1 / (1 + the words between it and the span), and two adjacent ones make 1."""
    gaps: dict[str, int] = {}
    for m in _WORD.finditer(sentence):
        stem = _stem(m.group().lower())
        if stem not in question_stems or span.start <= m.start() < span.end:
            continue
        lo, hi = (m.end(), span.start) if m.start() < span.start else (span.end, m.start())
        gap = len(_words(sentence[lo:hi]))
        gaps[stem] = min(gap, gaps.get(stem, gap))
    return min(1.0, sum(1.0 / (1.0 + g) for g in gaps.values()) / 2)


def _in_question(span: _Span, question_norm: str) -> bool:
    norm = _norm(span.text)
    return not norm or f" {norm} " in f" {question_norm} "


def _best_span(question: str, kind: Kind, sentences: Sequence[Sentence]) -> Answer | None:
    q_norm, q_stems, description = _norm(question), content_stems(question), described(question)
    strict = kind in ("number", "year", "date")
    best: tuple[float, Answer] | None = None
    for s in sentences:
        for span in candidates(s.text):
            if _in_question(span, q_norm):
                continue
            fit = _fit(kind, span, s.text, description, q_stems)
            if strict and fit == 0.0:
                continue
            total = s.score + TYPE_WEIGHT * fit + PROXIMITY_WEIGHT * _proximity(s.text, span, q_stems)
            if best is None or total > best[0]:
                best = (total, Answer(_clean(span.text), s.chunk_id, kind))
    return best[1] if best else None


def _clean(text: str) -> str:
    return text.strip(" ,;:.'\"“”") or text


# ---------------------------------------------------------------------------------------------
# 4. Choices and yes/no


def _evidence_of(name: str, sentences: Sequence[Sentence]) -> list[Sentence]:
    """The sentences of the passage titled ``name``, else those naming it."""
    key = _norm(re.sub(r"^the\s+", "", name, flags=re.IGNORECASE))
    own = [s for s in sentences if _norm(re.sub(r"^the\s+", "", s.title, flags=re.IGNORECASE)) == key and key]
    return own or [s for s in sentences if key and f" {key} " in f" {_norm(s.text)} "]


def _first_year(evidence: Sequence[Sentence]) -> int | None:
    for s in evidence:
        found = _YEAR_RE.search(s.text)
        if found:
            return int(found.group())
    return None


def _property_stems(question: str, names: Sequence[str]) -> set[str]:
    own = set().union(*(content_stems(n) for n in names)) if names else set()
    return content_stems(question) - own - _TEMPORAL_EARLY - _TEMPORAL_LATE


def _holds(evidence: Sequence[Sentence], stems: set[str]) -> int:
    found: set[str] = set()
    for s in evidence:
        found |= content_stems(s.text)
    return len(stems & found)


def _choose(question: str, names: tuple[str, str], sentences: Sequence[Sentence]) -> Answer:
    evidence = [_evidence_of(n, sentences) for n in names]
    q_words = set(_words(question))
    direction = -1 if q_words & _TEMPORAL_EARLY else 1 if q_words & _TEMPORAL_LATE else 0
    years = [_first_year(e) for e in evidence]
    if direction and years[0] is not None and years[1] is not None and years[0] != years[1]:
        earlier = 0 if years[0] < years[1] else 1
        pick = earlier if direction < 0 else 1 - earlier
    else:
        stems = _property_stems(question, names)
        counts = [_holds(e, stems) for e in evidence]
        pick = 1 if counts[1] > counts[0] else 0
    source = evidence[pick] or evidence[1 - pick] or list(sentences)
    return Answer(_clean(names[pick]), source[0].chunk_id, "choice")


def _yes_no(question: str, sentences: Sequence[Sentence]) -> Answer:
    last = re.split(r"(?<=[.?!])\s+", question.strip())[-1]
    pair = compared_names(last)
    names: list[str] = list(pair) if pair else [n for _, _, n in _name_spans(last)]
    evidence = [_evidence_of(n, sentences) for n in names]
    cited = next((e[0].chunk_id for e in evidence if e), max(sentences, key=lambda s: s.score).chunk_id)
    same = re.search(r"\bsame\s+(\w+)", question.lower())
    if same and len(evidence) >= 2 and all(evidence):
        noun = _stem(same.group(1))
        shared = _shared_names(evidence, names, noun)
        return Answer("yes" if shared else "no", cited, "yes_no")
    stems = _property_stems(question, names)
    supported = bool(evidence) and all(e and _holds(e, stems) == len(stems) for e in evidence)
    return Answer("yes" if supported else "no", cited, "yes_no")


def _shared_names(evidence: Sequence[Sequence[Sentence]], names: Sequence[str], noun: str) -> set[str]:
    """Names both evidences give with ``noun`` ("Jiangsu province", "province of Jiangsu"), else any they share."""
    own = {_norm(n) for n in names}
    near: list[set[str]] = []
    every: list[set[str]] = []
    for sentences in evidence:
        near_one, every_one = set(), set()
        for s in sentences:
            for span in candidates(s.text):
                norm = _norm(span.text)
                if span.kind != "name" or not norm or any(norm in o or o in norm for o in own):
                    continue
                every_one.add(norm)
                after = [_stem(w) for w in _words(s.text[span.end :])[:1]]
                if after == [noun] or [_stem(w) for w in _before(s.text, span, 2)] == [noun, "of"]:
                    near_one.add(norm)
        near.append(near_one)
        every.append(every_one)
    if all(near):
        return set.intersection(*near)
    return set.intersection(*every)


# ---------------------------------------------------------------------------------------------
# 5. Fragments, and the answer


def _complete(question: str, sentences: Sequence[Sentence]) -> Answer | None:
    tail = _words(question)[-FRAGMENT_TAIL:]
    if not tail:
        return None
    pattern = re.compile(r"\W+".join(re.escape(w) for w in tail) + r"\b", re.IGNORECASE)
    for s in sorted(sentences, key=lambda s: -s.score):
        found = pattern.search(s.text)
        rest = s.text[found.end() :].strip() if found else ""
        if rest.strip(" .,;:"):
            return Answer(rest, s.chunk_id, "fragment")
    return None


def answer_span(question: str, sentences: Sequence[Sentence]) -> Answer | None:
    """The short answer to ``question`` from ``sentences`` (see the module docstring), or None when
    nothing was read. With sentences but no candidate of the kind asked for: the best sentence."""
    if not sentences:
        return None
    best = max(sentences, key=lambda s: s.score)  # max keeps the first of equal scores
    kind = question_kind(question)
    found: Answer | None
    if kind == "choice":
        names = _pair(question, "or") or _pair(question, "and")
        found = _choose(question, names, sentences) if names else None
    elif kind == "yes_no":
        found = _yes_no(question, sentences)
    elif kind == "fragment":
        found = _complete(question, sentences)
    else:
        found = _best_span(question, kind, sentences)
    return found or Answer(best.text.strip(), best.chunk_id, kind)
