"""Property-based tests (hypothesis) for what a model, a file or a caller controls (issue 22, item 6).

- tool arguments: whatever a model writes as keyword_search / semantic_search / chunk_read
  arguments, the tool answers with text (a result or how to call it right) and never raises;
- corpus files: arbitrary JSON, JSON Lines and text either load as documents or are refused with
  one line (:class:`~arag_graph.core.errors.AragError`);
- manifests: arbitrary JSON, or a real manifest with one field changed, removed or added, loads or
  is refused with an ``AragError``, never another exception;
- context values: arbitrary mappings give a valid context of every served graph or a one-line
  :class:`~arag_graph.core.errors.ContextError` (``RunRefused`` is one).

Sizes are bounded and every test is derandomized (the same inputs on every run, so a failure
reproduces) with no example database on disk.
"""

from __future__ import annotations

import json
import shutil
import string
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arag_graph.core.errors import AragError, ContextError
from arag_graph.index.build import build_index
from arag_graph.index.corpus import load_corpus
from arag_graph.index.layout import MANIFEST
from arag_graph.index.load import load_index
from arag_graph.index.manifest import Manifest
from arag_graph.registry import GRAPHS
from arag_graph.run.configuration import GraphContext
from arag_graph.tools.toolkit import chunk_read, create_retrieval_tools, keyword_search, semantic_search

PROPERTY = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

_text = st.text(st.characters(codec="utf-8") | st.sampled_from(list(string.punctuation + " \n\t")), max_size=30)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _text
    | st.text(st.characters(categories=["Cs"]), min_size=1, max_size=2)  # lone surrogates
)
json_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=12
)


def one_line(error: BaseException) -> None:
    message = str(error)
    assert message.strip() and "\n" not in message and "Traceback" not in message, message


# ---------------------------------------------------------------------------------------------
# Tool arguments


@pytest.fixture(scope="module")
def tools(sample_index: Any) -> dict[str, Any]:
    return {t.name: t for t in create_retrieval_tools(sample_index)}


TOOL_ARGS = {
    "keyword_search": ("keywords", "top_k"),
    "semantic_search": ("query", "top_k"),
    "chunk_read": ("chunk_ids", "adjacent"),
}


TOOLS_PROPERTY = settings(PROPERTY, max_examples=30)  # each example may embed a query


@pytest.mark.integration
@given(
    name=st.sampled_from(sorted(TOOL_ARGS)),
    values=st.lists(json_values, min_size=0, max_size=2),
    extra=st.dictionaries(_text, json_values, max_size=2),
)
@TOOLS_PROPERTY
def test_tools_answer_any_arguments_with_text(tools: dict[str, Any], name: str, values: list[Any], extra: dict) -> None:
    """As a model calls them (a tool call with arguments of any shape): a message, never an exception."""
    args = {**extra, **dict(zip(TOOL_ARGS[name], values, strict=False))}
    args.pop("runtime", None)  # injected by LangGraph, never the model's to give
    message = tools[name].invoke({"type": "tool_call", "name": name, "args": args, "id": "p"})
    assert isinstance(message.content, str) and message.content.strip()


@pytest.mark.integration
@given(first=json_values, second=json_values)
@TOOLS_PROPERTY
def test_tool_functions_coerce_any_values(sample_index: Any, first: Any, second: Any) -> None:
    """The functions under the tools take the raw values (the standalone and offline paths)."""
    for out in (
        keyword_search(sample_index, first, second),
        semantic_search(sample_index, first if isinstance(first, (str, int, float, list)) else str(first), second),
        chunk_read(sample_index, first, adjacent=second),
    ):
        assert isinstance(out.content, str) and out.content.strip()
        assert out.tokens >= 0 and all(isinstance(i, str) for i in out.chunk_ids)


# ---------------------------------------------------------------------------------------------
# Corpus files


def _corpus_bytes(value: Any, lines: bool) -> bytes:
    if lines and isinstance(value, list):
        return "\n".join(json.dumps(v) for v in value).encode("utf-8", "surrogatepass")
    return json.dumps(value).encode("utf-8", "surrogatepass")


