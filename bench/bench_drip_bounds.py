"""Drip bounds under load: how long a chat, embeddings or Chroma request to a dripping server lasts.

A server that sends one byte every few seconds and never finishes is ended by the total deadline
per attempt (``arag_graph.core.deadlines``), so a call waits at most ``timeout × attempts`` plus the
client's back-off between attempts. A probe (issue 38) timed a dripping chat server from the start
of the ``arag`` process on a machine at load 12 and saw 49 s, start-up included; the bound is about
the requests, so this measures from the moment the server reads the first request it drips (a
Chroma client's start-up requests, answered, come before) to the moment
the call fails in the caller, with two CPU burners (busy loops, at this script's niceness) running
all along. Each kind runs in this process against the drip stand-in of the tests
(``tests/stubs/silent_server.py``: one byte every 0.4 s, for at most 60 s):

- ``chat``: an OpenAI-compatible chat model (``resolve_chat_model``), ``timeout=5``, ``max_retries=1``;
- ``embeddings``: an ``openai:`` embeddings endpoint, ``timeout=5``, ``max_retries=1``;
- ``chroma``: a search of an index on a Chroma server whose collection requests drip,
  ``chroma_timeout=5`` (Chroma is not retried);
- operations that ask the embeddings endpoint more than once, whose requests share one bound from the
  first (``arag_graph.core.deadlines.one_operation``): ``embeddings-hyde``, an A-RAG run whose
  ``semantic_search`` with HyDE embeds the model's passage (it times out) and then falls back to the
  query, on the bundled sample index whose query embeddings come from the dripping endpoint (the
  chat model is scripted: only the endpoint is measured); ``embeddings-batches``, 1,500 texts
  embedded as an index build does (``embed_texts``, batches of 512: three requests if answered).

    python bench/bench_drip_bounds.py          # writes bench/results/drip_bounds.{json,md}

The stated margin (``MARGIN_S``) is what the bound allows beyond ``timeout × attempts``: the OpenAI
client's back-off between attempts (at most 8 s by its own rule, about 0.5-1 s for a first retry)
and the scheduling of a loaded machine.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchenv import RESULTS, machine

TIMEOUT = 5.0
MARGIN_S = 3.0


def burn() -> None:
    """A CPU burner: a busy loop until terminated (at the script's niceness, so it competes with it)."""
    while True:
        pass


class Timed:
    """The drip stand-in, with the time each request was read (the first one starts the clock)."""

    def __init__(self, **kwargs: Any) -> None:
        from tests.stubs.silent_server import SilentServer

        self.server = SilentServer(drip=True, limit=60.0, **kwargs)
        self.read_at: list[float] = []
        inner = self.server._read_request

        def read(connection: Any, pending: bytes) -> Any:
            request = inner(connection, pending)
            answer = self.server.answer
            if request is not None and (answer is None or answer(*request[:2]) is None):
                self.read_at.append(time.monotonic())  # a request the server drips (not one it answers)
            return request

        self.server._read_request = read  # type: ignore[method-assign]


def chat(drip: Any) -> Callable[[], Any]:
    from arag_graph.llm.models import resolve_chat_model

    model = resolve_chat_model("gpt-4o-mini", base_url=drip.url, timeout=TIMEOUT, max_retries=1)
    return lambda: model.invoke("Where is the Eiffel Tower?")


def embeddings(drip: Any) -> Callable[[], Any]:
    from arag_graph.index.embedding_loader import resolve_embeddings

    model = resolve_embeddings("openai:embed", base_url=drip.url, timeout=TIMEOUT, max_retries=1)
    return lambda: model.embed_query("a river")


def chroma(drip: Any) -> Callable[[], Any]:
    from arag_graph.index.load import load_index
    from tests.test_chroma_timeouts import server_index

    root = server_index(Path(tempfile.mkdtemp(prefix="drip-")), drip.root_url)
    return lambda: load_index(root, chroma_timeout=TIMEOUT).semantic_search("a river", 1)


def embeddings_hyde(drip: Any) -> Callable[[], Any]:
    from arag_graph.index.sample import ensure_sample_index
    from tests.scripted import hyde_search_graph

    graph = hyde_search_graph(ensure_sample_index(progress=False), drip.url, timeout=TIMEOUT)

    def run() -> None:
        out = graph.invoke({"question": "Who directed it?"}, context={"hyde": True})
        tools = [m.content for m in out.get("messages", []) if getattr(m, "type", "") == "tool"]
        raise RuntimeError(f"{'; '.join(out['warnings'])} / tool: {' '.join(map(str, tools))}")

    return run


def embeddings_batches(drip: Any) -> Callable[[], Any]:
    from arag_graph.index.embedding_loader import resolve_embeddings
    from arag_graph.index.encoders import embed_texts

    model = resolve_embeddings("openai:embed", base_url=drip.url, timeout=TIMEOUT, max_retries=1)
    return lambda: embed_texts(model, [f"sentence {i} about a river" for i in range(1500)], batch_size=512)


KINDS: dict[str, tuple[Callable[[Any], Callable[[], Any]], int, dict[str, Any]]] = {
    "chat": (chat, 2, {}),
    "embeddings": (embeddings, 2, {}),
    "chroma": (chroma, 1, {}),
    "embeddings-hyde": (embeddings_hyde, 2, {}),
    "embeddings-batches": (embeddings_batches, 2, {}),
}


def measure(name: str) -> dict[str, Any]:
    make, attempts, server_kwargs = KINDS[name]
    if name == "chroma":
        from tests.test_deadlines import chroma_open

        server_kwargs = {"answer": chroma_open}
    timed = Timed(**server_kwargs)
    with timed.server as drip:
        call = make(drip)
        error = ""
        try:
            call()
        except Exception as exc:  # the one-line failure is what is expected
            error = " ".join(str(exc).split())[:160]
        ended = time.monotonic()
        outcomes = drip.outcomes()
    first = timed.read_at[0] if timed.read_at else ended
    bound = TIMEOUT * attempts
    took = ended - first
    return {
        "kind": name,
        "timeout_s": TIMEOUT,
        "attempts": attempts,
        "requests_read": len(timed.read_at),
        "outcomes": outcomes,
        "from_first_request_s": round(took, 2),
        "bound_s": bound,
        "bound_plus_margin_s": bound + MARGIN_S,
        "within": took <= bound + MARGIN_S,
        "error": error,
    }


def main() -> None:
    os.nice(5)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-not-a-real-key")
    burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(2)]
    for b in burners:
        b.start()
    try:
        time.sleep(1)
        load = os.getloadavg()[0]
        rows = [measure(name) for name in (sys.argv[1].split(",") if len(sys.argv) > 1 else KINDS)]
        load_after = os.getloadavg()[0]
    finally:
        for b in burners:
            b.terminate()
            b.join()
    info = machine()
    info["load_1min_start"], info["load_1min_end"] = round(load, 1), round(load_after, 1)
    import json

    command = "python bench/bench_drip_bounds.py " + " ".join(sys.argv[1:])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "drip_bounds.json").write_text(json.dumps({"machine": info, "rows": rows}, indent=1) + "\n")
    lines = [
        "# Drip bounds under load, from the first request",
        "",
        f"`{command.strip()}` on {info['cpu']} ({info['cores']} cores, shared), Python {info['python']}, two CPU "
        f"burners running; 1-minute load {info['load_1min_start']} at the start, {info['load_1min_end']} at the end.",
        f"Bound: timeout × attempts; margin {MARGIN_S:g} s (the client's back-off between attempts, scheduling). "
        "For the operations that ask the endpoint more than once (embeddings-hyde, embeddings-batches) the "
        "bound is the operation's: one timeout × attempts from its first request, however many it would send.",
        "",
        "| kind | timeout | attempts | requests the server read | from the first request | bound + margin | within | "
        "the caller's error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['kind']} | {r['timeout_s']:g} s | {r['attempts']} | {r['requests_read']} | "
            f"{r['from_first_request_s']} s | {r['bound_plus_margin_s']:g} s | {'yes' if r['within'] else 'NO'} | "
            f"{r['error'].replace('|', '/')} |"
        )
    lines.append("")
    (RESULTS / "drip_bounds.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
