"""The ``arag`` command line: index, search and read, and one clean error line for every mistake.

Commands run in-process through :func:`arag_graph.cli.main` (the index and encoder are loaded once);
a few run as real subprocesses to prove the exit status and that no traceback reaches the terminal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.load import load_index
from tests.cli_run import assert_one_error_line
from tests.cli_run import run_cli as run
from tests.fakes import sentinel_key

REPO = Path(__file__).resolve().parents[1]

PASSAGES = [
    {
        "id": "curie",
        "title": "Marie Curie",
        "text": "Marie Curie was a physicist. She won the Nobel Prize in 1903.",
    },
    {
        "id": "eiffel",
        "title": "Eiffel Tower",
        "text": "The Eiffel Tower is in Paris. It was completed in 1889.",
    },
    {
        "id": "nile",
        "title": "Nile",
        "text": "The Nile is a river in Africa. It flows into the Mediterranean Sea.",
    },
]


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in PASSAGES) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def sample_path(sample_index: HierarchicalIndex) -> str:
    assert sample_index.path is not None
    return str(sample_index.path)


# --------------------------------------------------------------------------------------------
# arag index


def test_index_prints_a_one_line_summary(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "index"
    code, out, _ = run(["index", str(corpus), "--out", str(out_dir)], capsys)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 1, out
    match = re.fullmatch(r"indexed 3 chunks, (\d+) sentences in ([\d.]+) s -> (.+)", lines[0])
    assert match, lines[0]
    index = load_index(out_dir)
    assert int(match.group(1)) == index.manifest.sentences == 6
    assert match.group(3) == str(out_dir)


def test_index_json_is_one_object(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "index"
    code, out, err = run(["index", str(corpus), "--out", str(out_dir), "--json", "--contextual-headers"], capsys)
    assert code == 0
    assert out.count("\n") == 1 and out.endswith("\n")
    summary = json.loads(out)
    assert summary["chunks"] == 3 and summary["sentences"] == 6 and summary["documents"] == 3
    assert isinstance(summary["seconds"], (int, float)) and summary["seconds"] >= 0
    assert summary["contextual_headers"] is True and summary["index"] == str(out_dir)
    assert err == ""  # no progress bars with --json
    assert load_index(out_dir).manifest.contextual_headers is True


def test_index_with_an_explicit_format_and_substring_matching(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "index"
    argv = ["index", str(corpus), "--out", str(out_dir), "--format", "jsonl", "--keyword-match", "substring"]
    code, _, _ = run([*argv, "--quiet"], capsys)
    assert code == 0
    assert load_index(out_dir).manifest.keyword_match == "substring"


# --------------------------------------------------------------------------------------------
# arag search / arag read


def ranked_ids(out: str) -> list[str]:
    return re.findall(r"^\s*\d+\. \[([^\]]+)\] score=", out, flags=re.MULTILINE)


def test_search_keywords(sample_index: HierarchicalIndex, sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["search", "--index", sample_path, "--keywords", "Leland, North Carolina", "--top-k", "3"], capsys
    )
    assert code == 0
    hits = sample_index.keyword_search(["Leland", "North Carolina"], 3)
    assert ranked_ids(out) == [h.chunk_id for h in hits]
    assert all(s in out for h in hits for s in h.snippets)


def test_search_keywords_json(
    sample_index: HierarchicalIndex, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["search", "--index", sample_path, "--keywords", "Leland", "--json"], capsys)
    assert code == 0 and out.count("\n") == 1
    assert json.loads(out) == {"hits": [h.to_dict() for h in sample_index.keyword_search(["Leland"], 5)]}


def test_search_query(sample_index: HierarchicalIndex, sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    query = "Who directed Maximum Overdrive?"
    code, out, _ = run(["search", "--index", sample_path, "--query", query, "--top-k", "2"], capsys)
    assert code == 0
    assert ranked_ids(out) == [h.chunk_id for h in sample_index.semantic_search(query, 2)]
    code, out, _ = run(["search", "--index", sample_path, "--query", query, "--json"], capsys)
    hits = json.loads(out)["hits"]
    assert [h["chunk_id"] for h in hits] == [h.chunk_id for h in sample_index.semantic_search(query, 5)]
    assert all({"chunk_id", "score", "snippets", "title"} <= set(h) for h in hits)


def test_search_without_matches(sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["search", "--index", sample_path, "--keywords", "Zxqvbnmw"], capsys)
    assert code == 0 and out == "no matches\n"


def test_read(sample_index: HierarchicalIndex, sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["read", "--index", sample_path, "5", "6"], capsys)
    assert code == 0
    for cid in ("5", "6"):
        chunk = sample_index.get_chunk(cid)
        assert chunk is not None and chunk.text in out
    assert "[5]  Leland, North Carolina  (previous: 4, next: 6)" in out
    code, out, _ = run(["read", "--index", sample_path, "5", "--json"], capsys)
    chunk = sample_index.get_chunk("5")
    assert chunk is not None
    assert json.loads(out) == {
        "chunks": [{"id": "5", "title": chunk.title, "text": chunk.text, "prev": "4", "next": "6"}]
    }


# --------------------------------------------------------------------------------------------
# Mistakes: one line on stderr, non-zero exit, nothing on stdout


def test_missing_corpus_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.json"
    line = assert_one_error_line(*run(["index", str(missing), "--out", str(tmp_path / "index")], capsys))
    assert str(missing) in line and "no such file" in line
    assert not (tmp_path / "index").exists()


def test_unknown_format(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(
        *run(["index", str(corpus), "--out", str(tmp_path / "index"), "--format", "xml"], capsys)
    )
    assert "'xml'" in line and "jsonl" in line
    assert not (tmp_path / "index").exists()


def test_bad_corpus_content(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": \n', encoding="utf-8")
    line = assert_one_error_line(*run(["index", str(bad), "--out", str(tmp_path / "index")], capsys))
    assert "line 2" in line


def test_chunk_size_too_small(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(
        *run(["index", str(corpus), "--out", str(tmp_path / "index"), "--chunk-size", "3"], capsys)
    )
    assert "chunk size 3" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--keywords", "Leland"],
        ["search", "--query", "who"],
        ["read", "5"],
    ],
    ids=["keywords", "query", "read"],
)
def test_missing_index_dir(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-index"
    line = assert_one_error_line(*run([argv[0], "--index", str(missing), *argv[1:]], capsys))
    assert str(missing) in line and "arag index" in line


def test_unknown_chunk_id(sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(*run(["read", "--index", sample_path, "5", "zz", "y9"], capsys))
    assert "zz, y9" in line and "arag search" in line


@pytest.mark.parametrize("keywords", ["", " , ", ",,"])
def test_empty_keywords(sample_path: str, keywords: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(*run(["search", "--index", sample_path, "--keywords", keywords], capsys))
    assert "--keywords is empty" in line


def test_empty_query(sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    line = assert_one_error_line(*run(["search", "--index", sample_path, "--query", "   "], capsys))
    assert "--query is empty" in line


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "--index", "x"],
        ["search", "--index", "x", "--keywords", "a", "--query", "b"],
        ["search", "--index", "x", "--keywords", "a", "--top-k", "many"],
        ["read", "--index", "x"],
        ["index", "corpus.json"],
        ["frobnicate"],
    ],
    ids=["no-mode", "both-modes", "bad-top-k", "no-ids", "no-out", "unknown-command"],
)
def test_usage_errors_are_one_line_too(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    # argparse names the subcommand ("arag search: error: ..."), which points at the right --help.
    assert re.fullmatch(r"arag( [a-z]+)?: error: [^\n]+; see `arag( [a-z]+)? --help`\n", err), err


# --------------------------------------------------------------------------------------------
# The real process


def _arag(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "arag_graph.cli.main", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )


def test_process_exit_status_and_single_error_line(tmp_path: Path) -> None:
    done = _arag("read", "--index", str(tmp_path / "missing"), "5")
    assert done.returncode == 2
    assert_one_error_line(done.returncode, done.stdout, done.stderr)


def test_process_search_json(sample_index: HierarchicalIndex, sample_path: str) -> None:
    query = "Who directed Maximum Overdrive?"
    done = _arag("search", "--index", sample_path, "--query", query, "--top-k", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no model-loading progress bar either
    hits = json.loads(done.stdout)["hits"]
    assert [h["chunk_id"] for h in hits] == [h.chunk_id for h in sample_index.semantic_search(query, 2)]


# --------------------------------------------------------------------------------------------
# arag sample-chains (CoRAG rejection sampling)

OFFLINE_TWO_STEPS = ["--model", "offline", "--max-steps", "2", "--json"]


def test_sample_chains_keeps_matching_chains_and_resumes(
    sample_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample = json.loads((REPO / "arag_graph" / "data" / "sample" / "questions.json").read_text(encoding="utf-8"))
    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps(sample[:2]), encoding="utf-8")
    out = tmp_path / "chains.jsonl"
    argv = ["sample-chains", "--dataset", str(questions), "--index", sample_path, "--out", str(out)]
    argv += ["--model", "offline", "--n", "2", "--max-steps", "2", "--json"]

    code, stdout, _ = run(argv, capsys)
    first = json.loads(stdout)
    assert code == 0 and (first["questions"], first["chains"], first["skipped"]) == (2, 4, 0)
    assert first["temperature_applied"] is False  # the offline policy is deterministic, and says so

    # The same run again skips both questions; nothing is sampled or written twice.
    code, stdout, _ = run(argv, capsys)
    again = json.loads(stdout)
    assert code == 0 and (again["skipped"], again["chains"]) == (2, 0)
    progress = [json.loads(line) for line in (tmp_path / "chains.progress.jsonl").read_text().splitlines()]
    assert [p["id"] for p in progress] == [q["_id"] for q in sample[:2]]

    # A gold answer the policy's chain does reach is kept: take the answer it gave as the gold.
    code, stdout, _ = run(
        ["ask", sample[0]["question"], "--index", sample_path, "--graph", "corag", *OFFLINE_TWO_STEPS],
        capsys,
    )
    answer = json.loads(stdout)["answer"]
    assert code == 0 and answer
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps([{**sample[0], "answer": answer}]), encoding="utf-8")
    kept_out = tmp_path / "kept.jsonl"
    code, stdout, _ = run(
        [*argv[:2], str(gold), *argv[3:6], str(kept_out), *argv[7:]],
        capsys,
    )
    assert code == 0 and json.loads(stdout)["kept"] == 2
    records = [json.loads(line) for line in kept_out.read_text(encoding="utf-8").splitlines()]
    assert [r["final_answer"] for r in records] == [answer, answer]
    assert all(r["queries"] and r["chain"][0]["chunk_ids"] for r in records)


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--temperature", "0"], "temperature above zero"), (["--n", "0"], "n >= 1"), (["--limit", "0"], "--limit")],
)
def test_sample_chains_bad_settings_are_one_line(
    extra: list[str], message: str, sample_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = str(REPO / "arag_graph" / "data" / "sample" / "questions.json")
    argv = ["sample-chains", "--dataset", dataset, "--index", sample_path, "--out", str(tmp_path / "o.jsonl")]
    line = assert_one_error_line(*run([*argv, "--model", "offline", *extra], capsys))
    assert message in line and not (tmp_path / "o.jsonl").exists()


# --------------------------------------------------------------------------------------------
# arag demo and arag ask: the offline policy without a key, tool calls as they happen, and bad input
# that is checked before anything is printed (one error line, no notice, no header)

QUESTION = "Who directed the film that was shot in or around Leland, North Carolina in 1986?"
NO_KEY_NOTICE = "arag: no API key set (OPENAI_API_KEY): using the offline no-LLM policy"
CALL = re.compile(r"  -> (\w+)\((.*)\)")
RESULT = re.compile(r"  <- (\w+): (\d+) tokens, chunks (.+?)( \(error\))?")


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """No API key, no server and no default model in the environment: the CLI falls back to offline."""
    for name in ("OPENAI_API_KEY", "ARAG_API_KEY", "OPENAI_BASE_URL", "ARAG_BASE_URL", "ARAG_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=["no-key", "key"])
def key_or_not(request: pytest.FixtureRequest, no_key: None, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways the default model is chosen: offline (with its notice) or gpt-4o-mini (never reached)."""
    if request.param == "key":
        monkeypatch.setenv("OPENAI_API_KEY", sentinel_key("not-a-real-key"))
    return str(request.param)


