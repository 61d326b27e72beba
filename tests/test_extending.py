"""Extending the package, shown by doing it: add a graph, add a tool, add a metric (CONTRIBUTING.md).

Each test is the recipe CONTRIBUTING.md gives, carried out. ``test_add_a_graph`` writes a toy graph
family (``echo``: one retrieval, an answer from the best passage) into a temporary package, the way a
new folder of ``arag_graph`` looks: its context schema with its TypedDict, its prompt, its model calls
(the chat request and the offline rule side by side), its graph and its ``GRAPHS`` line. Registered,
it runs through ``arag ask``, ``arag eval``, Studio's schema and the golden-surface machinery, with
nothing else of the package edited.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool

from arag_graph.index.hierarchical import HierarchicalIndex
from tests.cli_run import run_cli
from tests.scripted import ScriptedChatModel, calls, tool_call

REPO = Path(__file__).resolve().parents[1]
SAMPLE_QUESTIONS = REPO / "arag_graph" / "data" / "sample" / "questions.json"

# ---------------------------------------------------------------------------------------------
# Add a graph: the toy family's folder

ECHO_FILES = {
    "__init__.py": '"""Echo: a toy graph family (one retrieval, an answer from the best passage)."""\n',
    "context.py": '''
        """Echo's context schema and its TypedDict."""

        from __future__ import annotations

        from pydantic import Field

        from arag_graph.run.configuration import RetrievalContext, RetrievalContextDict


        class EchoContext(RetrievalContext):
            """Echo: one retrieval, then an answer from the best passage alone."""

            name_title: bool = Field(default=True, description="Ask the model to name the passage's title.")


        class EchoContextDict(RetrievalContextDict, total=False):
            name_title: bool
        ''',
    "prompts.py": '''
        """Echo's prompt."""

        ECHO_PROMPT = """\\
        Answer the question from this passage alone.{title_note}

        {passage}

        Question: {question}

        End with a final line of the form
        Answer: <the shortest complete answer> [<chunk ID>]\\
        """
        ''',
    "model.py": '''
        """What Echo asks of its model: a chat request and the offline rule, side by side."""

        from __future__ import annotations

        from typing import Protocol

        from langchain_core.language_models import BaseChatModel
        from langchain_core.messages import AIMessage, HumanMessage

        from arag_graph.llm.steps import Step
        from arag_graph.offline.policy import OfflinePolicy
        from arag_graph.retrievers.passages import Passage
        from arag_graph.run.model import OfflineRetrievalModel
        from arag_graph.run.prompts import passages_text

        from .prompts import ECHO_PROMPT


        class EchoModel(Protocol):
            def echo(self, question: str, passage: Passage, name_title: bool) -> Step[AIMessage]: ...


        class ChatEcho:
            def __init__(self, model: BaseChatModel) -> None:
                self.model = model

            def echo(self, question: str, passage: Passage, name_title: bool) -> Step[AIMessage]:
                note = " Name the passage's title." if name_title else ""
                text = ECHO_PROMPT.format(title_note=note, passage=passages_text([passage]), question=question)
                return Step(self.model, [HumanMessage(text)])


        class OfflineEcho(OfflineRetrievalModel):
            def echo(self, question: str, passage: Passage, name_title: bool) -> Step[AIMessage]:
                return self.extractive(question, [passage])  # the offline policy's shared answer rule


        def echo_model(model: BaseChatModel) -> EchoModel:
            return OfflineEcho(model) if isinstance(model, OfflinePolicy) else ChatEcho(model)
        ''',
    "graph.py": '''
        """Echo's graph: START -> start -> retrieve -> answer -> finish -> END."""

        from __future__ import annotations

        import functools
        from typing import Any

        from langgraph.graph import END, START, StateGraph

        from arag_graph.retrievers.passages import Passage, retrieval_args, retrieve_passages
        from arag_graph.run.nodes import Call, model_node
        from arag_graph.run.pipeline import finish, retrieval_update, start_update
        from arag_graph.run.retrieval import as_dict
        from arag_graph.run.runtime import Bound, run_of, traced_graph
        from arag_graph.run.spec import GraphSpec
        from arag_graph.run.state import InputState, OutputState, RunState, question_of

        from .context import EchoContext
        from .model import echo_model


        class EchoState(RunState, total=False):
            passages: list[dict[str, Any]]


        def retrieve(state: EchoState, runtime: Any, *, bound: Bound) -> dict[str, Any]:
            run = run_of(runtime, bound)
            question = question_of(state)
            found = retrieve_passages(run.index, question, run.ctx)
            args = {"query": question, **retrieval_args(run.index, run.ctx)}
            return {**retrieval_update(state, "retrieve", args, found), "passages": [as_dict(p) for p in found]}


        def answer(state: EchoState, runtime: Any, *, bound: Bound) -> Call:
            run = run_of(runtime, bound)
            best = Passage(**state["passages"][0])
            step = echo_model(run.model).echo(question_of(state), best, run.ctx.name_title)
            return Call(step, lambda reply: {"messages": [reply]}, name="answer_model")


        def build_echo_graph(index: Any = None, model: Any = None, *, checkpointer: Any = None) -> Any:
            bound = Bound("echo", EchoContext, index, model)
            builder = StateGraph(
                EchoState, context_schema=EchoContext, input_schema=InputState, output_schema=OutputState
            )
            builder.add_node("start", start_update)
            builder.add_node("retrieve", functools.partial(retrieve, bound=bound))
            builder.add_node("answer", model_node("answer", functools.partial(answer, bound=bound)))
            builder.add_node("finish", functools.partial(finish, bound=bound))
            builder.add_edge(START, "start")
            builder.add_conditional_edges("start", lambda s: END if s.get("error") else "retrieve", ["retrieve", END])
            builder.add_edge("retrieve", "answer")
            builder.add_edge("answer", "finish")
            builder.add_edge("finish", END)
            return traced_graph(builder.compile(checkpointer=checkpointer, name="echo"), bound)


        GRAPHS = (GraphSpec("echo", build_echo_graph, EchoContext, "Echo: an answer from the best passage"),)
        ''',
}


@pytest.fixture
def echo_family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The toy family written as a folder of a temporary package, imported, and registered (one line)."""
    from arag_graph import registry

    folder = tmp_path / "toy_families" / "echo"
    folder.mkdir(parents=True)
    (folder.parent / "__init__.py").write_text("", encoding="utf-8")
    for name, source in ECHO_FILES.items():
        (folder / name).write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    from toy_families.echo import graph as echo  # type: ignore[import-not-found]

    with registry.registered(echo):  # in the package: a line in registry.FAMILIES
        yield echo


def test_add_a_graph(
    echo_family: Any, sample_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from arag_graph.registry import build_graph, graph_names, served_graph

    assert "echo" in graph_names()
    question = json.loads(SAMPLE_QUESTIONS.read_text(encoding="utf-8"))[0]["question"]

    # arag ask: the registered graph is a --graph choice, its own setting a --set key.
    ask = ["ask", question, "--graph", "echo", "--index", str(sample_index.path), "--model", "offline", "--json"]
    code, out, err = run_cli([*ask, "--set", "name_title=false"], capsys)
    assert code == 0, err
    record = json.loads(out)
    assert record["graph"] == "echo" and record["answer"] and record["citations"] and record["steps"] == 1

    # arag eval: scored and reported beside any other graph.
    evaluation = tmp_path / "eval"
    argv = ["eval", "--dataset", str(SAMPLE_QUESTIONS), "--graphs", "echo", "--index", str(sample_index.path)]
    code, _, err = run_cli([*argv, "--model", "offline", "--limit", "1", "--out", str(evaluation), "--quiet"], capsys)
    assert code == 0, err
    assert "| echo |" in (evaluation / "summary.md").read_text(encoding="utf-8")

    # Studio: the context schema is the form, with the family's own field; a served run's unknown key is refused.
    schema = build_graph("echo", index=sample_index).get_context_jsonschema()
    assert schema["properties"]["name_title"]["description"] == "Ask the model to name the passage's title."
    assert {"top_k", "retriever", "model"} <= set(schema["properties"])
    from langgraph_sdk.runtime import _ExecutionRuntime

    from arag_graph.core.errors import ContextError

    run = _ExecutionRuntime(access_context="threads.create_run", user=None, store=None, context={"name_titel": 1})
    with pytest.raises(ContextError, match="EchoContext has no setting 'name_titel'"):
        served_graph("echo")(run)


def test_add_a_graph_golden_surface(echo_family: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the model sees of the new graph goes into a golden file like every other variant's
    (in the package: a line in tests/test_model_surface.py's VARIANTS and ARAG_UPDATE_GOLDEN=1)."""
    from arag_graph.index.build import build_index
    from arag_graph.llm.summarize import summary_writer
    from tests import test_model_surface as surface
    from tests.fakes import WordHashEmbeddings

    index = build_index(
        surface.DOCS,
        tmp_path / "index",
        embeddings=WordHashEmbeddings(),
        summaries=summary_writer("offline"),
        progress=False,
    )
    monkeypatch.setitem(surface.VARIANTS, "echo", ("echo", {}))
    from tests.stubs.openai_server import OpenAIStubServer

    surface.forget_pooled_openai_clients()
    with OpenAIStubServer(models=(surface.MODEL, surface.JUDGE)) as server:
        monkeypatch.setenv("ARAG_ALLOWED_BASE_URLS", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", surface.sentinel_key("surface"))
        server.script(surface.respond)

        def recorded() -> dict:
            return surface.record_variant("echo", index, server, "package")

        record = recorded()
        (prompt,) = [m["content"] for r in record["requests"] for m in r["messages"]]
        assert prompt.startswith("Answer the question from this passage alone. Name the passage's title.")
        assert surface.QUESTION in prompt and "{" not in prompt
        golden = tmp_path / "golden" / "echo.json"
        golden.parent.mkdir()
        golden.write_text(json.dumps(record, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        assert json.loads(golden.read_text(encoding="utf-8")) == recorded()
        # A prompt change is a diff of the golden file.
        monkeypatch.setitem(surface.VARIANTS, "echo", ("echo", {"name_title": False}))
        assert recorded() != record


# ---------------------------------------------------------------------------------------------
# Add a tool


@tool(response_format="content_and_artifact")
def word_count(chunk_id: str) -> tuple[str, dict[str, Any]]:
    """Count the words of a chunk, by its ID as search results show it."""
    text = _INDEX["index"].get_chunk(chunk_id).text
    return f"chunk {chunk_id} has {len(text.split())} words", {"tokens": 0, "chunk_ids": [chunk_id]}


_INDEX: dict[str, HierarchicalIndex] = {}


def test_add_a_tool(sample_index: HierarchicalIndex) -> None:
    """A tool of your own goes next to A-RAG's (``extra_tools``): the model is told of it, each call is a
    step under the step cap, and its artifact (``tokens``, ``chunk_ids``) takes part in the accounting."""
    from arag_graph.arag.graph import build_arag_graph

    _INDEX["index"] = sample_index

    def reply(messages: list[Any], kwargs: dict[str, Any]) -> AIMessage:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        if not done:
            return calls(tool_call("word_count", chunk_id="5"))
        return AIMessage(f"{done[-1].text}.\nAnswer: many [5]")

    model = ScriptedChatModel(messages=iter([]), reply=reply)
    graph = build_arag_graph(sample_index, model, extra_tools=[word_count])
    out = graph.invoke({"question": "How long is chunk 5?"})
    assert out["answer"] == "many" and out["steps"] == 1
    assert out["trajectory"][0]["tool"] == "word_count" and out["trajectory"][0]["chunk_ids"] == ["5"]
    assert model.log[0]["kwargs"]["tools"] == ["keyword_search", "semantic_search", "chunk_read", "word_count"]


# ---------------------------------------------------------------------------------------------
# Add a metric


def answer_words(outputs: dict[str, Any], reference_outputs: dict[str, Any]) -> dict[str, Any]:
    """A metric is a LangSmith evaluator: (outputs, reference_outputs) -> {"key", "score"}."""
    return {"key": "answer_words", "score": len(str(outputs.get("answer") or "").split())}


def test_add_a_metric(
    sample_index: HierarchicalIndex, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The evaluator joins ``default_evaluators`` and its column joins the report's ``_COLUMNS`` (in the
    package: evaluators/<metric>.py, a line in each); ``arag eval`` then scores and reports it."""
    import arag_graph.evaluators as evaluators
    from arag_graph.evaluators import report

    defaults = evaluators.default_evaluators
    monkeypatch.setattr(evaluators, "default_evaluators", lambda *a, **k: [*defaults(*a, **k), answer_words])
    monkeypatch.setattr(report, "_COLUMNS", (*report._COLUMNS, ("answer_words", "answer words", "steps")))
    out = tmp_path / "eval"
    argv = ["eval", "--dataset", str(SAMPLE_QUESTIONS), "--graphs", "naive_rag", "--index", str(sample_index.path)]
    code, _, err = run_cli([*argv, "--model", "offline", "--limit", "1", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "answer words" in summary
    (row,) = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert row["answer_words"] > 0


def test_every_registered_graph_is_served() -> None:
    """Step 4 of "Add a graph": each registered graph has its entry module and its langgraph.json line."""
    from arag_graph.registry import graph_names

    served = json.loads((REPO / "langgraph.json").read_text(encoding="utf-8"))["graphs"]
    assert sorted(served) == sorted(graph_names())
    for name, entry in served.items():
        path, attr = entry.split(":")
        source = (REPO / path).read_text(encoding="utf-8")
        assert attr == "graph" and f'served_graph("{name}")' in source, entry
