"""Sentence splitting: the hand-picked hard cases, and the no-text-lost invariants on any input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arag_graph.core.sentences import sentence_spans, split_sentences
from tests.conftest import data_file


def assert_valid_spans(text: str, spans: list[tuple[int, int]]) -> None:
    """Spans are ordered, disjoint, stripped, and cover every non-whitespace character once."""
    previous_end = 0
    for start, end in spans:
        assert previous_end <= start < end <= len(text)
        piece = text[start:end]
        assert piece == piece.strip() and piece
        assert not text[previous_end:start].strip(), "text between sentences was lost"
        previous_end = end
    assert not text[previous_end:].strip(), "text after the last sentence was lost"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # titles and other prefixes never end a sentence
        (
            "Dr. Smith met Mr. and Mrs. Jones on Main St. in Boston. They talked.",
            ["Dr. Smith met Mr. and Mrs. Jones on Main St. in Boston.", "They talked."],
        ),
        (
            "Gen. Lee met Col. Sanders, Lt. Dan and Sgt. Pepper. Prof. Xavier and Rev. Green spoke.",
            ["Gen. Lee met Col. Sanders, Lt. Dan and Sgt. Pepper.", "Prof. Xavier and Rev. Green spoke."],
        ),
        ("Mt. Everest is tall. Ft. Worth is in Texas.", ["Mt. Everest is tall.", "Ft. Worth is in Texas."]),
        (
            "Fruit, e.g. apples, is good. Roots, i.e. carrots, too. Ali vs. Frazier was big.",
            ["Fruit, e.g. apples, is good.", "Roots, i.e. carrots, too.", "Ali vs. Frazier was big."],
        ),
        # abbreviations that may or may not end a sentence
        (
            "He moved to the U.S. The move was hard. The U.S. Army was big. She left the U.K. in May.",
            [
                "He moved to the U.S.",
                "The move was hard.",
                "The U.S. Army was big.",
                "She left the U.K. in May.",
            ],
        ),
        (
            "Apples, pears, etc. are fruit. We sell apples, pears, etc. The list goes on.",
            ["Apples, pears, etc. are fruit.", "We sell apples, pears, etc.", "The list goes on."],
        ),
        (
            "Apple Inc. is a company. He founded Acme Ltd. The firm closed. Ford Motor Co. was founded in 1903.",
            [
                "Apple Inc. is a company.",
                "He founded Acme Ltd.",
                "The firm closed.",
                "Ford Motor Co. was founded in 1903.",
            ],
        ),
        (
            "Martin Luther King Jr. was a minister. His son is Martin Luther King Jr. He is an activist.",
            [
                "Martin Luther King Jr. was a minister.",
                "His son is Martin Luther King Jr.",
                "He is an activist.",
            ],
        ),
        ("They met at 5 p.m. on Monday. It rained.", ["They met at 5 p.m. on Monday.", "It rained."]),
        # reference abbreviations before numbers
        (
            "It was No. 1 in the charts. The answer was no. Then it was No. 2.",
            ["It was No. 1 in the charts.", "The answer was no.", "Then it was No. 2."],
        ),
        (
            "It opened on Jan. 5, 1920. See pp. 12-14 and vol. 3 for details.",
            ["It opened on Jan. 5, 1920.", "See pp. 12-14 and vol. 3 for details."],
        ),
        # Wikipedia-style dates
        (
            "Alfred (c. 849 – 899) was king. Odo (ca. 1200) was not. Ann (b. 1950; d. 2010) sang. "
            "Rhirid (fl. 1160) fought. Ivo (1240–c. 1243) wrote.",
            [
                "Alfred (c. 849 – 899) was king.",
                "Odo (ca. 1200) was not.",
                "Ann (b. 1950; d. 2010) sang.",
                "Rhirid (fl. 1160) fought.",
                "Ivo (1240–c. 1243) wrote.",
            ],
        ),
        (
            "Rhiwallon (c.\u20091020 – c.\u20091069) was a king.",
            ["Rhiwallon (c.\u20091020 – c.\u20091069) was a king."],
        ),
        # initials
        (
            "The film was directed by J. Om Prakash. It was a hit.",
            ["The film was directed by J. Om Prakash.", "It was a hit."],
        ),
        (
            "J. R. R. Tolkien wrote it. George W. Bush read it. M. A. Thirumugham filmed it.",
            ["J. R. R. Tolkien wrote it.", "George W. Bush read it.", "M. A. Thirumugham filmed it."],
        ),
        ("It was founded by E. W. Scripps in 1920.", ["It was founded by E. W. Scripps in 1920."]),
        ("He backed Plan B. The plan failed.", ["He backed Plan B.", "The plan failed."]),
        # numbers and decimals
        (
            "He is 1.70 m tall. Growth was 3.5% in v1.2 of the report. The value is 12.5. "
            "It rose in 1994. 1995 was flat.",
            [
                "He is 1.70 m tall.",
                "Growth was 3.5% in v1.2 of the report.",
                "The value is 12.5.",
                "It rose in 1994.",
                "1995 was flat.",
            ],
        ),
        # quotes and brackets after the terminal punctuation
        ('He said "Go." Then he left.', ['He said "Go."', "Then he left."]),
        ("He said “Go.” Then he left.", ["He said “Go.”", "Then he left."]),
        (
            "The rule applies (see below.) Next comes the detail.",
            ["The rule applies (see below.)", "Next comes the detail."],
        ),
        ('"Who is there?" she asked. Nobody answered.', ['"Who is there?" she asked.', "Nobody answered."]),
        (
            'It stars in "Sledge Hammer!", "The A-Team" and others.',
            ['It stars in "Sledge Hammer!", "The A-Team" and others.'],
        ),
        ("Henry (1176? – 1216) was a king.", ["Henry (1176? – 1216) was a king."]),
        # ellipses, question and exclamation marks
        (
            "Wait... what happened? Nothing… Then it rained!",
            ["Wait... what happened?", "Nothing…", "Then it rained!"],
        ),
        ("Who are you? I am Bob! Really?! Yes.", ["Who are you?", "I am Bob!", "Really?!", "Yes."]),
        ('It is titled " ...Baby One More Time" today.', ['It is titled " ...Baby One More Time" today.']),
        # CJK full stops need no space after them
        ("这是第一句。这是第二句！第三句？", ["这是第一句。", "这是第二句！", "第三句？"]),
        # HotpotQA sentences
        (
            "Ed Wood is a 1994 American biographical period comedy-drama film directed and produced by Tim "
            "Burton. It stars Johnny Depp as cult filmmaker Ed Wood.",
            [
                "Ed Wood is a 1994 American biographical period comedy-drama film directed and produced by Tim Burton.",
                "It stars Johnny Depp as cult filmmaker Ed Wood.",
            ],
        ),
        ("", []),
        (" \n\t ", []),
        ("no terminal punctuation", ["no terminal punctuation"]),
    ],
)
def test_split(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
    assert_valid_spans(text, sentence_spans(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a blank line always separates, whatever follows
        ("First paragraph\n\nsecond paragraph", ["First paragraph", "second paragraph"]),
        ("One line.\n  \n\nAnother.", ["One line.", "Another."]),
        # list items, headings, quotes, table rows
        (
            "# Heading\nSome text here. More text.\n- item one\n- item two\n* star\n• bullet\n1. first\n2) second",
            [
                "# Heading",
                "Some text here.",
                "More text.",
                "- item one",
                "- item two",
                "* star",
                "• bullet",
                "1. first",
                "2) second",
            ],
        ),
        ("## lower-case heading\nfollowed by text", ["## lower-case heading", "followed by text"]),
        ("> quoted line\n> another", ["> quoted line", "> another"]),
        ("| a | b |\n| 1 | 2 |", ["| a | b |", "| 1 | 2 |"]),
        # short title-like lines and colons
        ("Early life\nHe was born in 1950.", ["Early life", "He was born in 1950."]),
        (
            "They had issue:\nAs Don Juan died, the title passed on.",
            ["They had issue:", "As Don Juan died, the title passed on."],
        ),
        # hard-wrapped prose stays one sentence
        (
            "The paragraph starts here and it goes on for quite a long way until\nthe line is wrapped. Done.",
            [
                "The paragraph starts here and it goes on for quite a long way until\nthe line is wrapped.",
                "Done.",
            ],
        ),
        (
            "He married Maria Anna, daughter of\nJoseph Charles of Bavaria.",
            ["He married Maria Anna, daughter of\nJoseph Charles of Bavaria."],
        ),
        ("It was written by\nDr. Smith and\nDr.\nJones.", ["It was written by\nDr. Smith and\nDr.\nJones."]),
        ("A short line,\nContinued here.", ["A short line,\nContinued here."]),
        # terminal punctuation at a line end follows the punctuation rules
        ("It ended.\nThen it began.", ["It ended.", "Then it began."]),
        ("He moved to the U.S.\nCanada came later.", ["He moved to the U.S.", "Canada came later."]),
        ("Windows line ends.\r\nAre fine.\r\n\r\nReally.", ["Windows line ends.", "Are fine.", "Really."]),
    ],
)
def test_newlines(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected
    assert_valid_spans(text, sentence_spans(text))


def test_spans_are_offsets_into_the_text() -> None:
    text = "  Dr. Who arrived.   He left!\n\nThe end.  "
    spans = sentence_spans(text)
    assert spans == [(2, 18), (21, 29), (31, 39)]
    assert [text[s:e] for s, e in spans] == split_sentences(text)


# Text built from the characters the splitter treats specially, so hypothesis reaches its branches.
_PIECES = st.sampled_from(
    [
        "Dr", "U.S", "etc", "J", "No", "c", "1994", "1.5", "the", "The", "It", "é", "中文", "A",
        ".", "..", "...", "…", "?", "!", "。", '"', "”", "'", "(", ")", "[", "]", ":", ",", "-", "#",
        "1.", "*", "|", ">", " ", "  ", "\n", "\n\n", "\t", "\r\n", "\u2009", "\xa0", "\u2028",
    ]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.lists(_PIECES, max_size=60).map("".join), st.text(max_size=200)))
def test_spans_cover_all_text(text: str) -> None:
    spans = sentence_spans(text)
    assert_valid_spans(text, spans)
    assert split_sentences(text) == [text[s:e] for s, e in spans]


def _shared_passages() -> list[str]:
    hotpot, wiki = data_file("hotpotqa-100/corpus.json"), data_file("2wiki-corpus/corpus.json")
    passages = ["".join(sentences) for sentences in json.loads(hotpot.read_text(encoding="utf-8")).values()]
    passages += [item["text"] for item in json.loads(wiki.read_text(encoding="utf-8"))]
    return passages


def test_shared_corpora_lose_no_text() -> None:
    passages = _shared_passages()
    assert len(passages) == 994 + 6119
    for text in passages:
        assert_valid_spans(text, sentence_spans(text))


def test_hotpotqa_gold_sentences_mostly_agree() -> None:
    """HotpotQA ships its own segmentation; it has errors of its own, but we must stay close to it."""
    path = data_file("hotpotqa-100/corpus.json")
    corpus = json.loads(path.read_text(encoding="utf-8"))
    agree = sum(split_sentences("".join(gold)) == [s.strip() for s in gold if s.strip()] for gold in corpus.values())
    assert agree / len(corpus) >= 0.92
