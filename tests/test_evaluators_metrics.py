"""Evidence recall/precision, tokens, steps, usage and cost, answer similarity, ``default_evaluators``,
and one offline ``langsmith.evaluate`` run with every default evaluator on prediction dicts."""

from __future__ import annotations

import json
import math
import os
import re
import socket
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from arag_graph.core.errors import AragError, DatasetError
from arag_graph.evaluators import (
    answer_similarity,
    cost_usd,
    default_evaluators,
    evidence_precision_evaluator,
    evidence_recall_evaluator,
    evidence_scores,
    make_answer_similarity_evaluator,
    make_usage_evaluator,
    read_recall_evaluator,
    retrieved_tokens_evaluator,
    steps_evaluator,
    usage_from_messages,
)
from arag_graph.evaluators.retrieval import DEFAULT_PRICES, load_prices
from tests.scripted import ScriptedChatModel, calls, tool_call

# --- evidence ----------------------------------------------------------------------------------------


def test_evidence_agent_that_skims_widely_and_reads_narrowly() -> None:
    # Gold {1, 2}; snippets showed 1, 2, 7, 9; read in full 2 and 7.
    # recall over retrieved ∪ read = 2/2; read recall = |{2}| / 2; precision = |{2}| / |{2, 7}|.
    assert evidence_scores(["1", "2"], read_chunks=["2", "7"], retrieved_chunks=["1", "2", "7", "9"]) == {
        "evidence_recall": 1.0,
        "read_recall": 0.5,
        "evidence_precision": 0.5,
    }


def test_evidence_pipeline_top5() -> None:
    # Naive RAG: the top 5 are both retrieved and read; 2 of 3 gold among them.
    top5 = ["4", "8", "15", "16", "23"]
    scores = evidence_scores(["8", "23", "42"], read_chunks=top5, retrieved_chunks=top5)
    assert scores["evidence_recall"] == pytest.approx(2 / 3)
    assert scores["read_recall"] == pytest.approx(2 / 3)
    assert scores["evidence_precision"] == pytest.approx(2 / 5)


def test_evidence_nothing_read_and_nothing_found() -> None:
    assert evidence_scores(["1", "2", "3"], read_chunks=[], retrieved_chunks=["3", "8"]) == {
        "evidence_recall": pytest.approx(1 / 3),
        "read_recall": 0.0,
        "evidence_precision": None,  # 0/0: nothing read, not "read the wrong things"
    }
    assert evidence_scores(["1"], read_chunks=["5"], retrieved_chunks=["5"]) == {
        "evidence_recall": 0.0,
        "read_recall": 0.0,
        "evidence_precision": 0.0,
    }


def test_evidence_ids_are_strings_and_distinct() -> None:
    # JSON may carry numeric ids; repeats (a chunk read twice) count once on every side.
    scores = evidence_scores(["12", "12", "40"], read_chunks=[12, 12], retrieved_chunks=[12, "12"])
    assert scores == {"evidence_recall": 0.5, "read_recall": 0.5, "evidence_precision": 1.0}


def test_evidence_without_gold_is_unavailable() -> None:
    assert evidence_scores([], ["1"], ["1"]) == {
        "evidence_recall": None,
        "read_recall": None,
        "evidence_precision": None,
    }
    result = evidence_recall_evaluator({"read_chunks": ["1"]}, {"answers": ["x"], "gold_chunk_ids": []})
    assert result["score"] is None
    assert "no gold supporting chunk ids" in result["comment"]
    assert evidence_precision_evaluator({"read_chunks": ["1"]}, {"answers": ["x"]})["score"] is None


def test_evidence_evaluators() -> None:
    outputs = {"read_chunks": ["2", "7"], "retrieved_chunks": ["1", "2", "7", "9"]}
    reference = {"answers": ["Paris"], "gold_chunk_ids": ["1", "2"]}
    assert evidence_recall_evaluator(outputs, reference) == {"key": "evidence_recall", "score": 1.0, "comment": None}
    assert read_recall_evaluator(outputs, reference) == {"key": "read_recall", "score": 0.5, "comment": None}
    assert evidence_precision_evaluator(outputs, reference)["score"] == 0.5
    nothing_read = evidence_precision_evaluator({"retrieved_chunks": ["1"]}, reference)
    assert nothing_read["score"] is None
    assert "read no chunk" in nothing_read["comment"]


