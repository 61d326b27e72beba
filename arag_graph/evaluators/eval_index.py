"""The index an evaluation runs on: built once per corpus and reused while its corpus hash matches.

``--cch-index`` gives a built index with contextual headers for the settings that need one; DSI's
document summaries are written once and reused by later builds.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from typing import Any

from arag_graph.core.errors import AragError, DatasetError
from arag_graph.core.profiles import DEFAULT_PROFILE
from arag_graph.evaluators.plan import EvalPlan, find_corpus, needs_summaries, settings_for, slug
from arag_graph.llm.summarize import summary_writer
from arag_graph.qa.datasets import Question, gold_chunk_ids, missing_support, passage_maps

log = logging.getLogger(__name__)

CACHE_FLAG = "$ARAG_CACHE_DIR (the cache directory)"
"""How a refusal names an index eval builds in the cache (not a flag the user gave)."""


def reuses_built_index(plan: EvalPlan) -> bool:
    """True when ``--index`` names a built index and no ``--corpus`` asks for another build."""
    return plan.index is not None and plan.corpus is None and (plan.index / "CURRENT").exists()


def prepare_index(plan: EvalPlan, questions: Sequence[Question], progress: bool) -> tuple[Any, dict[str, list[str]]]:
    """Load or build the index and map every question to its gold chunk IDs.

    The corpus is chunked (cheap, no embedding) first so that missing supporting passages are
    reported before any index is built.
    """
    from arag_graph.core.chunking import chunk_documents
    from arag_graph.index.corpus import load_corpus

    summaries = needs_summaries(plan).get("", False)
    if reuses_built_index(plan):
        index, chunks = _given_index(plan, summaries)
    else:
        corpus = find_corpus(plan.dataset, plan.corpus)
        chunks = chunk_documents(load_corpus(corpus))
        index = None
    title_to_ids, text_to_ids = passage_maps(chunks)
    missing = missing_support(questions, title_to_ids, text_to_ids)
    if missing:
        qid, what = missing[0]
        raise DatasetError(
            f"the corpus lacks supporting passages of {len({q for q, _ in missing})} question(s), e.g. question "
            f"{qid}: {what[:80]!r}; give the corpus these questions were written for (--corpus)"
        )
    if index is None:
        index = _cached_or_built_index(plan, chunks, summaries, progress)
    gold = {q.id: list(gold_chunk_ids(q, title_to_ids, text_to_ids)) for q in questions}
    return index, gold


def _given_index(plan: EvalPlan, summaries: bool) -> tuple[Any, Any]:
    """The built ``--index`` and its chunks, checked against the plan before any question is paid for."""
    from arag_graph.index.load import load_index
    from arag_graph.retrievers.summaries import has_summaries, missing_summaries_error

    index = load_index(plan.index, cache=True)
    _check_embedding_matches(plan, index)
    chunks = index.store.chunks
    if summaries and not has_summaries(index):  # before any question is paid for
        raise missing_summaries_error(index)
    _check_profile_matches(plan, index, "--index")
    if plan.grid and index.manifest.contextual_headers:
        # The grid's rows without CCH must run on bare sentences, or "+ CCH" compares CCH with itself.
        raise AragError(
            f"--index {plan.index}: built with contextual headers, but the grid's base rows need bare "
            "sentences; build it with --no-contextual-headers (and give the headed one as --cch-index)"
        )
    return index, chunks


def _cached_or_built_index(plan: EvalPlan, chunks: Any, summaries: bool, progress: bool) -> Any:
    """The index of ``chunks`` the plan wants: one built earlier with the same corpus hash and settings
    (at ``--index``, else in the cache), or a new build there."""
    from arag_graph.core.cache import cache_dir
    from arag_graph.core.documents import DEFAULT_CONTEXTUAL_HEADERS
    from arag_graph.index.build import build_index
    from arag_graph.index.embedding_loader import resolve_embeddings
    from arag_graph.index.encoders import embedding_model_id
    from arag_graph.index.load import load_index
    from arag_graph.index.manifest import corpus_hash

    digest = corpus_hash(chunks)
    embeddings = resolve_embeddings(plan.embedding, base_url=plan.embedding_base_url)  # fails before a build
    model_id = embedding_model_id(embeddings)
    name = slug(plan.dataset.parent.name) + ("" if plan.embedding is None else f"-{slug(model_id)[-40:]}")
    # A grid compares techniques with and without contextual headers (its CCH rows get their own
    # index), so its base index has none; otherwise the profile's choice applies.
    wanted = profile_index(plan)
    headers = False if plan.grid else wanted["contextual_headers"]
    name += "" if headers == DEFAULT_CONTEXTUAL_HEADERS else "-bare"
    name += "" if plan.profile == DEFAULT_PROFILE else f"-{plan.profile}"
    target = plan.index or cache_dir() / "indexes" / f"{name}-{digest[:12]}"
    with contextlib.suppress(AragError):
        existing = load_index(target, cache=True)
        if (
            existing.manifest.corpus_hash == digest
            and existing.manifest.embedding_model == model_id
            and existing.manifest.contextual_headers == headers
            and existing.manifest.keyword_match == wanted["keyword_match"]
            and _has_wanted_summaries(existing, plan, summaries)
        ):
            return existing
    options = _summary_options(plan, summaries)
    flag = "--index" if plan.index else CACHE_FLAG
    build_index(
        chunks, target, embeddings=embeddings, contextual_headers=headers, progress=progress, out_flag=flag,
        keyword_match=wanted["keyword_match"], profile=plan.profile, **options,
    )  # fmt: skip
    return load_index(target, cache=True)


def profile_index(plan: EvalPlan) -> dict[str, Any]:
    """The index settings of the plan's profile: ``keyword_match``, ``contextual_headers`` and
    ``header_style`` (how headers are written where an index has them: the grid's CCH index)."""
    from arag_graph.index.build import BuildOptions

    options = BuildOptions.for_profile(plan.profile)
    return {
        "keyword_match": options.keyword_match,
        "contextual_headers": options.contextual_headers,
        "header_style": options.header_style,
    }


def _check_profile_matches(plan: EvalPlan, index: Any, flag: str) -> None:
    """A built index given to a ``paper`` evaluation must be the paper's: its keyword rule, and bare
    sentences (except the grid's ``--cch-index``, whose headers are the point). One line otherwise,
    before any question runs: results on another index would not be the paper's."""
    if plan.profile == DEFAULT_PROFILE:
        return
    wanted = profile_index(plan)
    manifest = index.manifest
    built = {
        "keyword_match": manifest.keyword_match,
        "contextual_headers": manifest.contextual_headers,
        "header_style": manifest.header_style,
    }
    # The CCH index has headers by design (their style is the profile's); the others' style is moot.
    wanted.pop("contextual_headers" if flag == "--cch-index" else "header_style")
    differ = sorted(k for k in wanted if built[k] != wanted[k])
    if differ:
        shown = ", ".join(f"{k}={built[k]}" for k in differ)
        raise AragError(
            f"{flag} {index.path}: built with {shown}, not the {plan.profile} profile's; rebuild it with "
            f"arag index --profile {plan.profile}, or drop {flag} to let arag eval build one"
        )


def _check_embedding_matches(plan: EvalPlan, index: Any) -> None:
    """``--embedding`` with a built ``--index``: an index answers with the model it was built with, so a
    different one is refused rather than silently ignored."""
    from arag_graph.index.embedding_loader import resolve_embeddings
    from arag_graph.index.encoders import embedding_model_id

    if plan.embedding is None and plan.embedding_base_url is None:
        return
    wanted = embedding_model_id(resolve_embeddings(plan.embedding, base_url=plan.embedding_base_url))
    built = index.manifest.embedding_model
    if wanted != built:
        raise AragError(
            f"--index {plan.index} was built with the embedding model {built!r}, not {wanted!r}; drop --embedding "
            "to use the index as built, or give a new --index (with --corpus) to build one with that model"
        )


def _summary_options(plan: EvalPlan, wanted: bool, reuse: Any = None) -> dict[str, Any]:
    """``build_index`` arguments for the document summaries a plan's DSI settings need (none when none do)."""
    if not wanted:
        return {}
    options: dict[str, Any] = {"base_url": plan.base_url, "timeout": plan.timeout, "max_retries": plan.max_retries}
    if reuse is not None:
        options["reuse"] = reuse
    return {"summaries": summary_writer(plan.summaries or "offline", options)}


def _has_wanted_summaries(index: Any, plan: EvalPlan, wanted: bool) -> bool:
    """Whether a cached index can serve the plan: summaries by the plan's summariser when DSI needs them."""
    if not wanted:
        return True
    info = (index.manifest.extra or {}).get("summaries") or {}
    return info.get("model") == (plan.summaries or "offline")


def prepare_cch_index(plan: EvalPlan, index: Any, progress: bool) -> Any | None:
    """The grid's index with contextual chunk headers (CCH rows), of the same chunks; None when no row needs it.

    ``--cch-index`` gives a built one (checked: headers on, same corpus, summaries when DSI needs
    them) or where to build it; without it the index is built in the cache beside the other.
    """
    from arag_graph.core.cache import cache_dir
    from arag_graph.index.build import build_index
    from arag_graph.index.load import load_index
    from arag_graph.retrievers.summaries import has_summaries, missing_summaries_error

    if not any(s.index == "cch" for s in settings_for(plan)):
        return None
    summaries = needs_summaries(plan).get("cch", False)
    digest = index.manifest.corpus_hash
    given = plan.cch_index
    if given is not None and (given / "CURRENT").exists():
        cch = load_index(given, cache=True)
        if not cch.manifest.contextual_headers:
            raise AragError(
                f"--cch-index {given}: built without contextual headers; build it with --contextual-headers"
            )
        _check_profile_matches(plan, cch, "--cch-index")
        if cch.manifest.corpus_hash != digest:
            raise AragError(f"--cch-index {given}: another corpus than the evaluation's index; build it from the same")
        if summaries and not has_summaries(cch):
            raise missing_summaries_error(cch)
        return cch
    suffix = "" if plan.profile == DEFAULT_PROFILE else f"-{plan.profile}"
    target = given or cache_dir() / "indexes" / f"{slug(plan.dataset.parent.name)}-{digest[:12]}-cch{suffix}"
    with contextlib.suppress(AragError):
        existing = load_index(target, cache=True)
        if (
            existing.manifest.corpus_hash == digest
            and existing.manifest.contextual_headers
            and existing.manifest.keyword_match == profile_index(plan)["keyword_match"]
            and existing.manifest.header_style == profile_index(plan)["header_style"]
            and _has_wanted_summaries(existing, plan, summaries)
        ):
            return existing
    reuse = getattr(index, "build_dir", None)  # the plain index's summaries: not paid for twice
    options = _summary_options(plan, summaries, reuse)
    flag = "--cch-index" if given else CACHE_FLAG
    wanted = profile_index(plan)
    build_index(
        index.store.chunks, target, contextual_headers=True, keyword_match=wanted["keyword_match"],
        header_style=wanted["header_style"], profile=plan.profile, progress=progress, out_flag=flag, **options,
    )  # fmt: skip
    return load_index(target, cache=True)


def prepare_variant_indexes(
    plan: EvalPlan, index: Any, questions: Sequence[Question], progress: bool
) -> dict[str, tuple[Any, dict[str, list[str]]]]:
    """Each index variant some row runs on (``EvalPlan.variants``), with its questions' gold chunk ids.

    A variant is the evaluation's corpus built again with another ``chunk_size`` (chunked anew from
    the corpus file, so its gold chunk ids are its own) or another ``embedding`` (the same chunks;
    ``""`` is the packaged encoder), with the profile's keyword rule and headers. Built once in the
    cache and reused while the corpus, encoder and settings match, as the evaluation's own index is.
    """
    from arag_graph.core.chunking import chunk_documents
    from arag_graph.index.corpus import load_corpus

    used = {s.index for s in settings_for(plan)}
    out: dict[str, tuple[Any, dict[str, list[str]]]] = {}
    for name, options in plan.variants:
        if name not in used:
            continue
        chunk_size = options.get("chunk_size")
        if chunk_size is not None:
            chunks = chunk_documents(load_corpus(find_corpus(plan.dataset, plan.corpus)), chunk_size=int(chunk_size))
        else:
            chunks = list(index.store.chunks)
        title_to_ids, text_to_ids = passage_maps(chunks)
        missing = missing_support(questions, title_to_ids, text_to_ids)
        if missing:
            raise DatasetError(
                f"index variant {name}: the corpus lacks supporting passages of question {missing[0][0]} "
                f"({missing[0][1][:80]!r}); give the corpus these questions were written for (--corpus)"
            )
        built = _variant_index(plan, name, chunks, options.get("embedding", plan.embedding), chunk_size, progress)
        out[name] = (built, {q.id: list(gold_chunk_ids(q, title_to_ids, text_to_ids)) for q in questions})
    return out


def _variant_index(
    plan: EvalPlan, name: str, chunks: list[Any], spec: str | None, chunk_size: int | None, progress: bool
) -> Any:
    """Index variant ``name`` of ``chunks`` embedded with ``spec`` (``""``: the packaged encoder), from the
    cache when a build there matches (corpus, encoder, the profile's keyword rule and headers)."""
    from arag_graph.core.cache import cache_dir
    from arag_graph.index.build import build_index
    from arag_graph.index.embedding_loader import resolve_embeddings
    from arag_graph.index.encoders import embedding_model_id
    from arag_graph.index.load import load_index
    from arag_graph.index.manifest import corpus_hash

    wanted = profile_index(plan)
    embeddings = resolve_embeddings(spec or None, base_url=None if spec == "" else plan.embedding_base_url)
    model_id = embedding_model_id(embeddings)
    digest = corpus_hash(chunks)
    suffix = "" if plan.profile == DEFAULT_PROFILE else f"-{plan.profile}"
    target = cache_dir() / "indexes" / f"{slug(plan.dataset.parent.name)}-{digest[:12]}-{slug(name)}{suffix}"
    with contextlib.suppress(AragError):
        existing = load_index(target, cache=True)
        if (
            existing.manifest.corpus_hash == digest
            and existing.manifest.embedding_model == model_id
            and existing.manifest.contextual_headers == wanted["contextual_headers"]
            and existing.manifest.keyword_match == wanted["keyword_match"]
            and (not wanted["contextual_headers"] or existing.manifest.header_style == wanted["header_style"])
        ):
            return existing
    build_index(
        chunks, target, embeddings=embeddings, contextual_headers=wanted["contextual_headers"],
        header_style=wanted["header_style"], keyword_match=wanted["keyword_match"], profile=plan.profile,
        progress=progress, out_flag=CACHE_FLAG,
        chunk_size=None if chunk_size is None else int(chunk_size),
    )  # fmt: skip
    return load_index(target, cache=True)