@given(
    data=st.one_of(
        st.binary(max_size=600),
        st.tuples(json_values, st.booleans()).map(lambda pair: _corpus_bytes(*pair)),
        st.lists(
            st.dictionaries(st.sampled_from(["id", "title", "text", "contents", "body"]), json_values, max_size=4),
            max_size=4,
        ).map(lambda records: _corpus_bytes(records, True)),
    ),
    suffix=st.sampled_from([".json", ".jsonl", ".txt", ".md", ""]),
)
@PROPERTY
def test_corpus_files_load_or_are_refused_in_one_line(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"corpus{suffix}"
        path.write_bytes(data)
        try:
            documents = load_corpus(path)
        except AragError as exc:
            one_line(exc)
            return
        assert documents and all(isinstance(doc.text, str) and doc.text.strip() for doc in documents)


# ---------------------------------------------------------------------------------------------
# Manifests


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, dict[str, Any]]]:
    """A small real index, its manifest's path and its manifest as JSON (restored after each example)."""
    root = tmp_path_factory.mktemp("manifest-properties")
    corpus = root / "corpus.jsonl"
    texts = ["Leland is a town in North Carolina.", "A film was shot there in 1986.", "Its director was Rob Reiner."]
    corpus.write_text("\n".join(json.dumps({"id": str(i), "title": f"T{i}", "text": t}) for i, t in enumerate(texts)))
    index = build_index(corpus, root / "index", progress=False)
    manifest = Path(index.build_dir) / MANIFEST
    yield root / "index", manifest, json.loads(manifest.read_text())
    shutil.rmtree(root, ignore_errors=True)


def _loads_or_refuses(root: Path) -> None:
    try:
        load_index(root)
    except AragError as exc:
        one_line(exc)


@pytest.mark.integration
@given(
    key=st.sampled_from(["checksums", "format_version", "embedding_model", "chunk_size", "dim", "sentences"]) | _text,
    change=st.sampled_from(["set", "delete", "flip"]),
    value=json_values,
    position=st.integers(0, 10**6),
)
@settings(PROPERTY, max_examples=40)  # each example loads the index
def test_a_changed_manifest_loads_or_is_refused(
    built: tuple[Path, Path, dict[str, Any]], key: str, change: str, value: Any, position: int
) -> None:
    root, path, original = built
    good = path.read_bytes()
    try:
        if change == "flip":  # one flipped bit anywhere in the file
            data = bytearray(json.dumps(original).encode())
            data[position % len(data)] ^= 1 << (position % 8)
            path.write_bytes(bytes(data))
        else:
            manifest = dict(original)
            if change == "set":
                manifest[key] = value
            else:
                manifest.pop(key, None)
            path.write_bytes(json.dumps(manifest).encode("utf-8", "surrogatepass"))
        _loads_or_refuses(root)
    finally:
        path.write_bytes(good)


@given(value=json_values)
@PROPERTY
def test_arbitrary_json_is_no_manifest(value: Any) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / MANIFEST
        path.write_bytes(json.dumps(value).encode("utf-8", "surrogatepass"))
        try:
            manifest = Manifest.from_file(path)
        except AragError as exc:
            one_line(exc)
        else:  # only a mapping whose fields all type-check (or default) is a manifest
            assert isinstance(value, dict) and isinstance(manifest, Manifest)


# ---------------------------------------------------------------------------------------------
# Context values

SCHEMAS: list[type[GraphContext]] = list(dict.fromkeys(spec.config for spec in GRAPHS.values()))
FIELDS = sorted({name for schema in SCHEMAS for name in schema.model_fields})


@given(
    schema=st.sampled_from(SCHEMAS),
    context=st.dictionaries(st.sampled_from(FIELDS) | _text, json_values, max_size=6),
)
@PROPERTY
def test_any_served_context_is_valid_or_one_line_refused(schema: type[GraphContext], context: dict) -> None:
    try:
        ctx = schema.of_run(context)
    except ContextError as exc:
        one_line(exc)
        return
    assert isinstance(ctx, schema) and not ctx.is_trusted
    choice = ctx.choice()  # what the run will use: the operator's choices, or among them
    assert isinstance(choice.model, str) and choice.model