# --- tokens and steps ------------------------------------------------------------------------------


def test_tokens_and_steps_report_the_prediction() -> None:
    outputs = {"retrieved_tokens": 2000, "steps": 6}
    assert retrieved_tokens_evaluator(outputs, {}) == {"key": "retrieved_tokens", "score": 2000, "comment": None}
    assert steps_evaluator(outputs, {}) == {"key": "steps", "score": 6, "comment": None}
    assert retrieved_tokens_evaluator({}, {})["score"] is None
    assert steps_evaluator({"steps": None})["score"] is None


# --- usage and cost ----------------------------------------------------------------------------------


def _ai(input_tokens: int, output_tokens: int, total: int | None = None) -> AIMessage:
    total = input_tokens + output_tokens if total is None else total
    usage = {"input_tokens": input_tokens, "output_tokens": output_tokens, "total_tokens": total}
    return AIMessage("x", usage_metadata=usage)  # type: ignore[arg-type]


def test_usage_from_messages_sums_ai_usage() -> None:
    messages = [
        HumanMessage("q"),
        _ai(10, 5, 15),
        ToolMessage("result", tool_call_id="1"),
        AIMessage("no usage here"),
        _ai(20, 7, 27),
        {"type": "ai", "usage_metadata": {"input_tokens": 3, "output_tokens": 1, "total_tokens": 4}},
    ]
    assert usage_from_messages(messages) == {"input_tokens": 33, "output_tokens": 13, "total_tokens": 46}


def test_usage_from_messages_none_when_not_reported() -> None:
    assert usage_from_messages([HumanMessage("q"), AIMessage("a")]) is None
    assert usage_from_messages([]) is None


def test_cost_from_the_price_table() -> None:
    # gpt-4o-mini: 1M input * $0.15 + 0.5M output * $0.60 = 0.15 + 0.30.
    assert cost_usd("gpt-4o-mini", {"input_tokens": 1_000_000, "output_tokens": 500_000}) == pytest.approx(0.45)
    # gpt-4o: (1000 * 2.50 + 1000 * 10.00) / 1M = 0.0125.
    assert cost_usd("openai:gpt-4o", {"input_tokens": 1000, "output_tokens": 1000}) == pytest.approx(0.0125)
    # A dated snapshot is priced like its base model; a longer name is not priced like its prefix.
    assert cost_usd("gpt-4o-mini-2024-07-18", {"input_tokens": 1_000_000, "output_tokens": 0}) == pytest.approx(0.15)
    assert cost_usd("gpt-5-mini", {"input_tokens": 0, "output_tokens": 1_000_000}) == pytest.approx(2.0)
    assert cost_usd("gpt-5", {"input_tokens": 1_000_000, "output_tokens": 0}) == pytest.approx(1.25)
    assert cost_usd("gpt-4.1-mini", {"input_tokens": 1_000_000, "output_tokens": 1_000_000}) == pytest.approx(2.0)
    assert cost_usd("gpt-5-nano", {"input_tokens": 1000, "output_tokens": 1000}) is None
    assert set(DEFAULT_PRICES) == {"gpt-4o-mini", "gpt-4o", "gpt-5-mini", "gpt-5", "gpt-4.1-mini"}


def test_cost_unknown_model_or_usage_is_none() -> None:
    assert cost_usd("offline", {"input_tokens": 10, "output_tokens": 10}) is None
    assert cost_usd("gpt-4o-mini", None) is None
    assert cost_usd(None, {"input_tokens": 10, "output_tokens": 10}) is None


