"""Question loaders: the real HotpotQA-100 file, hand-made MuSiQue / 2Wiki / A-RAG fixtures, every
bad-input message, and mapping supporting passages to chunk ids."""

from __future__ import annotations

import dataclasses
import json
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from arag_graph.core.documents import Chunk
from arag_graph.core.errors import AragError, DatasetError
from arag_graph.qa.datasets import (
    QUESTION_FORMATS,
    Question,
    gold_chunk_ids,
    load_questions,
    missing_support,
    passage_maps,
)
from tests.conftest import DATA

HOTPOT = DATA / "hotpotqa-100"


def write_json(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


# --- the real HotpotQA-100 file ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def hotpot_questions() -> list[Question]:
    return load_questions(HOTPOT / "questions.json")


@pytest.fixture(scope="module")
def hotpot_corpus() -> dict[str, list[str]]:
    return json.loads((HOTPOT / "corpus.json").read_text(encoding="utf-8"))


def test_hotpotqa_100_loads(hotpot_questions: list[Question]) -> None:
    questions = hotpot_questions
    assert len(questions) == 100
    assert sum(q.type == "bridge" for q in questions) == 78
    assert sum(q.type == "comparison" for q in questions) == 22
    assert len({q.id for q in questions}) == 100
    assert all(len(q.supporting_titles) >= 2 for q in questions)
    assert all(q.answers and q.answers[0] == q.answer and q.answer.strip() for q in questions)
    assert all(q.metadata["level"] in {"easy", "medium", "hard"} for q in questions)

    first = questions[0]
    assert first.id == "5a77ec115542992a6e59dff7"
    assert first.question == "If Gallu is a demon Lilu is what?"
    assert first.answers == ("a spirit",)
    assert first.supporting_titles == ("Alû", "Lilu (mythology)")


def test_hotpotqa_100_detects_its_format(hotpot_questions: list[Question]) -> None:
    assert load_questions(HOTPOT / "questions.json", format="hotpotqa") == hotpot_questions


def test_hotpotqa_100_support_is_in_its_corpus(
    hotpot_questions: list[Question], hotpot_corpus: dict[str, list[str]]
) -> None:
    # The two files use identical title strings, so exact lookup must already succeed.
    for question in hotpot_questions:
        for title, text in zip(question.supporting_titles, question.supporting_texts, strict=True):
            assert title in hotpot_corpus
            assert text == "".join(hotpot_corpus[title])
    title_to_ids = {title: [f"chunk-{index}"] for index, title in enumerate(hotpot_corpus)}
    assert missing_support(hotpot_questions, title_to_ids) == []


def test_hotpotqa_100_against_the_wrong_corpus_is_reported(hotpot_questions: list[Question]) -> None:
    missing = missing_support(hotpot_questions[:3], {"Some Other Passage": ["c0"]})
    assert len(missing) == sum(len(q.supporting_titles) for q in hotpot_questions[:3])
    assert missing[0] == ("5a77ec115542992a6e59dff7", "Alû")


# --- hand-made fixtures ---------------------------------------------------------------------------------

MUSIQUE = [
    {
        "id": "2hop__13548_13529",
        "question": "When was the person who wrote Foo born?",
        "answer": "1901",
        "answer_aliases": ["1901 AD", "1901"],
        "answerable": True,
        "question_decomposition": [{"id": 13548, "question": "Who wrote Foo?", "answer": "Ann Bar"}],
        "paragraphs": [
            {"idx": 0, "title": "Distractor", "paragraph_text": "Nothing here.", "is_supporting": False},
            {
                "idx": 1,
                "title": "Foo",
                "paragraph_text": "Foo was written by Ann Bar.",
                "is_supporting": True,
            },
            {
                "idx": 2,
                "title": "Ann Bar",
                "paragraph_text": "Ann Bar was born in 1901.",
                "is_supporting": True,
            },
        ],
    },
    {
        "id": "3hop1__1_2_3",
        "question": "Another question?",
        "answer": "Yes",
        "answer_aliases": [],
        "paragraphs": [{"idx": 0, "title": "T", "paragraph_text": "Text.", "is_supporting": True}],
    },
]

TWOWIKI = [
    {
        "_id": "2w-1",
        "type": "compositional",
        "question": "Who is the father of the director of Film X?",
        "answer": "John Doe",
        "answer_id": "Q1",
        "supporting_facts": [["Film X", 0], ["Jane Doe", 1], ["Film X", 1]],
        "context": [
            ["Film X", ["Film X is a film", " directed by Jane Doe."]],
            ["Jane Doe", ["Jane Doe is a director.", " Her father is John Doe."]],
            ["Other", ["Unrelated."]],
        ],
        "evidences": [["Film X", "director", "Jane Doe"], ["Jane Doe", "father", "John Doe"]],
        "entity_ids": "Q2_Q3",
    }
]

ARAG = [
    {
        "question": "What is the capital of France?",
        "answer": ["Paris", "Paris, France", "Paris"],
        "aliases": ["City of Light"],
        "gold_titles": ["France"],
        "supporting_facts": ["Paris", ["France", 2]],
        "question_type": "fact",
        "source": "hand-made",
    },
    {
        "question": "  How many moons does Mars have? ",
        "answer": 2,
        "evidence": ["Mars has two moons, Phobos and Deimos."],
    },
    {"id": 17, "question": "Which title?", "answer": "X", "evidence": [["Title A", 0], ["Title B", 3]]},
]


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_musique(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"musique{suffix}"
    write_json(path, MUSIQUE) if suffix == ".json" else write_jsonl(path, MUSIQUE)
    first, second = load_questions(path)
    assert first.id == "2hop__13548_13529"
    assert first.type == "2hop"
    assert first.answers == ("1901", "1901 AD")
    assert first.supporting_titles == ("Foo", "Ann Bar")
    assert first.supporting_texts == ("Foo was written by Ann Bar.", "Ann Bar was born in 1901.")
    assert first.metadata["answerable"] is True
    assert first.metadata["question_decomposition"][0]["answer"] == "Ann Bar"
    assert second.type == "3hop1"
    assert (first.hops, second.hops) == (2, 3)  # the per-hop breakdowns of SRAG and CoRAG
    assert second.answers == ("Yes",)
    assert load_questions(path, format="musique") == [first, second]


def test_2wiki(tmp_path: Path) -> None:
    (question,) = load_questions(write_json(tmp_path / "2wiki.json", TWOWIKI))
    assert question.id == "2w-1"
    assert question.type == "compositional"
    assert question.hops is None  # 2Wiki's types name no hop count
    assert question.answers == ("John Doe",)
    assert question.supporting_titles == ("Film X", "Jane Doe")
    assert question.supporting_texts == (
        "Film X is a film directed by Jane Doe.",
        "Jane Doe is a director. Her father is John Doe.",
    )
    assert question.metadata == {
        "evidences": TWOWIKI[0]["evidences"],
        "answer_id": "Q1",
        "entity_ids": "Q2_Q3",
    }


def test_hotpotqa_without_context_has_no_texts(tmp_path: Path) -> None:
    record = {"_id": "h", "question": "Q?", "answer": "A", "supporting_facts": [["T", 0]]}
    (question,) = load_questions(write_json(tmp_path / "q.json", [record]), format="hotpotqa")
    assert question.supporting_titles == ("T",)
    assert question.supporting_texts == ()
    assert question.type is None


def test_arag(tmp_path: Path) -> None:
    first, second, third = load_questions(write_json(tmp_path / "arag.json", ARAG))
    assert first.id == "0"
    assert first.answer == "Paris"
    assert first.answers == ("Paris", "Paris, France", "City of Light")
    assert first.supporting_titles == ("France", "Paris")
    assert first.supporting_texts == ()
    assert first.type == "fact"
    assert first.metadata == {"source": "hand-made"}

    assert second.id == "1"
    assert second.question == "How many moons does Mars have?"
    assert second.answers == ("2",)
    assert second.supporting_titles == ()
    assert second.metadata == {"evidence": ["Mars has two moons, Phobos and Deimos."]}

    assert third.id == "17"
    assert third.supporting_titles == ("Title A", "Title B")
    assert third.metadata == {}


def test_json_lines_detected_by_content(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "questions.txt", [{"question": "Q1?", "answer": "A"}, {"question": "Q2?", "answer": "B"}]
    )
    assert [q.question for q in load_questions(path)] == ["Q1?", "Q2?"]
    single = write_jsonl(tmp_path / "single.json", [{"id": "only", "question": "Q?", "answer": "A"}])
    assert [q.id for q in load_questions(single)] == ["only"]


def test_json_lines_ignores_blank_lines_and_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        '\ufeff{"question": "Q1?", "answer": "A"}\n\n{"question": "Q2?", "answer": "B"}\n', encoding="utf-8"
    )
    # Ids default to the question's position, not its line number.
    assert [q.id for q in load_questions(path)] == ["0", "1"]


def test_format_name_is_case_insensitive(tmp_path: Path) -> None:
    path = write_json(tmp_path / "q.json", MUSIQUE)
    assert load_questions(path, format=" MuSiQue ") == load_questions(path)


def test_question_is_immutable_and_hashable() -> None:
    question = Question(id="q", question="Q?", answers=("A",), metadata={"level": "easy"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        question.id = "other"  # type: ignore[misc]
    assert hash(question) == hash(dataclasses.replace(question, metadata={}))
    assert question != dataclasses.replace(question, metadata={})
    with pytest.raises(ValueError, match="parallel"):
        Question(id="q", question="Q?", answers=("A",), supporting_titles=("T",), supporting_texts=("a", "b"))
    with pytest.raises(ValueError, match="no gold answer"):
        Question(id="q", question="Q?", answers=())


def test_question_formats() -> None:
    assert QUESTION_FORMATS == ("hotpotqa", "2wiki", "musique", "arag")


# --- bad input ------------------------------------------------------------------------------------


def load_error(path: Path, format: str | None = None) -> str:
    """The message of the DatasetError that loading raises, checked to be one line naming the file."""
    with pytest.raises(DatasetError) as info:
        load_questions(path, format=format)
    message = str(info.value)
    assert isinstance(info.value, AragError)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    # No chained "during handling of the above exception" traceback behind the message.
    assert info.value.__context__ is None or info.value.__suppress_context__
    return message


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in load_error(tmp_path / "absent.json")


def test_directory(tmp_path: Path) -> None:
    assert "is a directory" in load_error(tmp_path) and "questions.json" in load_error(tmp_path)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"question": "Q?",\n   "answer": }\n]', encoding="utf-8")
    message = load_error(path)
    assert re.search(r"invalid JSON at line 3, column 14 \(Expecting value\)", message), message


def test_trailing_garbage_after_a_list_is_reported_as_json(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[{"question": "Q?", "answer": "A"}]\n]', encoding="utf-8")
    assert "invalid JSON at line 2, column 1 (Extra data)" in load_error(path)


def test_invalid_json_lines_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "Q1?", "answer": "A"}\n{"question": "Q2?", "answer": \n', encoding="utf-8")
    assert "line 2 is not valid JSON" in load_error(path)
    detected = tmp_path / "bad.json"
    detected.write_text('{"question": "Q1?", "answer": "A"}\n{"question": \n', encoding="utf-8")
    assert "line 2 is not valid JSON" in load_error(detected)


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes('[{"question": "Qu\u00e9?", "answer": "A"}]'.encode("latin-1"))
    assert "not UTF-8" in load_error(path)


def test_empty_inputs(tmp_path: Path) -> None:
    assert "holds no questions" in load_error(write_json(tmp_path / "empty.json", []))
    blank = tmp_path / "blank.json"
    blank.write_text("  \n", encoding="utf-8")
    assert "is empty" in load_error(blank)
    blank_lines = tmp_path / "blank.jsonl"
    blank_lines.write_text("\n\n", encoding="utf-8")
    assert "holds no questions" in load_error(blank_lines)


def test_top_level_not_a_list(tmp_path: Path) -> None:
    message = load_error(write_json(tmp_path / "obj.json", {"data": [], "version": 1}))
    assert "JSON object with keys data, version" in message
    assert "holds a string" in load_error(write_json(tmp_path / "str.json", "questions"))


def test_item_not_an_object(tmp_path: Path) -> None:
    message = load_error(write_json(tmp_path / "q.json", [{"question": "Q?", "answer": "A"}, "Q2?"]))
    assert "item 1 (0-based) is a string, not an object" in message


def test_item_without_answer_names_index_and_fields(tmp_path: Path) -> None:
    records = [{"question": "Q?", "answer": "A"}, {"_id": "x", "question": "Q2?", "type": "bridge"}]
    message = load_error(write_json(tmp_path / "q.json", records))
    assert "item 1 (0-based) has no 'answer' (fields found: _id, question, type)" in message
    assert "needs 'question', 'answer'" in message


def test_item_without_question(tmp_path: Path) -> None:
    message = load_error(write_jsonl(tmp_path / "q.jsonl", [{"query": "Q?", "answer": "A"}]))
    assert "line 1 has no 'question' (fields found: query, answer)" in message


def test_empty_or_wrongly_typed_fields(tmp_path: Path) -> None:
    assert "has an empty 'answer'" in load_error(write_json(tmp_path / "a.json", [{"question": "Q?", "answer": " "}]))
    assert "has an empty 'answer'" in load_error(write_json(tmp_path / "b.json", [{"question": "Q?", "answer": []}]))
    assert "has a boolean in 'answer'" in load_error(
        write_json(tmp_path / "c.json", [{"question": "Q?", "answer": True}])
    )
    assert "has an empty string as 'question'" in load_error(
        write_json(tmp_path / "d.json", [{"question": "", "answer": "A"}])
    )
    message = load_error(write_json(tmp_path / "e.json", [{"question": "Q?", "answer": "A", "aliases": {"x": 1}}]))
    assert "has an object in 'aliases'" in message
    message = load_error(write_json(tmp_path / "f.json", [{"id": ["x"], "question": "Q?", "answer": "A"}]))
    assert "has a list as 'id'" in message


def test_bad_supporting_facts(tmp_path: Path) -> None:
    record = {"_id": "h", "question": "Q?", "answer": "A", "supporting_facts": [["T", 0], 5], "context": []}
    message = load_error(write_json(tmp_path / "q.json", [record]))
    assert "has a number as supporting_facts[1]; make it a [title, sentence_index] pair" in message


def test_bad_musique_paragraphs(tmp_path: Path) -> None:
    record = {
        "id": "m",
        "question": "Q?",
        "answer": "A",
        "paragraphs": [{"title": "T", "is_supporting": True}],
    }
    message = load_error(write_json(tmp_path / "q.json", [record]))
    assert "supporting paragraphs[0] without a string 'title' and 'paragraph_text'" in message
    assert "(fields found: title, is_supporting)" in message


def test_forced_format_that_does_not_fit(tmp_path: Path) -> None:
    message = load_error(write_json(tmp_path / "q.json", TWOWIKI), format="musique")
    assert "has no 'paragraphs'" in message
    assert "check the format argument" in message


def test_unknown_format_lists_valid_ones(tmp_path: Path) -> None:
    message = load_error(write_json(tmp_path / "q.json", ARAG), format="squad")
    assert "unknown question format 'squad'; use one of hotpotqa, 2wiki, musique, arag" in message


def test_duplicate_ids(tmp_path: Path) -> None:
    records = [{"id": "q", "question": "Q1?", "answer": "A"}, {"id": "q", "question": "Q2?", "answer": "B"}]
    message = load_error(write_json(tmp_path / "q.json", records))
    assert "item 1 (0-based) repeats question id 'q' of item 0 (0-based)" in message


# --- gold passages -> chunk ids ---------------------------------------------------------------------

QUESTION = Question(
    id="q1",
    question="Q?",
    answers=("A",),
    supporting_titles=("Alû", "Lilu  (mythology) ", "Gone"),
    supporting_texts=("Alû is a demon.", "Lilu is a spirit. It is old.", "Not indexed."),
)


def test_gold_chunk_ids_exact_then_normalised_title() -> None:
    decomposed = unicodedata.normalize("NFD", "Alû")
    assert decomposed != "Alû"
    title_to_ids = {decomposed: ["c1", "c2"], "Lilu (mythology)": "c3", "Alû": []}
    assert gold_chunk_ids(QUESTION, title_to_ids) == ("c1", "c2", "c3")
    assert gold_chunk_ids(QUESTION, {"Alû": ["c9"], decomposed: ["c1"]}) == ("c9",)  # exact wins
    assert gold_chunk_ids(QUESTION, {"alû": ["c1"]}) == ()  # titles stay case-sensitive


def test_gold_chunk_ids_by_text_first_then_title() -> None:
    text_to_ids = {"Lilu is a spirit.  It is old.\n": ["c7"], "Alû is a demon.": ["c5"]}
    # The passage text is the more specific key: it wins over a title that names another chunk.
    assert gold_chunk_ids(QUESTION, {"Alû": ["c1"]}, text_to_ids) == ("c5", "c7")
    # A text not in the index (a long document cut into chunks) leaves the title's chunks.
    assert gold_chunk_ids(QUESTION, {"Alû": ["c1", "c2"]}, {"Lilu is a spirit. It is old.": ["c7"]}) == (
        "c1",
        "c2",
        "c7",
    )
    assert gold_chunk_ids(QUESTION, {}, {"Lilu is a spirit.It is old.": ["c7", "c7"]}) == ("c7",)


def test_missing_support() -> None:
    other = Question(id="q2", question="Q?", answers=("A",), supporting_titles=("Alû",))
    no_support = Question(id="q3", question="Q?", answers=("A",))
    title_to_ids = {"Alû": ["c1"]}
    assert missing_support([QUESTION, other, no_support], title_to_ids) == [
        ("q1", "Lilu  (mythology) "),
        ("q1", "Gone"),
    ]
    assert missing_support([QUESTION], title_to_ids, {"Lilu is a spirit. It is old.": ["c2"]}) == [("q1", "Gone")]


def test_passage_maps_from_chunks() -> None:
    chunks = [
        Chunk(id="c1", text="Alû is a demon.", title="Alû"),
        Chunk(id="c2", text="More on Alû.", title="Alû"),
        Chunk(id="c3", text="Lilu is a spirit. It is old.", title=None),
    ]
    title_to_ids, text_to_ids = passage_maps(chunks)
    assert title_to_ids == {"Alû": ["c1", "c2"]}
    assert text_to_ids["Lilu is a spirit. It is old."] == ["c3"]
    # Two passages share the title "Alû"; only the one whose text the question cites is gold.
    assert gold_chunk_ids(QUESTION, title_to_ids, text_to_ids) == ("c1", "c3")


def test_musique_paragraphs_sharing_a_title_count_only_the_supporting_one(tmp_path: Path) -> None:
    paragraphs = [
        {"idx": 0, "title": "Green Bay", "paragraph_text": "Green Bay is a city in Wisconsin.", "is_supporting": False},
        {"idx": 1, "title": "Green Bay", "paragraph_text": "The Packers play in Green Bay.", "is_supporting": True},
    ]
    item = {"id": "m1", "question": "Where do the Packers play?", "answer": "Green Bay", "paragraphs": paragraphs}
    (question,) = load_questions(write_json(tmp_path / "musique.json", [item]))
    chunks = [Chunk(id=str(i), text=p["paragraph_text"], title=p["title"]) for i, p in enumerate(paragraphs)]
    assert gold_chunk_ids(question, *passage_maps(chunks)) == ("1",)


@pytest.mark.parametrize(
    ("question_type", "hops"),
    [("2hop", 2), ("3hop1", 3), ("4hop3", 4), (" 3HOP2 ", 3), ("bridge", None), ("bridge_comparison", None),
     ("hop", None), ("", None), (None, None)],
)  # fmt: skip
def test_hop_count(question_type: str | None, hops: int | None) -> None:
    from arag_graph.qa.datasets import hop_count

    assert hop_count(question_type) == hops