def tool_lines(out: str) -> list[tuple[str, str, str]]:
    """The ``-> tool(args)`` and ``<- tool: N tokens, ...`` lines, in order, as (arrow, tool, detail)."""
    lines: list[tuple[str, str, str]] = []
    for line in out.splitlines():
        if call := CALL.fullmatch(line):
            lines.append(("->", call.group(1), call.group(2)))
        elif result := RESULT.fullmatch(line):
            lines.append(("<-", result.group(1), result.group(2)))
    return lines


def test_demo_builds_the_sample_index_and_answers_with_citations(
    no_key: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "sample"
    code, out, _ = run(["demo", "--index", str(target), "--questions", "1"], capsys)
    assert code == 0, out
    index = load_index(target)  # built by the demo
    assert index.manifest.chunks == 100
    first = json.loads((REPO / "arag_graph" / "data" / "sample" / "questions.json").read_text(encoding="utf-8"))[0]
    assert f"[1/1] {first['question']}" in out and "[2/" not in out
    assert "offline, a deterministic no-LLM policy" in out
    steps = tool_lines(out)
    assert steps and [arrow for arrow, _, _ in steps] == ["->", "<-"] * (len(steps) // 2)
    assert all(steps[i][1] == steps[i + 1][1] for i in range(0, len(steps), 2))  # each result follows its call
    assert "chunk_read" in {tool for _, tool, _ in steps}
    answer = re.search(r"^  answer: (.+)   \(gold answer: (.+)\)$", out, flags=re.MULTILINE)
    cited = re.search(r"^  citations: (.+)$", out, flags=re.MULTILINE)
    assert answer and cited, out
    assert answer.group(2) == first["answer"]
    ids = cited.group(1).split(", ")
    assert ids and all(index.get_chunk(i) is not None for i in ids)
    shown = {c for line in out.splitlines() if (m := RESULT.fullmatch(line)) for c in m.group(3).split(", ")}
    assert set(ids) <= shown  # the answer cites chunks the trajectory retrieved
    # Each gold passage: found when a search (or a read) returned it, read when chunk_read did.
    read = {c for line in out.splitlines() if (m := RESULT.fullmatch(line)) and m.group(1) == "chunk_read"
            for c in m.group(3).split(", ")}  # fmt: skip
    titles = list(dict.fromkeys(title for title, _ in first["supporting_facts"]))
    for title in titles:
        gold = index.ids_for_title(title)
        state = ("found" if set(gold) & shown else "never found") + (", read" if set(gold) & read else ", not read")
        assert f'  gold passage "{title}" (chunk {", ".join(gold)}): {state}' in out.splitlines(), out
    assert out.count("  gold passage ") == len(titles)
    assert out.index("  answer: ") > out.rindex("  <- ")
    assert re.search(rf"^  steps: {len(steps) // 2}, retrieved tokens: \d+$", out, flags=re.MULTILINE), out


def test_ask_without_a_key_uses_the_offline_policy_and_says_so_once(
    no_key: None, sample_index: HierarchicalIndex, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["ask", QUESTION, "--index", sample_path, "--json"], capsys)
    assert code == 0, err
    assert err.splitlines() == [NO_KEY_NOTICE]
    assert out.count("\n") == 1
    record = json.loads(out)
    assert record["model"] == "offline" and record["graph"] == "arag" and record["error"] is None
    assert {"answer", "citations", "steps", "retrieved_tokens", "read_chunks", "trajectory"} <= set(record)
    assert record["answer"] and record["citations"]
    assert record["steps"] == len(record["trajectory"]) > 0
    assert record["retrieved_tokens"] == sum(s["tokens"] for s in record["trajectory"]) > 0
    assert all({"tool", "args", "tokens", "chunk_ids", "error"} <= set(s) for s in record["trajectory"])
    assert not any(s["error"] for s in record["trajectory"])  # the offline policy makes valid calls
    assert set(record["citations"]) <= set(record["read_chunks"]) | set(record["retrieved_chunks"])
    assert all(sample_index.get_chunk(c) is not None for c in record["citations"])


def test_ask_text_shows_each_tool_call_then_its_result_before_the_answer(
    no_key: None, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["ask", QUESTION, "--index", sample_path, "--json"], capsys)
    assert code == 0
    trajectory = json.loads(out)["trajectory"]

    code, out, err = run(["ask", QUESTION, "--index", sample_path], capsys)
    assert code == 0, err
    assert err.splitlines() == [NO_KEY_NOTICE]
    lines = out.splitlines()
    assert lines[0] == f"graph arag, model offline, index {sample_path}"
    expected: list[tuple[str, str, str]] = []
    for step in trajectory:  # the same deterministic run: call, then its result, step by step
        # "->" shows the call as the model made it; the offline policy leaves top_k to the graph's
        # configuration, which the trajectory records as the search that ran.
        asked = {k: v for k, v in step["args"].items() if k != "top_k"}
        expected.append(("->", step["tool"], json.dumps(asked, ensure_ascii=False)))
        expected.append(("<-", step["tool"], str(step["tokens"])))
    assert tool_lines(out) == expected
    assert len(expected) >= 4  # more than one step, so the order is tested
    answer_at = lines.index(next(line for line in lines if line.startswith("answer: ")))
    assert all(line.startswith(("  -> ", "  <- ")) for line in lines[1 : answer_at - 1]), out
    assert lines[answer_at - 1] == ""
    assert re.fullmatch(r"citations: \S.*", lines[answer_at + 1])


@pytest.mark.parametrize("graph", ["arag", "corag"])
def test_ask_validates_the_run_context_once(
    graph: str, no_key: None, sample_path: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--max-steps`` goes from the flag into one checked context, which is the one the graph runs
    with: the CLI used to check the context (``config_for``) and then build and check it again."""
    from arag_graph.registry import get_graph_spec

    schema = get_graph_spec(graph).config
    built: list[dict[str, object]] = []
    checked = schema.__init__

    def counting(self: object, **data: object) -> None:
        built.append(data)
        checked(self, **data)

    monkeypatch.setattr(schema, "__init__", counting)
    argv = ["ask", QUESTION, "--index", sample_path, "--graph", graph, "--max-steps", "2", "--json"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert len(built) == 1, built
    assert built[0]["max_steps"] == 2
    assert json.loads(out)["steps"] <= 2


@pytest.mark.parametrize("question", ["", "   ", "\t\n"], ids=["empty", "spaces", "whitespace"])
def test_ask_empty_question(
    question: str, key_or_not: str, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = assert_one_error_line(*run(["ask", question, "--index", sample_path], capsys))
    assert "the question is empty" in line and "arag ask" in line


def test_ask_missing_index(key_or_not: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-index"
    line = assert_one_error_line(*run(["ask", QUESTION, "--index", str(missing)], capsys))
    assert str(missing) in line and "arag index" in line


@pytest.mark.parametrize("index", ["sample", "missing"])
def test_ask_malformed_model_spec(
    index: str, no_key: None, sample_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = sample_path if index == "sample" else str(tmp_path / "no-index")
    line = assert_one_error_line(*run(["ask", QUESTION, "--index", where, "--model", "bad spec!"], capsys))
    # The spec is checked before the index is opened: the cheap check names the first problem.
    assert "cannot read model spec 'bad spec!'" in line and "offline" in line


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-steps", "-3"], "--max-steps -3"),
        (["--max-steps", "-1", "--json"], "--max-steps -1"),
        (["--top-k", "0"], "--top-k 0"),
        (["--top-k", "-5", "--json"], "--top-k -5"),
    ],
    ids=["max-steps", "max-steps-json", "top-k-zero", "top-k-negative-json"],
)
def test_ask_bad_limits(
    extra: list[str], message: str, key_or_not: str, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = assert_one_error_line(*run(["ask", QUESTION, "--index", sample_path, *extra], capsys))
    assert message in line and "e.g." in line


@pytest.mark.parametrize("flag", ["--max-steps", "--top-k"])
def test_ask_non_numeric_limits_are_usage_errors(
    flag: str, no_key: None, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["ask", QUESTION, "--index", sample_path, flag, "many"], capsys)
    assert code == 2 and out == ""
    assert re.fullmatch(rf"arag ask: error: argument {flag}: invalid int value: 'many'; see `arag ask --help`\n", err)


def test_ask_unknown_graph(key_or_not: str, sample_path: str, capsys: pytest.CaptureFixture[str]) -> None:
    from arag_graph.registry import graph_names

    line = assert_one_error_line(*run(["ask", QUESTION, "--index", sample_path, "--graph", "nope"], capsys))
    assert "unknown graph 'nope'" in line
    assert all(name in line for name in graph_names())


SAMPLE_QUESTIONS = str(REPO / "arag_graph" / "data" / "sample" / "questions.json")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["demo", "--questions", "0"], "--questions 0"),
        (["demo", "--graph", "nope"], "unknown graph 'nope'"),
        (["sample-chains", "--dataset", SAMPLE_QUESTIONS, "--n", "0"], "n >= 1"),
        (["sample-chains", "--dataset", SAMPLE_QUESTIONS, "--max-steps", "-2"], "--max-steps -2"),
        (["sample-chains", "--dataset", SAMPLE_QUESTIONS, "--model", "bad spec!"], "cannot read model spec"),
        (["sample-chains", "--dataset", SAMPLE_QUESTIONS, "--model", "gpt-4o-mini"], "OPENAI_API_KEY"),
        (["eval", "--dataset", "no-such-questions.json", "--graphs", "arag"], "question file not found"),
        (["eval", "--dataset", SAMPLE_QUESTIONS, "--graphs", "arag,nope"], "unknown graph 'nope'"),
        (["eval", "--dataset", SAMPLE_QUESTIONS, "--graphs", "arag", "--corpus", "no-corpus.json"], "--corpus"),
    ],
    ids=[
        "demo-questions",
        "demo-graph",
        "chains-n",
        "chains-max-steps",
        "chains-bad-spec",
        "chains-no-key",
        "eval-dataset",
        "eval-graph",
        "eval-corpus",
    ],
)
def test_other_commands_check_input_before_the_no_key_notice(
    argv: list[str], message: str, no_key: None, sample_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] == "sample-chains":
        argv = [*argv, "--index", sample_path, "--out", str(tmp_path / "chains.jsonl")]
    elif argv[0] == "eval":
        argv = [*argv, "--out", str(tmp_path / "run"), "--no-upload", "--quiet"]
    else:
        argv = [*argv, "--index", str(tmp_path / "sample")]
    line = assert_one_error_line(*run(argv, capsys))
    assert message in line
    assert not any(tmp_path.iterdir())  # nothing built, sampled or written


# arag ask --set: the settings eval and served contexts have, for one run


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--graph", "naive_rag", "--set", "retriever=amr"], {"retriever": "amr", "merge_threshold": 0.5}),
        (["--graph", "naive_rag", "--set", "retriever=bm25", "--set", "top_k=3"], None),
        (["--graph", "corag", "--set", "decoding=best_of_n", "--set", "n=2"], {"chain": "2"}),
    ],
    ids=["amr", "reserved", "best-of-n"],
)
def test_ask_set_reaches_the_graph(
    argv: list[str],
    expected: dict[str, object] | None,
    no_key: None,
    sample_path: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(["ask", QUESTION, "--index", sample_path, *argv, "--json"], capsys)
    if expected is None:  # top_k has a flag of its own: one line saying so
        assert "--set top_k=...: use --top-k" in assert_one_error_line(code, out, err)
        return
    assert code == 0, err
    steps = json.loads(out)["trajectory"]
    assert any(expected.items() <= s["args"].items() for s in steps), steps


def test_ask_set_without_chunk_read_never_reads(
    no_key: None, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["ask", QUESTION, "--index", sample_path, "--set", "tools=no_chunk_read", "--json"], capsys)
    assert code == 0, err
    tools = {s["tool"] for s in json.loads(out)["trajectory"]}
    assert tools and "chunk_read" not in tools


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("bogus=1", "--set bogus: the graph arag has no such setting; choose from"),
        ("tools=nope", "tools='nope'"),
        ("reasoning_effort=low,high", "arag ask runs one setting; give one value, or sweep them with arag eval"),
        ("tools", "--set 'tools': give KEY=VALUE"),
    ],
    ids=["unknown", "bad-value", "sweep", "no-equals"],
)
def test_ask_bad_settings_are_one_line(
    setting: str, message: str, key_or_not: str, sample_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = assert_one_error_line(*run(["ask", QUESTION, "--index", sample_path, "--set", setting], capsys))
    assert message in line