def test_prices_override_from_mapping_and_json_file(tmp_path: Path) -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert cost_usd("qwen2.5-7b", usage, prices={"qwen2.5-7b": [0, 0]}) == 0.0
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o-mini": [1.0, 2.0], "my-model": [0.5, 0.5]}), encoding="utf-8")
    assert cost_usd("gpt-4o-mini", usage, prices=path) == pytest.approx(3.0)
    assert cost_usd("my-model", usage, prices=str(path)) == pytest.approx(1.0)
    assert cost_usd("gpt-4o", usage, prices=path) == pytest.approx(12.5)  # defaults stay


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", r"cannot read the price file"),
        ('["gpt-4o", 1, 2]', r"prices must be an object"),
        ('{"gpt-4o": [1]}', r"price of 'gpt-4o' must be \[input_per_million, output_per_million\]"),
        ('{"gpt-4o": [1, -2]}', r"two non-negative numbers"),
    ],
)
def test_bad_price_file_is_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "prices.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(AragError, match=message) as info:
        load_prices(path)
    assert "\n" not in str(info.value)
    with pytest.raises(AragError, match="no such price file"):
        load_prices(tmp_path / "missing.json")


def test_usage_evaluator() -> None:
    evaluator = make_usage_evaluator("gpt-4o-mini")
    result = evaluator({"usage": {"input_tokens": 2_000_000, "output_tokens": 1_000_000}}, {})
    scores = {item["key"]: item["score"] for item in result["results"]}
    assert scores == {"input_tokens": 2_000_000, "output_tokens": 1_000_000, "cost_usd": pytest.approx(0.9)}
    # Usage summed from messages when no "usage"; model taken from the outputs when not given.
    result = make_usage_evaluator()({"messages": [_ai(1000, 0)], "model": "gpt-4o"}, {})
    scores = {item["key"]: item["score"] for item in result["results"]}
    assert scores == {"input_tokens": 1000, "output_tokens": 0, "cost_usd": pytest.approx(0.0025)}
    # No usage metadata (the offline policy): every usage key unavailable, not zero.
    result = make_usage_evaluator("offline")({"usage": None}, {})
    assert [(item["key"], item["score"]) for item in result["results"]] == [
        ("input_tokens", None),
        ("output_tokens", None),
        ("cost_usd", None),
    ]
    # Usage but no price: tokens are reported, cost is unavailable.
    result = make_usage_evaluator("llama3")({"usage": {"input_tokens": 5, "output_tokens": 6}}, {})
    assert {item["key"]: item["score"] for item in result["results"]}["cost_usd"] is None


# --- answer similarity --------------------------------------------------------------------------------


class BagOfWords(Embeddings):
    """Counts of a fixed vocabulary: cosines can be checked by hand. Records what it embeds."""

    vocabulary = ("paris", "france", "capital", "lyon", "city")

    def __init__(self) -> None:
        self.seen: list[str] = []

    def _vector(self, text: str) -> list[float]:
        self.seen.append(text)
        words = re.findall(r"\w+", text.lower())
        return [float(words.count(word)) for word in self.vocabulary]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def test_answer_similarity_hand_checked() -> None:
    embeddings = BagOfWords()
    # [1,1,0,0,0] . [1,0,0,0,0] / (sqrt 2 * 1)
    assert answer_similarity("Paris, France", ["Paris"], embeddings) == pytest.approx(1 / math.sqrt(2))
    # "the capital city" [0,0,1,0,1] vs "Paris" [1,0,...]: orthogonal
    assert answer_similarity("the capital city", ["Paris"], embeddings) == 0.0
    # best alias: "Paris France" equals the prediction's direction exactly
    assert answer_similarity("Paris France", ["Lyon", "Paris, France"], embeddings) == pytest.approx(1.0)
    # [2,1,0,0,0] vs [1,1,0,0,0]: 3 / (sqrt 5 * sqrt 2)
    assert answer_similarity("Paris Paris France", ["Paris France"], embeddings) == pytest.approx(3 / math.sqrt(10))


