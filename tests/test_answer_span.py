"""The offline policy answers like a reader: the short span the question asks for (issue 26 item 4).

The rules are :mod:`arag_graph.offline.answer_span`'s; these tests hold each kind of question to its gold
short answer, on the bundled sample (the demo's own questions) and on small hand-written passages.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arag_graph.offline.answer_span import Sentence, answer_span, compared_names, question_kind
from arag_graph.offline.policy import OfflinePolicy
from arag_graph.offline.rules import NOT_FOUND, extractive_answer
from arag_graph.qa.matching import exact_match
from arag_graph.retrievers.passages import Passage
from arag_graph.srag.model import OfflineSrag

SAMPLE = Path(__file__).resolve().parents[1] / "arag_graph" / "data" / "sample" / "questions.json"


def sentences(*texts: str, titles: tuple[str, ...] = ()) -> list[Sentence]:
    """Sentences in chunk ``0``, ``1``, ... with decreasing relevance (the first is the best)."""
    return [Sentence(str(i), text, 1.0 - i / 10, titles[i] if i < len(titles) else "") for i, text in enumerate(texts)]


def span(question: str, *texts: str, titles: tuple[str, ...] = ()) -> str:
    found = answer_span(question, sentences(*texts, titles=titles))
    assert found is not None
    return found.text


# --------------------------------------------------------------------------------------------
# The demo's questions, end to end through the agent on the bundled sample


@pytest.fixture(scope="module")
def float32_sample_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The bundled sample encoded with the float32 ONNX encoder (the model's own vectors, as torch's).

    The policy's rules are under test here, not int8 rounding: the default ``onnx-int8`` encoder is
    an export made on each machine by whatever onnx/onnxruntime it has, within cosine ~0.99 of the
    model, and on the first question that noise reorders the semantic hits the policy reads (seen
    with onnxruntime 1.32: "Domestic Disturbance" instead of "Stephen King"). float32 ONNX equals the
    model to 1e-12 on every version, so the demo questions are judged on the model's own ranking.
    """
    from arag_graph.index.build import build_index
    from arag_graph.index.sample import sample_corpus_path

    return build_index(sample_corpus_path(), tmp_path_factory.mktemp("sample-fp32") / "index", encoder="onnx")


@pytest.mark.parametrize("position", [0, 1, 2])
def test_the_demo_questions_get_their_gold_short_answers(float32_sample_index: Any, position: int) -> None:
    from arag_graph.registry import build_graph, config_for

    sample_index = float32_sample_index
    question = json.loads(SAMPLE.read_text(encoding="utf-8"))[position]
    graph = build_graph("arag", index=sample_index, model=OfflinePolicy(index=sample_index))
    state = graph.invoke({"question": question["question"]}, context=config_for("arag"))
    assert exact_match(state["answer"], [question["answer"]]), state["answer"]
    assert state["citations"]  # the span keeps the chunk it came from


# --------------------------------------------------------------------------------------------
# Each kind of question


def test_a_place_question_gets_the_place_after_its_preposition() -> None:
    answer = span(
        "Grace Krilanovich's first novel was published by an independent publishing house founded in 2005, "
        "and is based where?",
        "Grace Krilanovich (born October 5, 1979) is an American author.",
        "Two Dollar Radio is an independent publishing house founded in 2005 and based in Columbus, Ohio.",
    )
    assert answer == "Columbus, Ohio"


def test_a_person_question_gets_the_name_its_description_introduces() -> None:
    answer = span(
        "Indian film photographer Jagdish Mali is father to which Bollywood actress?",
        "Jagdish Mali (18 January 1954 - 13 May 2013) was an Indian fashion and film photographer.",
        "The daughter of poet Kaifi Azmi and stage actress Shaukat Azmi, she studied in Pune.",
        "He was the father of Bollywood actress Antara Mali.",
    )
    assert answer == "Antara Mali"


