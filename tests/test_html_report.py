"""``report.html`` in a real browser: headless Chromium (Debian's package) driven by Playwright.

One offline ``arag eval`` on the bundled sample (A-RAG at step caps 1 and 4, so some runs reach
their cap, Naive RAG, CoRAG and SRAG) gives the page real prediction records; every check compares
what the browser shows with those records. Playwright launches the system Chromium
(``executable_path``); ``playwright install`` is never needed. Without a Chromium the browser tests
skip, saying so; ``scripts/setup`` installs one where it can (root with apt-get).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arag_graph.cli.main import main
from arag_graph.evaluators.failures import FAILURE_MODES, failure_mode
from arag_graph.evaluators.predictions import PREDICTIONS, load_records
from arag_graph.index.sample import sample_questions_path
from tests.browser import MISSING, find_chromium, launched_chromium
from tests.cli_run import assert_one_error_line, run_cli

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = find_chromium()
    if executable is None:
        pytest.skip(MISSING)
    try:
        import playwright  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install -e '.[dev]')")
    with launched_chromium(executable) as chromium:
        yield chromium


class Page:
    """A page of the report, with every console error and uncaught exception it produced."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.problems.append(str(e)))
        self.page.on("request", lambda r: None if r.url.startswith(("file:", "data:")) else self.problems.append(r.url))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']")

    def shown_questions(self) -> list[str]:
        return self.page.eval_on_selector_all(".question", "nodes => nodes.map(n => n.dataset.qid)")

    def count(self) -> int:
        return int(self.page.get_attribute("#count", "data-count") or -1)


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    pages: list[Page] = []

    def opener(path: Path) -> Page:
        pages.append(Page(browser, path))
        return pages[-1]

    yield opener
    for page in pages:
        page.page.close()