def test_answer_similarity_empty_and_zero_vectors() -> None:
    embeddings = BagOfWords()
    assert answer_similarity("", ["Paris"], embeddings) == 0.0
    assert answer_similarity("   ", ["Paris"], embeddings) == 0.0
    assert embeddings.seen == []  # an empty prediction is not embedded
    assert answer_similarity("Berlin", ["Paris"], embeddings) == 0.0  # zero vector: no division by zero
    assert answer_similarity("Paris", ["", "  "], embeddings) == 0.0


def test_answer_similarity_with_deterministic_fake_embeddings() -> None:
    embeddings = DeterministicFakeEmbedding(size=32)
    assert answer_similarity("Paris", ["Paris"], embeddings) == pytest.approx(1.0)
    assert -1.0 <= answer_similarity("Paris", ["Lyon"], embeddings) < 0.99


def test_answer_similarity_evaluator() -> None:
    evaluator = make_answer_similarity_evaluator(BagOfWords())
    result = evaluator({"answer": "Paris, France"}, {"answers": ["Paris"]})
    assert result["key"] == "answer_similarity"
    assert result["score"] == pytest.approx(1 / math.sqrt(2))
    missing = evaluator({"error": "boom"}, {"answers": ["Paris"]})
    assert missing["score"] == 0.0
    assert "no 'answer'" in missing["comment"]
    with pytest.raises(DatasetError):
        evaluator({"answer": "Paris"}, {"gold_chunk_ids": ["1"]})


# --- default_evaluators -------------------------------------------------------------------------------


BACK_QUESTIONS = ["What is the capital of France?", "Which city is the capital of France?", "What is Paris?"]
# BagOfWords cosines with "Capital of France?": 1, 2 / (sqrt 2 * sqrt 3) and 0.
ANSWER_RELEVANCE = (1 + 2 / math.sqrt(6) + 0) / 3


def _naive_judge() -> ScriptedChatModel:
    """Says correct when a gold answer occurs in the prediction block (see tests/test_judge.py).

    Asked for ARAGOG's structured replies (by the schema it is bound to), it writes
    :data:`BACK_QUESTIONS`, one claim per sentence of the answer, and finds a claim supported when
    its words all occur in the passages.
    """

    def reply(messages: Any, kwargs: dict[str, Any]) -> AIMessage:
        text = messages[-1].text
        schema = getattr((kwargs.get("tools") or [None])[0], "__name__", "JudgeVerdict")
        if schema == "GeneratedQuestions":
            return calls(tool_call(schema, questions=BACK_QUESTIONS))
        if schema == "Claims":
            answer = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL).group(1)
            return calls(tool_call(schema, claims=[c.strip() for c in answer.split(".") if c.strip()]))
        if schema == "ClaimVerdicts":
            passages = text.split("<claims>")[0].lower()
            claims = re.findall(r"<claim_(\d+)>\n(.*?)\n</claim_\1>", text, re.DOTALL)
            verdicts = [
                {
                    "claim": int(n),
                    "reason": "words found",
                    "supported": all(w in passages for w in re.findall(r"\w+", c.lower())),
                }
                for n, c in claims
            ]
            return calls(tool_call(schema, verdicts=verdicts))
        prediction = re.search(r"<prediction>(.*?)</prediction>", text, re.DOTALL).group(1).lower()
        golds = re.findall(r"<answer>(.*?)</answer>", text)
        correct = any(gold.lower() in prediction for gold in golds)
        return calls(tool_call("JudgeVerdict", reason="checked", correct=correct))

    return ScriptedChatModel(messages=iter([]), reply=reply)


def test_default_evaluators_sets() -> None:
    names = [evaluator.__name__ for evaluator in default_evaluators()]
    assert names == [
        "contain_acc",
        "exact_match",
        "f1",
        "evidence_recall",
        "read_recall",
        "evidence_precision",
        "context_precision",  # from gold chunk ids: needs no model
        "retrieved_tokens",
        "steps",
        "usage",
    ]
    full = [evaluator.__name__ for evaluator in default_evaluators(embeddings=BagOfWords(), judge=_naive_judge())]
    assert full == [*names, "answer_similarity", "llm_acc", "answer_relevance"]
    chunks = Chunks({"1": "Paris"})
    with_index = default_evaluators(embeddings=BagOfWords(), judge=_naive_judge(), chunks=chunks)
    assert [evaluator.__name__ for evaluator in with_index] == [*full, "faithfulness"]
    # Without a judge the index adds nothing: no metric is approximated without its model.
    assert [evaluator.__name__ for evaluator in default_evaluators(chunks=chunks)] == names