def test_who_did_it_takes_the_name_after_by() -> None:
    answer = span(
        "Who directed the film that was shot in Leland in 1986?",
        'Movies such as "Maximum Overdrive" (1986) have been shot in or around Leland.',
        "Maximum Overdrive is a 1986 American horror film written and directed by Stephen King.",
    )
    assert answer == "Stephen King"


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("When was the Welsh singer with the album Diamond Cut born?", "8 June 1951"),
        ("In what year was the singer with the album Diamond Cut born?", "1951"),
        ("Jean Vander Pyl's sitcom originally premiered on which date?", "September 23, 1962"),
    ],
)
def test_dates_and_years(question: str, gold: str) -> None:
    passages = (
        "Bonnie Tyler (born 8 June 1951) is a Welsh singer known for her husky voice.",
        "Her third album, Diamond Cut, came out in 1979 on RCA.",
        "The Jetsons, with Jean Vander Pyl, originally premiered on September 23, 1962 on ABC.",
    )
    assert span(question, *passages) == gold


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("The English pop singer has sold more than how many records worldwide?", "150 million"),
        ("At the 2011 census, what was the population of the town where she was born?", "6,960"),
        ("How many times was he selected for the all-star game?", "two"),
    ],
)
def test_numbers(question: str, gold: str) -> None:
    passages = (
        "Engelbert Humperdinck, an English pop singer born in 1936, has sold more than 150 million records worldwide.",
        "She was born in Junee, a town whose population was 6,960 at the 2011 census.",
        "He was selected for the all-star game two times, in 2003 and 2004.",
    )
    assert span(question, *passages) == gold


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("Are Christopher Nolan and Sathish Kalathil both film directors?", "yes"),
        ("Are King Vidor and Sathish Kalathil both American directors?", "no"),
        ("Are Nantong and Jingdezhen situated in the same province?", "no"),
        ("Are Nantong and Suzhou situated in the same province?", "yes"),
    ],
)
def test_yes_no_comparisons(question: str, gold: str) -> None:
    passages = (
        "Christopher Nolan is a British-American film director and producer.",
        "Sathish Kalathil is an Indian film director and writer.",
        "King Vidor was an American film director.",
        "Nantong is a city in southeastern Jiangsu province, China.",
        "Jingdezhen is a city in Jiangxi province, China.",
        "Suzhou is a major city in southern Jiangsu province, China.",
    )
    titles = ("Christopher Nolan", "Sathish Kalathil", "King Vidor", "Nantong", "Jingdezhen", "Suzhou")
    assert question_kind(question) == "yes_no"
    assert span(question, *passages, titles=titles) == gold


@pytest.mark.parametrize(
    ("question", "gold"),
    [
        ("Who is the oldest, Sid Haig or Vic Darchinyan?", "Sid Haig"),
        ("Who is the youngest, Sid Haig or Vic Darchinyan?", "Vic Darchinyan"),
        ("Which singer is American, Mark King or Nick Hexum?", "Nick Hexum"),
    ],
)
def test_choices_pick_one_of_the_two_names(question: str, gold: str) -> None:
    passages = (
        "Sid Haig (born July 14, 1939) is an American actor.",
        "Vic Darchinyan (born 7 January 1976) is an Armenian-Australian boxer.",
        "Mark King (born 20 October 1958) is an English musician.",
        "Nick Hexum (born April 12, 1970) is an American singer.",
    )
    titles = ("Sid Haig", "Vic Darchinyan", "Mark King", "Nick Hexum")
    assert question_kind(question) == "choice"
    assert span(question, *passages, titles=titles) == gold


