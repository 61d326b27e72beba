"""Installs that stay small (issue 25, item 9): the default query path never imports torch.

A plain ``pip install`` pulls CUDA torch unless the CPU build is installed first, as the README's
set-up says; nothing that loads an index, searches it or answers with ``arag ask`` may need torch
(or sentence-transformers, or transformers) once the default encoder is exported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from arag_graph.index.hierarchical import HierarchicalIndex

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "sentence_transformers", "transformers")


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
        f"loaded = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "print(json.dumps({'code': code, 'hits': hits, 'answer': json.loads(out.getvalue())['answer'], "
        "'loaded': loaded}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0 and result["answer"]
    assert "0" in result["hits"]
    assert result["loaded"] == []


def test_the_readme_installs_the_cpu_build_of_torch_first() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    cpu = readme.find("pip install torch --index-url https://download.pytorch.org/whl/cpu")
    assert cpu >= 0, "the README's set-up names the CPU torch index"
    assert readme.find("pip install", cpu + 1) > cpu, "the package is installed after torch"