def test_each_evaluator_has_one_name_everywhere() -> None:
    """LangSmith named the library's evaluator runs ``contain_acc_evaluator`` (the function's name)
    and the CLI ``contain_acc``: now the run (``langsmith.evaluate``'s wrapper), the CLI's name and a
    one-key evaluator's feedback key are one word; the Python names keep working."""
    from langsmith.evaluation.evaluator import run_evaluator

    from arag_graph.evaluators import contain_acc_evaluator, make_context_precision_evaluator
    from arag_graph.evaluators.scoring import evaluator_name

    judge = _naive_judge()
    chunks = Chunks({"1": "Paris"})
    every = [*default_evaluators(embeddings=BagOfWords(), judge=judge, chunks=chunks)]
    every.append(make_context_precision_evaluator(judge, chunks))
    outputs = {"answer": "Paris", "read_chunks": ["1"], "retrieved_chunks": ["1"], "retrieved_tokens": 3, "steps": 1}
    reference = {"answers": ["Paris"], "gold_chunk_ids": ["1"]}
    for evaluator in every:
        name = evaluator.__name__
        assert name == evaluator_name(evaluator) and not name.endswith("_evaluator")
        assert repr(run_evaluator(evaluator)) == f"<DynamicRunEvaluator {name}>"
    for evaluator in every[:9]:  # the one-key evaluators that need no model
        assert evaluator(outputs, reference)["key"] == evaluator.__name__
    assert contain_acc_evaluator.__name__ == "contain_acc"


def _keys(result: dict[str, Any]) -> dict[str, Any]:
    return {item["key"]: item["score"] for item in result.get("results", [result])}


class Chunks:
    """A chunk source for the judged metrics (the index's ``get_chunk``)."""

    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = texts

    def get_chunk(self, chunk_id: str) -> Any:
        from arag_graph.core.documents import Chunk

        text = self.texts.get(chunk_id)
        return None if text is None else Chunk(id=chunk_id, text=text, title=None)


PREDICTION = {
    "answer": "It is Paris.",
    "citations": ["2"],
    "read_chunks": ["2", "7"],
    "retrieved_chunks": ["1", "2", "7", "9"],
    "retrieved_tokens": 2000,
    "steps": 6,
    "trajectory": [],
    "error": None,
    "usage": {"input_tokens": 1000, "output_tokens": 100, "total_tokens": 1100},
}
REFERENCE = {"answers": ["Paris", "Paris, France"], "gold_chunk_ids": ["1", "2"]}


def test_default_evaluators_called_like_the_runner() -> None:
    # The runner calls evaluator(outputs=..., reference_outputs=...) with keywords only.
    metrics: dict[str, Any] = {}
    for evaluator in default_evaluators(embeddings=BagOfWords(), judge=_naive_judge(), model="gpt-4o-mini"):
        metrics.update(_keys(evaluator(outputs=PREDICTION, reference_outputs=REFERENCE)))
    assert metrics == {
        "contain_acc": 1.0,
        "exact_match": 0.0,
        "f1": 0.5,
        "evidence_recall": 1.0,
        "read_recall": 0.5,
        "evidence_precision": 0.5,
        "retrieved_tokens": 2000,
        "steps": 6,
        "input_tokens": 1000,
        "output_tokens": 100,
        "cost_usd": pytest.approx((1000 * 0.15 + 100 * 0.60) / 1e6),
        "answer_similarity": pytest.approx(1.0),  # "it is paris" keeps only "paris" in the vocabulary
        "llm_acc": 1.0,
        "context_precision": 0.5,  # gold 1 and 2 are the first two of the ranked chunks 1, 2, 7, 9: 2/K
        "context_precision_ragas": 1.0,  # ... and every relevant chunk comes first
        "answer_relevance": None,  # without the question asked (inputs) there is nothing to compare
    }


