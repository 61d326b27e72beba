"""Reading deeply nested HTML (issue 38): time and peak memory against depth.

A probe indexed a 2.2 MB HTML file nested 200,000 ``<div>`` levels deep in 76 s (a machine at load
12): the page was parsed into a BeautifulSoup tree, one object per element. ``arag index`` now reads
HTML as a stream of tags (``arag_graph.index.corpus._html_text``), keeping only the text. This times
both readers on pages of growing depth (each once; the tree only up to ``--tree-max-depth``, it is
the slow one) and, in a second pass under ``tracemalloc``, their peak memory.

    python bench/bench_html_depth.py            # writes bench/results/html_depth.{json,md}
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

from benchenv import RESULTS, machine

# The reader before issue 38 (a BeautifulSoup tree of the whole page), as the tests keep it.
from tests.test_corpus import _tree_text as tree_text


def page(depth: int) -> bytes:
    """A page whose one line of text sits ``depth`` elements deep."""
    return (
        b"<html><head><title>Deep</title></head><body>"
        + b"<div>" * depth
        + b"bottom text"
        + b"</div>" * depth
        + b"</body></html>"
    )


def measure(reader: Callable[[bytes], Any], data: bytes) -> dict[str, float]:
    began = time.perf_counter()
    assert reader(data) == ("Deep", "bottom text")
    seconds = time.perf_counter() - began
    tracemalloc.start()
    reader(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return {"seconds": round(seconds, 2), "peak_mb": round(peak / 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="2000,20000,200000")
    parser.add_argument("--tree-max-depth", type=int, default=20000)
    args = parser.parse_args()
    from arag_graph.index.corpus import _html_text

    os.nice(5)
    for reader in (_html_text, tree_text):
        reader(page(10))  # imports first
    rows = []
    for depth in (int(d) for d in args.depths.split(",")):
        data = page(depth)
        row: dict[str, Any] = {"depth": depth, "bytes": len(data), "stream": measure(_html_text, data)}
        if depth <= args.tree_max_depth:
            row["tree"] = measure(tree_text, data)
        rows.append(row)
        print(json.dumps(row), flush=True)
    info = machine(bs4=version("beautifulsoup4"))
    command = "python bench/bench_html_depth.py " + " ".join(sys.argv[1:])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "html_depth.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Deeply nested HTML: the streaming reader against the tree it replaced",
        "",
        f"`{command.strip()}` on {info['cpu']} ({info['cores']} cores, shared), Python {info['python']}, "
        f"beautifulsoup4 {info['bs4']}; each reader once per page (time), then again under tracemalloc (peak).",
        "",
        "| depth | page | stream: time | stream: peak | tree: time | tree: peak |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        tree = r.get("tree")
        tree_cells = f"{tree['seconds']} s | {tree['peak_mb']} MB" if tree else "not run | not run"
        lines.append(
            f"| {r['depth']:,} | {r['bytes'] / 1e6:.2f} MB | {r['stream']['seconds']} s | "
            f"{r['stream']['peak_mb']} MB | {tree_cells} |"
        )
    lines.append("")
    (RESULTS / "html_depth.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
