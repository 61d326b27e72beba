"""The commands on an index: ``arag index`` (build or ``--update``), ``search``, ``read`` and ``verify``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from arag_graph.cli import args as cliargs
from arag_graph.cli.output import print_json
from arag_graph.core.errors import AragError


def _corpus_arg(args: argparse.Namespace) -> Any:
    """The corpus of ``arag index``: one path as it is, several files read and joined in order."""
    if len(args.corpus) == 1:
        return args.corpus[0]
    from arag_graph.index.corpus import load_corpus

    return [document for path in args.corpus for document in load_corpus(path, args.format)]


def _cmd_update(args: argparse.Namespace) -> int:
    """``arag index SOURCE --out DIR --update``: sync the source into the index, rebuilding nothing unchanged."""
    from arag_graph.core.documents import HEADER_MAX_CHARS
    from arag_graph.index.sync import sync_index

    defaults = {"chunk_size": 1000, "summaries": None, "chroma_url": None, "collection": None, "encoder": None}
    defaults |= {"embedding": None, "embedding_base_url": None}
    defaults |= {"backend": "auto", "header_max_chars": HEADER_MAX_CHARS}
    # None: the profile decides, so any value given is a build setting (the index's own profile holds).
    defaults |= {"keyword_match": None, "contextual_headers": None, "header_style": None, "profile": None}
    given = [name for name, default in defaults.items() if getattr(args, name) != default]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise AragError(f"{flag}: --update keeps the settings the index was built with; drop {flag} (or rebuild)")
    started = time.perf_counter()
    index, report = sync_index(
        _corpus_arg(args), args.out, corpus_format=args.format, progress=not args.json and not args.quiet
    )
    summary = {
        "index": str(Path(args.out)),
        "added": len(report.added),
        "changed": len(report.changed),
        "removed": len(report.removed),
        "unchanged": report.unchanged,
        "sentences_encoded": report.sentences_encoded,
        "sentences_reused": report.sentences_reused,
        "chunks": index.manifest.chunks,
        "seconds": round(time.perf_counter() - started, 2),
    }
    if args.json:
        print_json(summary)
    else:
        print(f"updated {args.out}: {report.summary()} in {summary['seconds']} s")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    """``arag index CORPUS --out DIR``: build an index of the corpus (``--update``: sync it in)."""
    from arag_graph.index.build import BuildOptions, build_index

    cliargs.require_utf8(cliargs.flags(args, "out", "summaries", "base_url"))
    if args.update:
        return _cmd_update(args)
    started = time.perf_counter()
    options = BuildOptions.for_profile(
        args.profile,
        corpus_format=args.format,
        chunk_size=args.chunk_size,
        contextual_headers=args.contextual_headers,
        header_max_chars=args.header_max_chars,
        header_style=args.header_style,
        keyword_match=args.keyword_match,
        chroma_url=args.chroma_url,
        collection=args.collection,
        encoder=args.encoder,
        backend=args.backend,
        embedding_base_url=args.embedding_base_url,
        chroma_timeout=_chroma_wait(args),
    )
    index = build_index(
        _corpus_arg(args),
        args.out,
        options,
        embeddings=args.embedding,
        **_summary_flags(args),
        progress=not args.json and not args.quiet,
    )
    m = index.manifest
    summary = {
        "index": str(Path(args.out)),
        "documents": m.documents,
        "chunks": m.chunks,
        "sentences": m.sentences,
        "seconds": round(time.perf_counter() - started, 2),
        "embedding_model": m.embedding_model,
        "encoder": m.encoder,
        "contextual_headers": m.contextual_headers,
        "header_style": m.header_style,
        "keyword_match": m.keyword_match,
        "profile": m.profile,
    }
    if m.extra.get("summaries"):
        summary["summaries"] = {k: v for k, v in m.extra["summaries"].items() if k != "described"}
    if args.json:
        print_json(summary)
    else:
        print(f"indexed {m.chunks} chunks, {m.sentences} sentences in {summary['seconds']} s -> {args.out}")
        if m.extra.get("summaries"):
            done = m.extra["summaries"]
            print(
                f"document summaries: {done['documents']} {done['described']} ({done['reused']} reused; "
                f"{done['input_tokens']} input and {done['output_tokens']} output tokens)"
            )
    return 0


def _summary_flags(args: argparse.Namespace) -> dict[str, Any]:
    """``--summaries MODEL`` (with ``--base-url`` and the model limits) as ``build_index`` arguments."""
    if args.summaries is None:
        return {}
    from arag_graph.llm.summarize import summary_writer

    options: dict[str, Any] = {"base_url": args.base_url, **cliargs.model_limits(args)}
    return {"summaries": summary_writer(args.summaries, options)}


# --------------------------------------------------------------------------------------------
# arag search, read and verify


def _chroma_wait(args: argparse.Namespace) -> float | None:
    """``--chroma-timeout`` checked up front, even for an index that turns out not to need a server."""
    from arag_graph.index.chroma import chroma_timeout

    return None if args.chroma_timeout is None else chroma_timeout(args.chroma_timeout)


def _load(args: argparse.Namespace) -> Any:
    from arag_graph.index.load import load_index

    cliargs.require_utf8(cliargs.flags(args, "index"))
    return load_index(args.index, chroma_timeout=_chroma_wait(args))


def cmd_search(args: argparse.Namespace) -> int:
    cliargs.top_k(args.top_k)
    flag = "--keywords" if args.keywords is not None else "--query"
    text = args.keywords if args.keywords is not None else args.query
    cliargs.require_utf8([(flag, text)])
    keywords = [k.strip() for k in text.split(",") if k.strip()]
    if flag == "--keywords" and not keywords:
        raise AragError('--keywords is empty; give comma-separated keywords, e.g. --keywords "Paris,Eiffel"')
    if flag == "--query" and not text.strip():
        raise AragError('--query is empty; give a question or description, e.g. --query "who built it"')
    index = _load(args)
    if flag == "--keywords":
        hits = index.keyword_search(keywords, args.top_k)
    else:
        hits = index.semantic_search(text, args.top_k)
    if args.json:
        print_json({"hits": [h.to_dict() for h in hits]})
        return 0
    if not hits:
        print("no matches")
    for rank, hit in enumerate(hits, 1):
        title = f"  {hit.title}" if hit.title else ""
        print(f"{rank:>2}. [{hit.chunk_id}] score={hit.score:.4g}{title}")
        for snippet in hit.snippets:
            print(f"      {snippet}")
    return 0


def cmd_read(args: argparse.Namespace) -> int:
    cliargs.require_utf8(("a chunk ID", chunk_id) for chunk_id in args.ids)
    index = _load(args)
    unknown = [i for i in args.ids if index.get_chunk(i) is None]
    if unknown:
        raise AragError(f"unknown chunk ID(s) {', '.join(unknown)} in {args.index}; use IDs that `arag search` shows")
    chunks = index.get_chunks(args.ids)
    if args.json:
        print_json(
            {
                "chunks": [
                    {"id": c.id, "title": c.title, "text": c.text, "prev": c.prev_id, "next": c.next_id} for c in chunks
                ]
            }
        )
        return 0
    for c in chunks:
        title = f"  {c.title}" if c.title else ""
        print(f"[{c.id}]{title}  (previous: {c.prev_id or 'none'}, next: {c.next_id or 'none'})")
        print(c.text)
        print()
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Check an index completely: checksums, keyword arrays and every sentence record."""
    from arag_graph.index.load import verify_index

    started = time.perf_counter()
    report = verify_index(_load(args))
    report["seconds"] = round(time.perf_counter() - started, 2)
    if args.json:
        print_json({"ok": True, **report})
    else:
        if report["checksums"]:
            what = f"{report['files_checked']} file checksums"
        else:
            what = "no checksums (built before they were recorded)"
        unit = "sentence vectors" if report["sentence_store"] == "matrix" else "sentence records"
        print(
            f"ok: {report['index']}: {report['chunks']} chunks, {report['sentences']} {unit} and "
            f"{what} checked in {report['seconds']} s"
        )
    return 0