@pytest.fixture(scope="module")
def eval_run(sample_index: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An offline evaluation of 4 sample questions: 6 graph x setting columns, several failure modes."""
    out = tmp_path_factory.mktemp("html-report") / "run"
    argv = ["eval", "--dataset", str(sample_questions_path()), "--index", str(sample_index.path), "--out", str(out)]
    argv += ["--model", "offline", "--graphs", "arag,naive_rag,corag,srag", "--max-steps", "1,4", "--limit", "4"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert main([*argv, "--quiet", "--no-upload"]) == 0
    return out


def column_of(record: dict[str, Any]) -> tuple[str, str]:
    return record["graph"], record["setting_key"]


# --- what the page shows ----------------------------------------------------------------------------


def test_eval_writes_a_report_that_loads_without_errors_one_row_per_graph_and_setting(
    eval_run: Path, open_page: Any
) -> None:
    records = load_records(eval_run)
    columns = {column_of(r) for r in records}
    assert len(columns) == 6  # arag and corag at two caps, naive_rag, srag
    page = open_page(eval_run / "report.html")
    assert page.problems == []  # no console error, no exception, no request leaving the file
    rows = page.page.eval_on_selector_all(
        "#summary-table tr.summary-row", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    assert sorted((row[0], row[1]) for row in rows) == sorted(columns)
    header = page.page.eval_on_selector_all("#summary-table th", "ths => ths.map(t => t.textContent)")
    for row in rows:  # n and the failure-mode counts of each row are its records'
        mine = [r for r in records if column_of(r) == (row[0], row[1])]
        assert row[header.index("n")] == str(len(mine))
        for mode, label in FAILURE_MODES.items():
            if label in header:
                assert row[header.index(label)] == str(sum(failure_mode(r) == mode for r in mine)), (row[:2], mode)
    assert page.page.locator(".plots img").count() == len(list(eval_run.glob("accuracy_vs_*.png"))) == 2


def test_summary_table_sorts_by_a_clicked_column(eval_run: Path, open_page: Any) -> None:
    page = open_page(eval_run / "report.html")
    header = page.page.eval_on_selector_all("#summary-table th", "ths => ths.map(t => t.textContent)")
    steps = header.index("steps")
    page.page.locator("#summary-table th", has_text="steps").first.click()  # numbers sort descending first
    shown = page.page.eval_on_selector_all(
        "#summary-table tr.summary-row", f"rows => rows.map(r => parseFloat(r.cells[{steps}].textContent))"
    )
    assert shown == sorted(shown, reverse=True) and shown[0] > shown[-1]
    page.page.locator("#summary-table th", has_text="steps").first.click()
    again = page.page.eval_on_selector_all(
        "#summary-table tr.summary-row", f"rows => rows.map(r => parseFloat(r.cells[{steps}].textContent))"
    )
    assert again == sorted(shown)


def test_filtering_by_a_failure_mode_shows_exactly_those_questions(eval_run: Path, open_page: Any) -> None:
    records = load_records(eval_run)
    page = open_page(eval_run / "report.html")
    modes = page.page.eval_on_selector_all("#filter-mode option", "os => os.map(o => o.value).filter(Boolean)")
    assert {"correct", "cap_reached"} <= set(modes)  # the fixture has more than one mode to tell apart
    for mode in modes:
        page.page.select_option("#filter-mode", mode)
        expected = {r["question_id"] for r in records if failure_mode(r) == mode}
        assert set(page.shown_questions()) == expected and page.count() == len(expected), mode
    # With a graph chosen, the mode is that graph's.
    page.page.select_option("#filter-graph", "naive_rag")
    page.page.select_option("#filter-mode", "not_retrieved")
    expected = {r["question_id"] for r in records if r["graph"] == "naive_rag" and failure_mode(r) == "not_retrieved"}
    assert set(page.shown_questions()) == expected
    page.page.select_option("#filter-mode", "")
    page.page.select_option("#filter-graph", "")
    assert page.count() == len({r["question_id"] for r in records})


def test_search_box_finds_questions_by_their_text(eval_run: Path, open_page: Any) -> None:
    records = load_records(eval_run)
    target = records[0]
    words = target["question"].split()[1:4]
    page = open_page(eval_run / "report.html")
    page.page.fill("#search", " ".join(words).upper())
    expected = {r["question_id"] for r in records if " ".join(words).lower() in r["question"].lower()}
    assert target["question_id"] in expected and set(page.shown_questions()) == expected


def test_a_trajectory_expands_with_every_step_gold_chunks_and_corag_chain(eval_run: Path, open_page: Any) -> None:
    records = load_records(eval_run)
    page = open_page(eval_run / "report.html")
    qid = page.shown_questions()[0]
    mine = [r for r in records if r["question_id"] == qid]
    item = page.page.locator(f".question[data-qid='{qid}']")
    assert item.locator(".timeline").count() == 0  # details are rendered on expand only
    item.locator(".q-head").click()
    cards = item.locator(".run-card")
    cards.first.wait_for()  # a question's details are inflated when it is first expanded
    assert cards.count() == len(mine)
    steps = item.locator(".timeline li.step")
    assert steps.count() == sum(len(r["prediction"]["trajectory"]) for r in mine) > 0
    first_step = mine[0]["prediction"]["trajectory"][0]
    assert first_step["tool"] in item.locator(".tool").first.text_content()
    gold = set(mine[0]["gold_chunk_ids"])
    assert item.locator(".gold-box .snippet.gold").count() == len(gold) > 0  # their text, from report_chunks.json
    shown_gold = set(item.locator(".timeline .chip.gold").all_text_contents())
    retrieved_gold = {c for r in mine for s in r["prediction"]["trajectory"] for c in s["chunk_ids"] if c in gold}
    assert shown_gold == retrieved_gold
    # CoRAG's chain (sub-answers and penalties) and SRAG's fact table are in the records and on the page.
    corag = next(r for r in mine if r["graph"] == "corag")
    card = item.locator(f".run-card[data-column='{corag['graph']} ({corag['setting_key']})']")
    assert card.locator("text=CoRAG chain").count() == 1
    assert card.locator("table.mini tr").count() == 1 + len(corag["prediction"]["chain"])
    srag = next(r for r in mine if r["graph"] == "srag")
    if srag["prediction"].get("table"):
        assert item.locator(".run-card[data-column='srag']").locator("text=SRAG fact table").count() == 1
    item.locator(".q-head").click()
    assert item.locator(".timeline").count() == 0


def test_screenshot_of_an_expanded_question_is_not_blank(eval_run: Path, open_page: Any, tmp_path: Path) -> None:
    numpy = pytest.importorskip("numpy")
    image_module = pytest.importorskip("PIL.Image")
    page = open_page(eval_run / "report.html")
    page.page.locator(".q-head").first.click()
    page.page.locator(".run-card").first.wait_for()
    shot = tmp_path / "report.png"
    page.page.screenshot(path=str(shot), full_page=False)
    pixels = numpy.asarray(image_module.open(shot).convert("L"), dtype=float)
    assert pixels.std() > 20  # text, tables and plots, not one flat colour
    assert len(numpy.unique(pixels)) > 50


# --- untrusted text, two runs, one question ---------------------------------------------------------

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def copy_run(run: Path, dest: Path, change: Any) -> Path:
    """A second run directory: the records of ``run`` passed through ``change``."""
    (dest / PREDICTIONS).mkdir(parents=True)
    for path in (run / PREDICTIONS).glob("*.jsonl"):
        lines = [json.dumps(change(json.loads(line))) for line in path.read_text(encoding="utf-8").splitlines()]
        (dest / PREDICTIONS / path.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dest


def test_question_and_answer_text_is_shown_as_text_never_run(
    eval_run: Path, open_page: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def hostile(record: dict[str, Any]) -> dict[str, Any]:
        record["question"] = HOSTILE + " " + record["question"]
        record["prediction"]["answer"] = HOSTILE + "</script>"
        record["prediction"]["trajectory"][0]["args"] = {"query": HOSTILE}
        return record

    run = copy_run(eval_run, tmp_path / "hostile", hostile)
    code, out, err = run_cli(["report", str(run)], capsys)
    assert code == 0, err
    assert out.strip() == f"report: {run / 'report.html'}"
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "<script>window" not in html and "</script><img" not in html  # escaped inside the data blob
    page = open_page(run / "report.html")
    page.page.locator(".q-head").first.click()
    page.page.locator(".run-card").first.wait_for()
    assert page.page.evaluate("window.__pwned") is None
    assert page.page.locator(".q-question").first.text_content().startswith(HOSTILE)
    assert page.page.locator(".answer").first.text_content() == HOSTILE + "</script>"
    assert "<script>window.__pwned = 1</script>" in page.page.locator(".args").first.text_content()
    assert page.page.locator(".question img").count() == 0
    assert page.problems == []


def test_two_runs_compared_show_per_question_what_changed(
    eval_run: Path, open_page: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = load_records(eval_run)
    changed_qid = records[0]["question_id"]

    def answer_differently(record: dict[str, Any]) -> dict[str, Any]:
        if record["question_id"] == changed_qid and record["graph"] == "naive_rag":
            record["prediction"]["answer"] = "something else entirely"
        return record

    other = copy_run(eval_run, tmp_path / "other", answer_differently)
    out_file = tmp_path / "compare.html"
    code, _, err = run_cli(["report", str(eval_run), str(other), "--out", str(out_file)], capsys)
    assert code == 0, err
    page = open_page(out_file)
    assert page.problems == []
    assert page.page.locator("#summary-table tr.summary-row").count() == 12  # 6 columns in each run
    page.page.check("#filter-changed")
    assert page.shown_questions() == [changed_qid]
    item = page.page.locator(f".question[data-qid='{changed_qid}']")
    item.locator(".q-head").click()
    item.locator(".run-card").first.wait_for()
    assert "naive_rag" in item.locator("text=What changed").locator("..").text_content()
    assert item.locator(".run-card").count() == 12


def test_ask_html_writes_the_trajectory_view_of_one_question(
    sample_index: Any, open_page: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "ask.html"
    argv = ["ask", "Which city is Two Dollar Radio based in?", "--index", str(sample_index.path), "--model", "offline"]
    code, out, err = run_cli([*argv, "--json", "--html", str(out_file)], capsys)
    assert code == 0, err
    record = json.loads(out)
    page = open_page(out_file)
    assert page.problems == []
    assert page.page.locator(".timeline li.step").count() == len(record["trajectory"]) > 0
    assert page.page.locator(".answer").text_content() == record["answer"]
    assert page.page.locator(".snippet").count() > 0  # the chunks' text comes from the index


def test_ask_html_title_holds_a_hostile_question_as_text(
    sample_index: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``arag ask QUESTION --html`` puts the question in the page's ``<title>``: a question that closes
    the title and opens a script stays text there (no browser needed: the parser reads the head as one)."""
    from html.parser import HTMLParser

    class Head(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.titles: list[str] = []
            self._open = ""

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self._open = tag
            if tag == "title":
                self.titles.append("")

        def handle_data(self, data: str) -> None:
            if self._open == "title":
                self.titles[-1] += data

        def handle_endtag(self, tag: str) -> None:
            self._open = ""

    question = HOSTILE.replace("<script>", "</title><script>") + " Which city is Two Dollar Radio based in?"
    out_file = tmp_path / "ask.html"
    argv = ["ask", question, "--index", str(sample_index.path), "--model", "offline", "--html", str(out_file)]
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    html = out_file.read_text(encoding="utf-8")
    head = Head()
    head.feed(html.split("<style>", 1)[0])  # the page's head, up to its style sheet
    assert head.titles == [f"arag ask: {question}"], head.titles
    assert "</title><script>" not in html


# --- bad input -----------------------------------------------------------------------------------


def test_report_of_a_directory_without_an_evaluation_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    line = assert_one_error_line(*run_cli(["report", str(tmp_path)], capsys))
    assert str(tmp_path) in line and "arag eval" in line
    line = assert_one_error_line(*run_cli(["report", str(tmp_path), str(tmp_path), str(tmp_path)], capsys))
    assert "RUN_A [RUN_B]" in line


def test_html_file_in_a_missing_directory_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "ask.html"
    line = assert_one_error_line(*run_cli(["ask", "Who?", "--model", "offline", "--html", str(missing)], capsys))
    assert "--html" in line and "does not exist" in line
    line = assert_one_error_line(*run_cli(["report", str(tmp_path), "--out", str(tmp_path)], capsys))
    assert "is a directory" in line


def test_demo_ends_by_writing_a_scored_report_of_its_questions(
    sample_index: Any, open_page: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "demo.html"
    code, out, err = run_cli(
        ["demo", "--index", str(sample_index.path), "--questions", "2", "--html", str(out_file)], capsys
    )
    assert code == 0, err
    assert out.rstrip().splitlines()[-1] == f"report (open in a browser): {out_file}"  # the demo's last word
    page = open_page(out_file)
    assert page.problems == []
    assert page.count() == 2  # one entry per demo question, with filters: it is a report, not one trajectory
    golds = [json.loads(sample_questions_path().read_text(encoding="utf-8"))[i]["answer"] for i in range(2)]
    rows = page.page.locator("tr.summary-row")
    assert rows.count() == 1 and rows.first.locator("td").nth(2).text_content() == "2"  # arag, default, n=2
    first = page.page.locator(".question").first
    first.locator(".q-head").click()
    first.locator(".run-card").first.wait_for()
    assert golds[0] in first.locator(".gold-box").text_content()  # the gold answer beside the run's
    assert first.locator(".timeline li.step").count() > 0


def test_demo_html_in_a_missing_directory_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "demo.html"
    line = assert_one_error_line(*run_cli(["demo", "--index", str(tmp_path / "idx"), "--html", str(missing)], capsys))
    assert "--html" in line and "does not exist" in line
    assert not (tmp_path / "idx").exists()  # refused before the sample index was built


def test_the_title_holds_a_hostile_question_escaped_exactly() -> None:
    """The page's ``<title>`` (render's only text outside scripts) escapes exactly the four characters
    that matter in HTML text, each once, with nothing else changed; without a title it says arag report."""
    from arag_graph.evaluators.html_report import render

    question = 'Tom & "Jerry" </title><script>x()</script> > 1'
    page = render({"title": question, "details": []})
    escaped = "Tom &amp; &quot;Jerry&quot; &lt;/title&gt;&lt;script&gt;x()&lt;/script&gt; &gt; 1"
    assert f"<title>{escaped}</title>" in page
    assert "<title>arag report</title>" in render({"details": []})


def test_a_hostile_question_page_holds_its_data_where_the_page_reads_it() -> None:
    """render's page, read back: the first view's JSON (everything but the steps and snippets) in
    ``report-data``, each question's steps and the snippets gzip-packed in their own elements, every
    placeholder replaced once, also when the data holds the placeholders' names."""
    import base64
    import gzip
    import re

    from arag_graph.evaluators.html_report import render

    data = {
        "title": "__DATA__ __DETAILS__",
        "summary": {"q": "__DETAILS__"},
        "details": [{"steps": ["a"]}, {"steps": ["__DATA__"]}],
        "snippets": {"c1": "text"},
    }
    page = render(data)
    assert "__DATA__</script>" not in page and re.search(r">__DETAILS__|__DETAILS__\n", page) is None
    first = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert first and json.loads(first.group(1)) == {"title": data["title"], "summary": data["summary"]}
    packed = dict(re.findall(r'<script type="application/gzip" id="([^"]+)">([^<]*)</script>', page))
    unpacked = {name: json.loads(gzip.decompress(base64.b64decode(text))) for name, text in packed.items()}
    assert unpacked == {"qd-0": data["details"][0], "qd-1": data["details"][1], "report-snippets": data["snippets"]}
    assert list(packed) == ["qd-0", "qd-1", "report-snippets"]
    assert re.search(r'id="qd-0">[^<]*</script>\n<script type="application/gzip" id="qd-1">', page)  # one a line
    no_snippets = dict(re.findall(r'id="(report-snippets)">([^<]*)<', render({"details": []})))
    assert json.loads(gzip.decompress(base64.b64decode(no_snippets["report-snippets"]))) == {}