# --- an offline langsmith.evaluate run ----------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError(f"network access blocked in tests: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return attempts


@pytest.mark.filterwarnings("ignore:'upload_results' parameter is in beta")
def test_langsmith_evaluate_with_all_default_evaluators(
    monkeypatch: pytest.MonkeyPatch, no_network: list[object]
) -> None:
    from langsmith import Client, evaluate
    from langsmith.schemas import Example

    for name in list(os.environ):
        if name.startswith(("LANGSMITH_", "LANGCHAIN_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    client = Client(api_key="test", api_url="http://127.0.0.1:9", auto_batch_tracing=False, info={})
    dataset_id = uuid.uuid4()
    empty = {**PREDICTION, "answer": "", "read_chunks": [], "retrieved_chunks": [], "usage": None, "error": "boom"}
    cases = {
        "Capital of France?": (REFERENCE, PREDICTION),
        "Capital of Italy?": ({"answers": ["Rome"], "gold_chunk_ids": []}, empty),
    }
    examples = [
        Example(id=uuid.uuid4(), dataset_id=dataset_id, inputs={"question": question}, outputs=reference)
        for question, (reference, _) in cases.items()
    ]
    judge = _naive_judge()

    def target(inputs: dict) -> dict:
        return cases[inputs["question"]][1]

    chunks = Chunks({"1": "Lyon is a city.", "2": "It is Paris, the capital.", "7": "Rome", "9": "Milan"})
    results = evaluate(
        target,
        data=examples,
        evaluators=default_evaluators(embeddings=BagOfWords(), judge=judge, model="gpt-4o-mini", chunks=chunks),
        client=client,
        upload_results=False,
    )
    scores = {
        row["example"].inputs["question"]: {r.key: r.score for r in row["evaluation_results"]["results"]}
        for row in results
    }
    assert scores["Capital of France?"] == {
        "contain_acc": 1.0,
        "exact_match": 0.0,
        "f1": 0.5,
        "evidence_recall": 1.0,
        "read_recall": 0.5,
        "evidence_precision": 0.5,
        "retrieved_tokens": 2000,
        "steps": 6,
        "input_tokens": 1000,
        "output_tokens": 100,
        "cost_usd": pytest.approx(0.00021),
        "answer_similarity": pytest.approx(1.0),
        "llm_acc": 1.0,
        "context_precision": 0.5,
        "context_precision_ragas": 1.0,
        "answer_relevance": pytest.approx(ANSWER_RELEVANCE),
        "faithfulness": 1.0,  # the one claim "It is Paris" is in passage 2
    }
    assert scores["Capital of Italy?"] == {
        "contain_acc": 0.0,
        "exact_match": 0.0,
        "f1": 0.0,
        "evidence_recall": None,
        "read_recall": None,
        "evidence_precision": None,
        "retrieved_tokens": 2000,
        "steps": 6,
        "input_tokens": None,
        "output_tokens": None,
        "cost_usd": None,
        "answer_similarity": 0.0,
        "llm_acc": 0.0,
        "context_precision": None,  # the failed run retrieved nothing: no context to rank
        "context_precision_ragas": None,
        "answer_relevance": 0.0,  # an empty answer addresses nothing, decided without a call
        "faithfulness": None,  # an empty answer makes no claim to check
    }
    # LangSmith passed the example's inputs to the judge: the question is in its prompt.
    verdicts = [entry for entry in judge.log if "<prediction>" in entry["messages"][-1].text]
    assert len(verdicts) == 1  # the empty prediction was decided without a call
    assert "Capital of France?" in verdicts[0]["messages"][-1].text
    assert len(judge.log) == 4  # LLM-Acc, the back-questions, the claims and their verdicts: all for France
    assert no_network == []