# --------------------------------------------------------------------------------------------
# their arguments


def _index_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag index``: its arguments."""
    from arag_graph.core.documents import DEFAULT_CONTEXTUAL_HEADERS, HEADER_MAX_CHARS

    p = sub.add_parser("index", help="build an index of a corpus", **common)
    cliargs.add_device(p)
    p.add_argument(
        "corpus",
        nargs="+",
        help="corpus file or directory (.txt, .md, .html, .pdf, JSON, JSON Lines), or several files",
    )
    p.add_argument("--out", required=True, help="index directory (replaced only when the new build is complete)")
    p.add_argument(
        "--update",
        action="store_true",
        help="sync the corpus into the existing index at --out: only new and changed documents (by content "
        "hash per id) are chunked and encoded, removed ones dropped; the index keeps its own settings",
    )
    cliargs.listed(
        p.add_argument("--format", default=None, help="corpus format (default: detect)"), cliargs.corpus_formats
    )
    p.add_argument("--chunk-size", type=int, default=1000, help="chunk size in o200k tokens (default 1000)")
    cliargs.add_profile(
        p,
        "the index's defaults: package (word keyword rule, contextual headers) or paper (the A-RAG "
        "paper's substring rule on bare sentences); a flag given explicitly wins",
    )
    p.add_argument(
        "--contextual-headers",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="embed 'title > section: sentence' and match titles in keyword search and BM25 (ARAGOG's CCH; "
        f"default {'on' if DEFAULT_CONTEXTUAL_HEADERS else 'off'}, off with --profile paper; measured in "
        "bench/results/quality.md)",
    )
    p.add_argument(
        "--header-max-chars",
        type=int,
        default=HEADER_MAX_CHARS,
        help=f"longest contextual header, 'title > section' (default {HEADER_MAX_CHARS} characters)",
    )
    p.add_argument(
        "--header-style",
        choices=["path", "aragog"],
        default=None,
        help="how a contextual header is written: path ('title > section: sentence', the default) or aragog (the "
        "ARAGOG paper's '[Document: title, Section: section]' per chunk, the default with --profile paper)",
    )
    p.add_argument(
        "--keyword-match",
        choices=["word", "substring"],
        default=None,
        help="keyword rule: word-prefix matching (default, indexed) or plain substring (the paper's, scans; the "
        "default with --profile paper)",
    )
    _index_storage_flags(p)
    _index_summary_flags(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_index)


def _index_storage_flags(p: argparse.ArgumentParser) -> None:
    """``arag index``: where the sentence vectors go and what embeds them."""
    from arag_graph.index.sentencematrix import MATRIX_MAX_SENTENCES

    p.add_argument(
        "--chroma-url",
        default=None,
        help="store sentence vectors in a Chroma server, e.g. http://localhost:8000",
    )
    p.add_argument("--collection", default=None, help="collection name prefix in the Chroma server")
    cliargs.add_chroma_timeout(p)
    encoder = p.add_argument(
        "--encoder",
        default=None,
        help="backend that runs the embedding model, recorded in the index and used for its queries (default "
        "onnx-int8: int8 weights, about 2x less CPU time than torch at the same recall@5 on HotpotQA-100; onnx: "
        "float32, torch's vectors)",
    )
    cliargs.add_embedding(p)
    p.add_argument(
        "--backend",
        default="auto",
        help="where the sentence vectors go: auto (default: matrix up to "
        f"{MATRIX_MAX_SENTENCES:,} sentences, else chroma), matrix (exact search in NumPy) or chroma (HNSW)",
    )
    cliargs.listed(encoder, cliargs.encoders)


def _index_summary_flags(p: argparse.ArgumentParser) -> None:
    """``arag index --summaries MODEL``: the document summary index, and the model's endpoint and limits."""
    p.add_argument(
        "--summaries",
        default=None,
        metavar="MODEL",
        help="add ARAGOG's document summary index (retriever=dsi): a summary per document written by MODEL, or "
        "'offline' for extractive lead sentences; resumable, its tokens recorded in the manifest",
    )
    p.add_argument("--base-url", default=None, help="OpenAI-compatible server URL for the --summaries model")
    cliargs.add_model_limits(p)