def test_the_compared_names_leave_the_words_that_introduce_them() -> None:
    question = "Between Iain Banks and Irwin Shaw, which writer has had a more diverse career?"
    assert question_kind(question) == "choice"
    assert compared_names(question) == ("Iain Banks", "Irwin Shaw")
    answer = span(
        question,
        "Iain Banks was a Scottish writer.",
        "Irwin Shaw was an American playwright, screenwriter, novelist and short-story author with a diverse career.",
        titles=("Iain Banks", "Irwin Shaw"),
    )
    assert answer == "Irwin Shaw"


def test_a_fragment_is_completed_from_the_sentence_it_starts() -> None:
    question = "Henri Verneuil: He was nominated for Oscar and Palme d' Or awards, and won Locarno"
    answer = span(
        question,
        "Henri Verneuil was a French-Armenian playwright and filmmaker.",
        "He was nominated for Oscar and Palme d' Or awards, and won Locarno International Film Festival awards.",
    )
    assert question_kind(question) == "fragment"
    assert answer == "International Film Festival awards."
    # A wh-word inside a statement does not make it a question.
    statement = "Johann Christoph Bach: Johann Christoph was heavily in debt when"
    assert question_kind(statement) == "fragment"
    assert span(statement, "Johann Christoph was heavily in debt when he died at Eisenach.") == "he died at Eisenach."
    assert question_kind("Who directed the film that was shot in or around Leland in 1986") == "person"


# --------------------------------------------------------------------------------------------
# Never empty, and every graph's answer step uses it


@pytest.mark.parametrize(
    "question",
    [
        "What is the capital of Atlantis?",
        "In what year did it happen?",
        "How many moons are there?",
        "Are Foo and Bar both lakes?",
        "Which came first, Foo or Bar?",
        "tell me about it",
        "?",
    ],
)
def test_an_answer_is_never_empty_when_sentences_were_read(question: str) -> None:
    read = sentences("it rained all day.", "nothing else happened here.")
    found = answer_span(question, read)
    assert found is not None and found.text.strip() and found.chunk_id in {"0", "1"}
    answer = extractive_answer(None, question, [("7", "it rained all day. nothing else happened here.")])
    assert answer.startswith("Answer: ") and answer != "Answer:  [7]" and answer.endswith("[7]")
    assert answer_span(question, []) is None
    assert extractive_answer(None, question, []) == NOT_FOUND


PASSAGES = [
    Passage("4", "Grace Krilanovich", "Grace Krilanovich (born October 5, 1979) is an American author.", 1.0),
    Passage("9", "Two Dollar Radio", "Two Dollar Radio is a publishing house based in Columbus, Ohio.", 0.9),
]


def test_every_graphs_answer_step_answers_with_the_span() -> None:
    """naive_rag, corag and srag answer through their offline models' ``answer`` / ``answer_from_facts``,
    the agent through the policy's own answer without tools: all give the span and its chunk."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    question = "The publisher of Grace Krilanovich's novel is based where?"
    backbone = OfflineSrag(OfflinePolicy())
    assert backbone.answer(question, PASSAGES).invoke().text == "Answer: Columbus, Ohio [9]"
    assert backbone.answer_from_facts(question, "facts", PASSAGES).invoke().text == "Answer: Columbus, Ohio [9]"
    call = {"name": "chunk_read", "args": {"chunk_ids": ["4", "9"]}, "id": "offline-read1-1", "type": "tool_call"}
    read = "\n".join(f"[chunk {p.chunk_id}] {p.title}\n{p.text}" for p in PASSAGES)
    messages = [
        HumanMessage(question),
        AIMessage("", tool_calls=[call]),
        ToolMessage(read, tool_call_id="offline-read1-1", name="chunk_read"),
    ]
    assert OfflinePolicy().invoke(messages).text == "Answer: Columbus, Ohio [9]"
    # The sentence answerer, kept selectable for the before/after benchmark, still answers as before
    # (with the demo's wrong sentence).
    before = OfflineSrag(OfflinePolicy(answer_style="sentence")).answer(question, PASSAGES).invoke().text
    assert before == f"Answer: {PASSAGES[0].text} [4]"