def _search_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag search``: its arguments."""
    p = sub.add_parser("search", help="run keyword_search or semantic_search against an index", **common)
    p.add_argument("--index", required=True)
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--keywords", help='comma-separated keywords, e.g. "Marie Curie,Nobel"')
    group.add_argument("--query", help="natural-language query for semantic search")
    p.add_argument("--top-k", type=int, default=5, help="chunks to return, 1 to 20 (default 5)")
    p.add_argument("--json", action="store_true", help="print the hits as one JSON object")
    cliargs.add_chroma_timeout(p)
    cliargs.add_device(p)
    p.set_defaults(func=cmd_search)


def _read_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag read``: its arguments."""
    p = sub.add_parser("read", help="print chunks by ID", **common)
    p.add_argument("--index", required=True)
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--json", action="store_true", help="print the chunks as one JSON object")
    cliargs.add_chroma_timeout(p)
    p.set_defaults(func=cmd_read)


def _verify_command(sub: Any, common: dict[str, Any]) -> None:
    """``arag verify``: its arguments."""
    p = sub.add_parser(
        "verify", help="check an index completely: checksums, keyword arrays, every sentence record", **common
    )
    p.add_argument("--index", required=True)
    p.add_argument("--json", action="store_true", help="print what was checked as one JSON object")
    cliargs.add_chroma_timeout(p)
    p.set_defaults(func=cmd_verify)


def add_commands(sub: Any, common: dict[str, Any]) -> None:
    """``arag index``, ``search``, ``read`` and ``verify``: their arguments."""
    for add in (_index_command, _search_command, _read_command, _verify_command):
        add(sub, common)
