"""Mutation testing of the modules that guard users' keys, data and answers (issue 27).

Each critical module is mutated by mutmut (one small change at a time: an operator, a constant, a
condition) and run against the fast tests that cover it; a mutant no test notices is a bug those
tests would let through. The run happens in a copy of the repository's tracked files (mutmut writes
a ``mutants/`` tree next to the sources), so the working tree is never changed.

    python bench/mutation.py                      # every module below (hours on two cores)
    python bench/mutation.py arag_graph/run/policy.py # some of them
    python bench/mutation.py --max-children 2 ...

Results go to ``bench/results/mutation.json`` (per module, merged with earlier runs) and are
rendered to ``bench/results/mutation.md``: generated, killed, surviving and not covered per module,
each survivor's diff, and the reason it survives when ``REASONS`` below records one (an equivalent
mutant, or a change no behaviour can show). Target: 90% killed in each module.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"


@dataclass(frozen=True)
class Target:
    """One critical module: the fast tests that cover it and, where the module is large, the guarding
    functions to mutate (``Class.method`` or ``function``; empty: the whole module)."""

    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    select: str = ""  # a pytest -k expression narrowing the files to their fast, covering tests
    sample_index: bool = False  # the tests use the session's sample index: build it once, not per mutant
    hotpot_index: bool = False  # the tests use the session's HotpotQA-slice index: built once, likewise

    def pytest_args(self) -> list[str]:
        return [*self.tests, *(["-k", self.select] if self.select else [])]

    def shown(self) -> str:
        return ", ".join(self.tests) + (f" -k '{self.select}'" if self.select else "")

    def patterns(self, module: str) -> list[str]:
        """mutmut's mutant-name patterns for :attr:`functions` (``pkg.mod.x_fn__mutmut_*``)."""
        dotted = module.removesuffix(".py").replace("/", ".")
        names = []
        for function in self.functions:
            owner, _, name = function.rpartition(".")
            names.append(f"{dotted}.x\u01c1{owner}\u01c1{name}__mutmut_*" if owner else f"{dotted}.x_{name}__mutmut_*")
        return names


# module -> the fast tests that cover it (no tests/slow, no test that builds a real index or starts a
# server unless the module's guard lives there: two cores are shared, and every mutant reruns them)
MODULES: dict[str, Target] = {
    "arag_graph/core/endpoints.py": Target(
        ("tests/test_endpoint_rule.py",),
        select="endpoint_hook or client_endpoint or canonical_model_spelling or routing_spelling",
    ),
    "arag_graph/core/safety.py": Target(
        ("tests/test_secrets.py",),
        select="six_characters or remembered or key_shaped or split_secret or one_line_with or at_once or exactly_six "
        "or could_straddle or other_clients or streamed_tool_call",
    ),
    # the redaction of every reply, whole or streamed (tool-call arguments included), before anyone sees it
    "arag_graph/llm/openai_chat.py": Target(
        ("tests/test_openai_chat.py", "tests/test_secrets.py", "tests/test_endpoint_rule.py"),
        functions=(
            "redacted_message",
            "_ChunkRedactor.chunk",
            "_ChunkRedactor.rest",
            "_redacted_result",
            "CompleteReplyChatOpenAI._get_request_payload",
            "tool_results_as_user_turns",
            "_text_of",
        ),
        select="test_openai_chat or streamed_tool_call or however_the_reply_is_split or any_providers_model",
    ),
    # what counts toward an agent's message_token_budget (the tool calls the model wrote included)
    "arag_graph/run/pipeline.py": Target(
        ("tests/test_pipeline.py",),
        functions=("_text", "message_tokens", "over_token_budget"),
    ),
    "arag_graph/index/integrity.py": Target(
        ("tests/test_index_damage.py",),
        select="tagged_sorted or copy_verified or verify_sentences or vector_fingerprints or multi_mib_file "
        "or opens_under_the_index_root or sentence_digest_covers or near_zero or devices_or_fail",
    ),
    "arag_graph/evaluators/predictions.py": Target(
        ("tests/test_eval_safety.py",),
        select="out_must_be or refuses_a_link_at or the_lock_refuses or run_record_holds or names_every_changed "
        "or only_scored or fingerprint or resuming_into or rejected_file or the_writer",
    ),
    "arag_graph/run/policy.py": Target(
        ("tests/test_configuration.py",),
        functions=(
            "normalize_url",
            "chroma_endpoint",
            "ServingPolicy.from_env",
            "ServingPolicy.model",
            "ServingPolicy.base_url",
            "ServingPolicy.endpoints",
            "ServingPolicy.allows",
            "ServingPolicy.check_endpoint",
            "ServingPolicy.index_path",
            "ServingPolicy.check_index_endpoint",
            "ServingPolicy.check_index_models",
            "ServingPolicy.resolve",
            "_same_path",
        ),
        select="another_host or with_their_path or refusal or models_are_chosen or index_paths_stay "
        "or without_an_index_root or trusted or reads_the_environment or index_models_folder or resolve_fills "
        "or own_endpoints",
    ),
    "arag_graph/tools/toolkit.py": Target(
        ("tests/test_tools.py",),
        functions=("chunk_read", "retrieval_tool", "ToolOutput.artifact", "clamp_top_k", "string_list"),
        select="read or adjacent or unknown or artifact or conversation or concurrent or clamp or schemas "
        "or invalid_arguments",
        sample_index=True,
    ),
    "arag_graph/core/artifacts.py": Target(
        ("tests/test_tool_artifacts.py", "tests/test_tools.py"),
        # hand-made tool messages and a three-document index, and the tools' own read set against the
        # run's index (a small split index; not the tests on the session's sample index)
        select="tool_artifacts or read_set_is_checked",
    ),
    "arag_graph/index/layout.py": Target(
        ("tests/test_index_ownership.py",),
        functions=(
            "read_current",
            "point_current",
            "write_atomic",
            "remove_stale_builds",
            "remove_tree",
            "reading",
            "no_readers",
            "_open_readers_file",
            "legacy_build",
            "BuildRecord.read",
            "BuildRecord.owns",
            "BuildRecord.add",
            "BuildRecord.discard",
        ),
        # not the three that start processes or build a directory corpus (minutes each on a loaded machine)
        select="not indexed_into_itself and not imports_without_fcntl and not loses_the_lock",
    ),
    "arag_graph/index/write.py": Target(
        ("tests/test_index_ownership.py", "tests/test_index.py", "tests/test_index_updates.py"),
        functions=("build_locked", "_switch", "_drop_build", "_write_failure"),
        # builds of a few documents with a cheap encoder: rebuilds over foreign, linked, damaged or
        # leftover contents, builds that fail or are interrupted, updates interrupted at every step.
        # Not the SIGKILLed rebuilds of tests/test_index.py: their subprocess cannot load mutmut's
        # configuration from its working directory (the in-process interrupts cover the same steps).
        # Not the interrupted updates of an embedded Chroma store either: in mutmut's forked test
        # process Chroma's client deadlocks, so a surviving mutant would hang there and be counted
        # as a timeout (killed); the matrix updates go through the same switch.
        select="foreign_directory or foreign_current or link or adopted or accepted or leftover or killed_builds "
        "or (killed_update and matrix) or failed or disk_refuses or interrupt_after or damaged_current "
        "or returns_names or summaries_of or dropping or add_and_delete or encodes_only",
    ),
    # readers racing updates: the readers lock and following CURRENT to the new build (small indexes of a
    # hash encoder, on threads)
    "arag_graph/index/load.py": Target(
        ("tests/test_index_updates.py",),
        functions=("_load_following_current",),
        select="racing or damage_of_the_build or follows_current",
    ),
    # one rule for caps: the caller's whole input, and every request before it is sent
    "arag_graph/run/budgets.py": Target(
        ("tests/test_budgets.py",),
        functions=(
            "input_problem",
            "question_problem",
            "RunBudget._start",
            "RunBudget._request_tokens",
            "RunBudget._passes",
            "RunBudget._reached",
        ),
        select="cap or system_message or hundred_messages",
        sample_index=True,
    ),
    # the chain's length: the step cap, a run's own cap, checked last steps, fixed-length chains
    "arag_graph/corag/chain.py": Target(
        ("tests/test_corag.py", "tests/test_corag_nodes.py"),
        functions=("_cap", "retrieve_step", "check", "reformulate"),
        select="exactly_max_steps or never_sufficient or stops_early or repeated_query or new_passages "
        "or loop_similarity or test_corag_nodes",
        hotpot_index=True,
    ),
    # the decoding strategies' waves and the tree's beam, one wave at a time (and a whole greedy chain)
    "arag_graph/corag/graph.py": Target(
        ("tests/test_corag.py", "tests/test_corag_tree.py"),
        functions=("first_wave", "_finished", "_candidate_tasks", "_rollout_tasks", "_tree_step", "_queries", "_best"),
        select="exactly_max_steps or test_corag_tree",
        hotpot_index=True,
    ),
    # the page's title holds the question of `arag ask --html` as text
    "arag_graph/evaluators/html_report.py": Target(
        ("tests/test_html_report.py",),
        functions=("render", "_html_text"),
        select="hostile_question",
        sample_index=True,
    ),
    # issue 38's lows: the manifest's seal required and no URL fragment recorded; HTML read as a stream;
    # MCP HTTP sessions bounded (mapped, not yet run here)
    "arag_graph/index/manifest.py": Target(
        ("tests/test_index_damage.py", "tests/test_embedding_models.py"),
        functions=("Manifest.from_file", "Manifest.to_json", "_url_for_file"),
        # the manifest's own damage cases (unreadable, not JSON, unknown fields, wrong types, no seal, an
        # unsupported format, paths outside the build). Not the Chroma builds: an embedded Chroma client
        # deadlocks in mutmut's forked test process (a deadlocked child uses no CPU, so mutmut never times
        # it out), nor the CLI's runs in subprocesses, where mutmut's trampolines are not recorded
        select="(seal or fragment or manifest or version or format) and not chroma and not sentence_store_outside "
        "and not search_ask_and_verify and not flipped_bit",
    ),
    "arag_graph/index/corpus.py": Target(
        ("tests/test_corpus.py",),
        functions=(
            "_VisibleText.handle_starttag",
            "_VisibleText.handle_endtag",
            "_VisibleText.handle_data",
            "_html_text",
        ),
        select="html",
    ),
    # http_app itself (421 mutants with the rest) is left out: each of its mutants reruns the HTTP tests,
    # about 40 s on two shared cores, some hours in all; its guards (sessions capped and expired, the
    # rebinding check, memory released) are the selected tests below
    "arag_graph/tools/mcp_server.py": Target(
        ("tests/test_mcp.py",),
        functions=("open_sessions", "malloc_trim", "release_memory", "MemoryReturn.observe"),
        # not the test that starts `arag mcp` as a process: mutmut's trampolines are not recorded there
        select="hundred or release or malloc_trim or rebinding",
        sample_index=True,
    ),
    "arag_graph/index/keywords.py": Target(
        ("tests/test_keywords.py",),
        functions=("keyword_score", "_match_spans", "KeywordIndex.search", "_top", "_kth_largest"),
        select="not hypothesis",  # the seeded brute-force comparisons cover the same rule in a third of the time
    ),
}

_REASON_0 = (
    "equivalent: it differs only when `match.start() - 3 == cut`, and then the new cut `max(0, "
    "match.start() - 3)` is the old one"
)
_REASON_1 = (
    "equivalent: the `except ImportError` branch cannot run, httpx and openai come with langchain-openai,"
    " a dependency (the line is marked `pragma: no cover`)"
)
_REASON_2 = (
    "equivalent: the cut is at most `len(pending) - hold` (hold is at least 63) and only moves down, so a"
    " match that ends at the end of `pending` also ends after the cut: `match.end() > cut` already holds"
)
_REASON_3 = (
    "equivalent: the default of an unset variable only has to be shorter than six characters to be "
    "dropped, and `XXXX` is, as `''` is"
)
_REASON_4 = (
    "killed after the run by "
    "tests/test_secrets.py::test_describe_model_error_knows_other_clients_connection_and_cut_off_errors "
    "(error classes of other clients named like OpenAI's and httpx's, a transport error of another name, "
    "an error without a status)"
)
_REASON_5 = (
    "killed after the run by "
    "tests/test_secrets.py::test_the_stream_redactor_gives_out_everything_before_a_secret_or_key_at_once "
    "(the exact text given out for a secret or key shape at every offset, and extra secrets)"
)
_REASON_6 = (
    "killed after the run by "
    "tests/test_secrets.py::test_the_stream_redactor_holds_back_exactly_the_secrets_that_could_straddle "
    "(every offset of a plain and an overlapping secret around the cut; planted by hand, it fails)"
)

_INTEGRITY_0 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_check_file_opens_under_the_index_root_and_names_a_read_error "
    "(planted by hand, it fails)"
)
_INTEGRITY_1 = (
    "killed after the run by tests/test_index_damage.py::test_copy_verified_names_a_store_file_that_cannot_be_opened"
)
_INTEGRITY_2 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_copy_verified_copies_exactly_what_the_build_recorded (the copy is "
    "0o700, below missing directories or into an empty one; planted by hand, it fails)"
)
_INTEGRITY_3 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_copy_verified_names_tmpdir_when_the_copy_cannot_be_written (the "
    "whole line)"
)
_INTEGRITY_4 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_store_files_that_are_devices_or_fail_to_read_are_named (a character"
    " device; needs root to make)"
)
_INTEGRITY_5 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_store_files_that_are_devices_or_fail_to_read_are_named (a read that"
    " fails)"
)
_INTEGRITY_6 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_store_files_that_are_devices_or_fail_to_read_are_named (an OSError "
    "without strerror)"
)
_INTEGRITY_7 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_the_sentence_digest_covers_chunk_position_and_text_of_every_record"
)
_INTEGRITY_8 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_vector_fingerprints_near_zero_compare_within_the_absolute_tolerance"
)
_INTEGRITY_9 = "equivalent: `ensure_ascii=True` is json.dumps' default"
_INTEGRITY_10 = "equivalent: codec names are case-insensitive (`ASCII` is `ascii`)"
_INTEGRITY_11 = (
    "equivalent on every system arag runs on: Linux and macOS both define `os.O_NOFOLLOW`, so getattr's "
    "default is never used"
)
_INTEGRITY_12 = "equivalent: `read(None)` reads the rest at once: the same bytes and digest, only more memory at a time"
_INTEGRITY_13 = (
    "equivalent: np.allclose compares inf and NaN without a floating-point warning (checked with warnings"
    " as errors in test_vector_fingerprints_near_zero_compare_within_the_absolute_tolerance), so the "
    "errstate guard changes nothing today"
)
_INTEGRITY_14 = (
    "killed after the run by "
    "tests/test_index_damage.py::test_the_sentence_digest_covers_chunk_position_and_text_of_every_record "
    "(exact bytes, a lone surrogate too)"
)
_INTEGRITY_15 = "equivalent: codec names are case-insensitive (`UTF-8` is `utf-8`)"

_INTEGRITY_18 = (
    "equivalent: the fingerprint is computed in float64 instead of float32 (the vectors or the direction "
    "not cast), which moves it by float rounding only, a millionth of the 1e-3 tolerance within which every "
    "stored fingerprint is compared (`_close`); the result is cast to float32 either way"
)

_LAYOUT_0 = "equivalent: codec names are case-insensitive (`UTF-8` is `utf-8`)"
_LAYOUT_1 = (
    "equivalent: every text written this way is ASCII (build names; json.dumps escapes everything else in "
    "the record, the manifest and the store settings), which the locale's encoding, used without "
    "`encoding=`, writes byte for byte the same on every system arag runs on"
)
_LAYOUT_2 = "equivalent: `strict` is only read as a truth value, and None is as false as False"
_LAYOUT_3 = (
    "equivalent: a CURRENT longer than 4,096 bytes is refused whether 4,097, 4,098 or all of its bytes are "
    "read; only how much is read differs"
)
_LAYOUT_4 = "equivalent: `follow_symlinks=None` is false as False is: a link named like a temp file stays (tested)"

_POLICY_0 = (
    "equivalent: the default only matters when a manifest names no model, and `''`, `None` (as `'None'`) "
    "and `'XXXX'` are all no `openai:` spec, so the check returns before any URL is read"
)
_POLICY_1 = (
    "equivalent: `endpoints` tells only `'chroma'` apart; every other kind, `'embeddings'` or any other "
    "spelling, gets the base-URL list the model key may reach"
)
_POLICY_3 = "equivalent: a default of None is turned into `''` by the `or ''` that follows, as the original `''` is"
_POLICY_4 = (
    "equivalent: the fragment of the rewritten URL is dropped by normalize_url, which the result goes "
    "through next (a client never sends a fragment)"
)
_POLICY_2 = "equivalent: `inside` is only read as `not inside`, and None is as false as False"

_BUILD_0 = (
    "equivalent: `strict` is only read as a truth value, and None is as false as False (a damaged CURRENT "
    "still counts as no active build)"
)
_BUILD_1 = (
    "equivalent: the clean-up reads CURRENT only after a first build (`b.created` is read first), and such "
    "a directory's CURRENT is either absent (None either way) or the valid one this build wrote: a strict "
    "read finds no damage to raise"
)
_BUILD_2 = (
    "equivalent: a chroma setting that is missing or not a mapping is replaced by `{}` on the next line "
    "(`if not isinstance(chroma, dict)`), so None and `{}` lead to the same: no collection dropped"
)

# Why a surviving mutant cannot be killed (equivalent, or unobservable), by mutant name.
REASONS: dict[str, str] = {
    # arag_graph/corag/chain.py
    "arag_graph.corag.chain.x_check__mutmut_124": (
        "equivalent: `Sufficiency.fallback` ignores its question (not sufficient, nothing missing, confidence 0)"
    ),
    **dict.fromkeys(
        (
            "arag_graph.corag.chain.x_reformulate__mutmut_23",
            "arag_graph.corag.chain.x_reformulate__mutmut_25",
            "arag_graph.corag.chain.x_reformulate__mutmut_27",
            "arag_graph.corag.chain.x_reformulate__mutmut_32",
            "arag_graph.corag.chain.x_reformulate__mutmut_33",
        ),
        "equivalent: reformulate runs only after a step's retrieval and check, so the chain is never empty, and "
        "its last link always has `missing_info` (`_retrieve` writes every field of ChainStep)",
    ),
    # arag_graph/corag/graph.py
    "arag_graph.corag.graph.x__queries__mutmut_3": (
        "equivalent: the separator only joins a step's words, which hold no spaces, so two steps' keys are equal "
        "under `XX XX` exactly when they are under a space"
    ),
    **dict.fromkeys(
        (
            "arag_graph.corag.graph.x__tree_step__mutmut_128",
            "arag_graph.corag.graph.x__tree_step__mutmut_130",
            "arag_graph.corag.graph.x__tree_step__mutmut_133",
        ),
        "equivalent: every run in the pool has a score, a candidate from this step's `scores` and a carried "
        "path from the step that kept it (its score merged into `runs` then), so the default is never read",
    ),
    "arag_graph.corag.graph.x__tree_step__mutmut_154": (
        "equivalent: the unfinished paths a step keeps are its own candidates, all one step longer than the paths "
        "they extend, and carried paths are shorter; so a kept path at max_steps means every unfinished kept path "
        "is at max_steps too, i.e. finished, and the other half of the condition already stops the tree"
    ),
    **dict.fromkeys(
        (
            "arag_graph.corag.graph.x__tree_step__mutmut_60",
            "arag_graph.corag.graph.x__tree_step__mutmut_61",
            "arag_graph.corag.graph.x__tree_step__mutmut_62",
            "arag_graph.corag.graph.x__tree_step__mutmut_167",
            "arag_graph.corag.graph.x__tree_step__mutmut_168",
            "arag_graph.corag.graph.x__tree_step__mutmut_169",
        ),
        "equivalent: the default stands for no recursion limit (LangGraph sets `remaining_steps` inside a graph); "
        "any default above 5, 90 included, lets the tree go on",
    ),
    # arag_graph/index/load.py
    "arag_graph.index.load.x__load_following_current__mutmut_7": (
        "equivalent: the attempt numbered LOAD_ATTEMPTS returns or raises, so a loop one attempt longer never "
        "reaches its extra one"
    ),
    **dict.fromkeys(
        (
            "arag_graph.index.load.x__load_following_current__mutmut_10",
            "arag_graph.index.load.x__load_following_current__mutmut_19",
        ),
        "equivalent: below a root that is not a directory there is no CURRENT to read, and "
        "`read_current(strict=False)` "
        "answers None for it as the guard does",
    ),
    **dict.fromkeys(
        (
            "arag_graph.index.load.x__load_following_current__mutmut_12",
            "arag_graph.index.load.x__load_following_current__mutmut_21",
        ),
        "equivalent: `strict` is only tested for truth, and None is false as False is",
    ),
    **dict.fromkeys(
        (
            "arag_graph.index.load.x__load_following_current__mutmut_30",
            "arag_graph.index.load.x__load_following_current__mutmut_31",
            "arag_graph.index.load.x__load_following_current__mutmut_32",
        ),
        "equivalent: the message of an assertion no path reaches (the last attempt returns or raises)",
    ),
    # arag_graph/run/budgets.py
    "arag_graph.run.budgets.xǁRunBudgetǁ_start__mutmut_8": (
        "equivalent: `_passes` has no side effects, and when a cap is already reached the stop message and the "
        "refusal come from `reached` whatever `passes` holds"
    ),
    # arag_graph/llm/openai_chat.py
    **dict.fromkeys(
        (
            "arag_graph.llm.openai_chat.xǁ_ChunkRedactorǁrest__mutmut_23",
            "arag_graph.llm.openai_chat.xǁ_ChunkRedactorǁrest__mutmut_24",
        ),
        "equivalent: AIMessageChunk rebuilds every tool-call chunk it is given with its own "
        "`type: tool_call_chunk`, whatever the dict said (the test reads the type back)",
    ),
    **dict.fromkeys(
        (
            "arag_graph.llm.openai_chat.xǁCompleteReplyChatOpenAIǁ_get_request_payload__mutmut_42",
            "arag_graph.llm.openai_chat.xǁCompleteReplyChatOpenAIǁ_get_request_payload__mutmut_43",
        ),
        "equivalent: ChatOpenAI writes the reply limit under one name (`max_tokens` as a field and in "
        "`model_kwargs` is refused: 'Found max_tokens supplied twice'), so a payload with "
        "`max_completion_tokens` never also holds `max_tokens`",
    ),
    # arag_graph/run/pipeline.py
    "arag_graph.run.pipeline.x__text__mutmut_4": "equivalent: `ensure_ascii=None` is falsy, as False is",
    # arag_graph/index/corpus.py (the streaming HTML reader)
    "arag_graph.index.corpus.x__html_text__mutmut_2": (
        "equivalent: `typing.cast` returns its value whatever type it names"
    ),
    "arag_graph.index.corpus.xǁ_VisibleTextǁhandle_endtag__mutmut_4": (
        "equivalent: `_in_title` is only tested for truth, and None is false as False is"
    ),
    **dict.fromkeys(
        (
            "arag_graph.index.corpus.x__html_text__mutmut_7",
            "arag_graph.index.corpus.x__html_text__mutmut_9",
            "arag_graph.index.corpus.x__html_text__mutmut_10",
        ),
        "not shown: `is_html` only adds a page's <meta charset> as a hint, and the installed charset "
        "detector found the declared encoding from the bytes alone on every page tried (ISO-8859-7 Greek, "
        "windows-1252), so no test page decodes differently without it",
    ),
    # arag_graph/evaluators/html_report.py
    **dict.fromkeys(
        tuple(f"arag_graph.evaluators.html_report.x_render__mutmut_{n}" for n in (2, 10)),
        "equivalent: the template is ASCII only (no byte above 0x7F), so it reads the same in UTF-8, 'UTF-8' "
        "and any locale's ASCII-compatible encoding",
    ),
    **dict.fromkeys(
        tuple(f"arag_graph.evaluators.html_report.x_render__mutmut_{n}" for n in (34, 35, 38, 43, 44, 47)),
        "equivalent: the template holds each placeholder once, so splitting at the first, the last or "
        "at most two gives the same two parts (the data is put in after the split)",
    ),
    # arag_graph/tools/mcp_server.py
    "arag_graph.tools.mcp_server.x_malloc_trim__mutmut_14": (
        "equivalent in effect: malloc_trim's argument is the padding left at the top of the heap, and 1 "
        "byte instead of 0 gives back the same pages"
    ),
    "arag_graph.tools.mcp_server.xǁMemoryReturnǁobserve__mutmut_11": (
        "equivalent: `_pending` is only tested for truth, and None is false as False is"
    ),
    # arag_graph/index/manifest.py
    **dict.fromkeys(
        ("arag_graph.index.manifest.x__url_for_file__mutmut_5", "arag_graph.index.manifest.x__url_for_file__mutmut_8"),
        "equivalent: the part before the first '#' is the same however many times the rest is split",
    ),
    "arag_graph.index.manifest.xǁManifestǁfrom_file__mutmut_69": (
        "equivalent: a field error's location is never empty here (the data is a JSON object by then, and "
        "every error of a field names it), so the fallback '?' is never shown"
    ),
    "arag_graph.index.manifest.xǁManifestǁto_json__mutmut_27": (
        "equivalent: `dataclasses.asdict` always holds `manifest_checksum` (a field), so `pop` without a "
        "default never misses"
    ),
    **dict.fromkeys(
        tuple(f"arag_graph.index.manifest.xǁManifestǁto_json__mutmut_{n}" for n in (35, 38, 40)),
        "equivalent: the indentation of the manifest's text; it is read as JSON and sealed over the parsed "
        "record (`json_checksum`), never over the text",
    ),
    **dict.fromkeys(
        tuple(f"arag_graph.index.manifest.xǁManifestǁto_json__mutmut_{n}" for n in (36, 39, 41)),
        "equivalent: the order of the keys in the text; the record's order is already fixed (dataclass fields, "
        "then the seal), it is read as JSON and sealed over the parsed record, never over the text",
    ),
    # arag_graph/core/artifacts.py
    **dict.fromkeys(
        ("arag_graph.core.artifacts.x_read_in__mutmut_7", "arag_graph.core.artifacts.x_read_in__mutmut_9"),
        "equivalent: without an index `content` is never read (`index is None or ...` decides first), so "
        "whether it holds the message's text, `''` or `'XXXX'` changes nothing",
    ),
    "arag_graph.core.artifacts.x_read_in__mutmut_23": (
        "equivalent: `read` is an ordered set (only its keys are returned), so the value stored changes nothing"
    ),
    # arag_graph/index/write.py (the switch of index/build.py before the split of issue 33)
    "arag_graph.index.write.x__switch__mutmut_10": _BUILD_0,
    "arag_graph.index.write.x__switch__mutmut_39": _BUILD_0,
    "arag_graph.index.write.x_build_locked__mutmut_11": _BUILD_0,
    "arag_graph.index.write.x_build_locked__mutmut_13": _BUILD_1,
    "arag_graph.index.write.x_build_locked__mutmut_14": _BUILD_1,
    "arag_graph.index.write.x__drop_build__mutmut_1": _BUILD_2,
    "arag_graph.index.write.x__drop_build__mutmut_21": _BUILD_2,
    "arag_graph.index.write.x__drop_build__mutmut_23": _BUILD_2,
    # helper i27n (issue 27 item 1): arag_graph/run/policy.py, then index/layout.py and index/integrity.py
    "arag_graph.run.policy.xǁServingPolicyǁcheck_index_endpoint__mutmut_6": _POLICY_0,
    "arag_graph.run.policy.xǁServingPolicyǁcheck_index_endpoint__mutmut_12": _POLICY_0,
    "arag_graph.run.policy.xǁServingPolicyǁcheck_index_endpoint__mutmut_13": _POLICY_0,
    "arag_graph.run.policy.xǁServingPolicyǁcheck_index_endpoint__mutmut_27": _POLICY_1,
    "arag_graph.run.policy.xǁServingPolicyǁcheck_index_endpoint__mutmut_31": _POLICY_1,
    "arag_graph.run.policy.xǁServingPolicyǁcheck_index_endpoint__mutmut_32": _POLICY_1,
    "arag_graph.run.policy.xǁServingPolicyǁindex_path__mutmut_25": _POLICY_2,
    "arag_graph.run.policy.xǁServingPolicyǁcheck_index_models__mutmut_8": _POLICY_3,
    "arag_graph.run.policy.x_chroma_endpoint__mutmut_33": _POLICY_4,
    "arag_graph.run.policy.x_chroma_endpoint__mutmut_9": (
        "killed after the run by the exact refusal lines of `chroma-a:80OO` in tests/test_configuration.py::"
        "test_each_kind_of_client_reaches_only_its_own_endpoints_and_is_refused_in_one_exact_line (planted by "
        "hand, it fails)"
    ),
    # arag_graph/index/layout.py
    "arag_graph.index.layout.x_legacy_build__mutmut_3": _LAYOUT_2,
    "arag_graph.index.layout.x_point_current__mutmut_10": _LAYOUT_0,
    "arag_graph.index.layout.x_read_current__mutmut_23": _LAYOUT_0,
    "arag_graph.index.layout.x_write_atomic__mutmut_10": _LAYOUT_0,
    "arag_graph.index.layout.x_point_current__mutmut_4": _LAYOUT_1,
    "arag_graph.index.layout.x_point_current__mutmut_6": _LAYOUT_1,
    "arag_graph.index.layout.x_write_atomic__mutmut_4": _LAYOUT_1,
    "arag_graph.index.layout.x_write_atomic__mutmut_6": _LAYOUT_1,
    "arag_graph.index.layout.x_read_current__mutmut_12": _LAYOUT_3,
    "arag_graph.index.layout.x_read_current__mutmut_14": _LAYOUT_3,
    "arag_graph.index.layout.x_remove_stale_builds__mutmut_20": _LAYOUT_4,
    # arag_graph/index/integrity.py
    "arag_graph.index.integrity.x_vector_fingerprint__mutmut_3": _INTEGRITY_18,
    "arag_graph.index.integrity.x_vector_fingerprint__mutmut_5": _INTEGRITY_18,
    "arag_graph.index.integrity.x_vector_fingerprint__mutmut_16": _INTEGRITY_18,
    # --- agent/tools.py, index/keywords.py, evaluators/predictions.py ---
    **dict.fromkeys(
        (
            "arag_graph.tools.toolkit.x_retrieval_tool__mutmut_13",
            "arag_graph.tools.toolkit.x_retrieval_tool__mutmut_38",
            "arag_graph.tools.toolkit.x_retrieval_tool__mutmut_65",
        ),
        "equivalent: the tool's own default of `top_k` / `adjacent` is never used, since LangChain validates "
        "every call against the args schema and passes the schema's default (5, False) when the model "
        "leaves the argument out; the inner function is reachable only through the tool",
    ),
    **dict.fromkeys(
        (
            "arag_graph.index.keywords.x_keyword_score__mutmut_14",
            "arag_graph.index.keywords.x_keyword_score__mutmut_18",
            "arag_graph.index.keywords.x_keyword_score__mutmut_19",
        ),
        "equivalent: in substring mode `_pattern` is the escaped keyword alone (no word-start guard), and "
        "`findall` of a literal counts the same non-overlapping occurrences, left to right, as `str.count`",
    ),
    **dict.fromkeys(
        (
            "arag_graph.index.keywords.x__kth_largest__mutmut_1",
            "arag_graph.index.keywords.x__kth_largest__mutmut_2",
            "arag_graph.index.keywords.x__kth_largest__mutmut_3",
        ),
        "equivalent: the size at which the 1-in-16 sample is taken only changes the cost; whenever the "
        "sample holds more than k scores its k-th largest is a lower bound that keeps the true top k, so "
        "the k-th largest found is the same on either side of the threshold",
    ),
    "arag_graph.evaluators.predictions.x__refuse_links__mutmut_5": (
        "equivalent: `break` instead of `continue` skips `predictions/` only when `--out` itself cannot be "
        "listed as missing or not a directory, and then `predictions/` under it cannot exist either"
    ),
    "arag_graph.evaluators.predictions.x_check_resume__mutmut_10": (
        "equivalent: reading the run record of an `--out` that is not a directory finds no `run.json` "
        "(`exists()` is False for a missing one and for a path under a file), so the result is None as before"
    ),
    "arag_graph.evaluators.predictions.x__read_run_file__mutmut_6": (
        "equivalent: an unparsable run record is refused because it is not a dict, `''` as much as None"
    ),
    "arag_graph.evaluators.predictions.x__fingerprint__mutmut_25": (
        "equivalent: an index's manifest is a Manifest, a dataclass declaring every fingerprint field "
        "(each with a default), so `getattr` without a default never misses one"
    ),
    "arag_graph.evaluators.predictions.x__plan_dict__mutmut_2": (
        "equivalent: the record is written by `dumps`, whose `default=str` turns a Path into the same "
        "string `str(v)` gives"
    ),
    "arag_graph.evaluators.predictions.x_check_resume__mutmut_60": (
        "equivalent: codec names are case-insensitive, `'UTF-8'` is `'utf-8'`"
    ),
    "arag_graph.index.keywords.x__kth_largest__mutmut_5": (
        "equivalent: a sample of exactly k scores has its smallest as bound, and all k of them are in "
        "the scores kept, so the k-th largest of what is kept is still the true one"
    ),
    "arag_graph.index.keywords.x__top__mutmut_1": (
        "equivalent: with exactly top_k scores the k-th largest is the smallest, so every position is "
        "chosen (above it, or at its level up to the count left) and sorted by the same key"
    ),
    **dict.fromkeys(
        (
            "arag_graph.index.keywords.xǁKeywordIndexǁsearch__mutmut_25",
            "arag_graph.index.keywords.xǁKeywordIndexǁsearch__mutmut_26",
            "arag_graph.index.keywords.xǁKeywordIndexǁsearch__mutmut_27",
        ),
        "equivalent: the candidate count only picks the dense array or the sorted union; both give the "
        "chunks with a positive score in ascending order with the same sums, added term by term in "
        "the same order",
    ),
    "arag_graph.index.keywords.xǁKeywordIndexǁsearch__mutmut_53": (
        "equivalent: `inverse` of `np.unique` takes every value 0 .. len(chunk_ids) - 1, so `bincount` "
        "is that long without `minlength`"
    ),
    # --- end of agent/tools.py, index/keywords.py, evaluators/predictions.py ---
    "arag_graph.index.integrity.x_check_file__mutmut_5": _INTEGRITY_0,
    "arag_graph.index.integrity.x_check_file__mutmut_7": _INTEGRITY_0,
    "arag_graph.index.integrity.x_check_file__mutmut_8": _INTEGRITY_0,
    "arag_graph.index.integrity.x_check_file__mutmut_9": _INTEGRITY_0,
    "arag_graph.index.integrity.x_check_file__mutmut_10": _INTEGRITY_0,
    "arag_graph.index.integrity.x_check_file__mutmut_11": _INTEGRITY_0,
    "arag_graph.index.integrity.x_check_file__mutmut_12": _INTEGRITY_0,
    "arag_graph.index.integrity.x_file_checksum__mutmut_6": _INTEGRITY_0,
    "arag_graph.index.integrity.x__copy_file__mutmut_22": _INTEGRITY_1,
    "arag_graph.index.integrity.x__copy_file__mutmut_23": _INTEGRITY_1,
    "arag_graph.index.integrity.x__copy_file__mutmut_24": _INTEGRITY_1,
    "arag_graph.index.integrity.x__copy_file__mutmut_25": _INTEGRITY_1,
    "arag_graph.index.integrity.x__copy_file__mutmut_26": _INTEGRITY_1,
    "arag_graph.index.integrity.x_copy_verified__mutmut_18": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_19": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_20": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_21": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_22": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_24": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_25": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_26": _INTEGRITY_2,
    "arag_graph.index.integrity.x_copy_verified__mutmut_27": _INTEGRITY_3,
    "arag_graph.index.integrity.x__copy_file__mutmut_37": _INTEGRITY_4,
    "arag_graph.index.integrity.x__copy_file__mutmut_38": _INTEGRITY_4,
    "arag_graph.index.integrity.x__copy_file__mutmut_39": _INTEGRITY_4,
    "arag_graph.index.integrity.x__copy_file__mutmut_40": _INTEGRITY_4,
    "arag_graph.index.integrity.x__read__mutmut_2": _INTEGRITY_5,
    "arag_graph.index.integrity.x__read__mutmut_3": _INTEGRITY_5,
    "arag_graph.index.integrity.x__read__mutmut_4": _INTEGRITY_5,
    "arag_graph.index.integrity.x__read__mutmut_5": _INTEGRITY_5,
    "arag_graph.index.integrity.x__read__mutmut_6": _INTEGRITY_5,
    "arag_graph.index.integrity.x__copy_failure__mutmut_3": _INTEGRITY_6,
    "arag_graph.index.integrity.x__update__mutmut_1": _INTEGRITY_7,
    "arag_graph.index.integrity.x__close__mutmut_12": _INTEGRITY_8,
    "arag_graph.index.integrity.x_json_checksum__mutmut_8": _INTEGRITY_9,
    "arag_graph.index.integrity.x_json_checksum__mutmut_21": _INTEGRITY_10,
    "arag_graph.index.integrity.x__copy_file__mutmut_9": _INTEGRITY_11,
    "arag_graph.index.integrity.x__copy_file__mutmut_12": _INTEGRITY_11,
    "arag_graph.index.integrity.x__copy_file__mutmut_15": _INTEGRITY_11,
    "arag_graph.index.integrity.x__read__mutmut_1": _INTEGRITY_12,
    "arag_graph.index.integrity.x_file_checksum__mutmut_9": _INTEGRITY_12,
    "arag_graph.index.integrity.x__close__mutmut_1": _INTEGRITY_13,
    "arag_graph.index.integrity.x__update__mutmut_6": _INTEGRITY_14,
    "arag_graph.index.integrity.x__update__mutmut_9": _INTEGRITY_14,
    "arag_graph.index.integrity.x__update__mutmut_10": _INTEGRITY_14,
    "arag_graph.index.integrity.x__update__mutmut_12": _INTEGRITY_14,
    "arag_graph.index.integrity.x__update__mutmut_8": _INTEGRITY_15,
    "arag_graph.core.endpoints.x_canonical_model__mutmut_6": (
        "killed after the run by the `OpenAI:ft:gpt-4o:org` case of "
        "tests/test_endpoint_rule.py::test_canonical_model_spelling (only the first colon ends the provider)"
    ),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_12": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_14": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_15": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_21": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_32": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_34": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_35": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_40": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_41": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_42": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_43": (_REASON_6),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_45": (_REASON_5),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_50": (_REASON_5),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_59": (_REASON_5),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_64": (_REASON_5),
    "arag_graph.core.safety.xǁStreamRedactorǁflush__mutmut_6": (_REASON_5),
    "arag_graph.core.safety.x_describe_model_error__mutmut_56": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_57": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_59": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_60": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_61": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_62": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_63": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_64": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_72": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_73": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_74": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_80": (_REASON_4),
    "arag_graph.core.safety.x_describe_model_error__mutmut_81": (_REASON_4),
    "arag_graph.core.safety.x_remember_url_credentials__mutmut_8": (
        "killed after the run by tests/test_secrets.py::test_a_url_credential_of_exactly_six_characters_is_remembered"
    ),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_47": (_REASON_0),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_48": (_REASON_0),
    "arag_graph.core.safety.xǁStreamRedactorǁfeed__mutmut_51": (_REASON_2),
    "arag_graph.core.safety.x__unreachable__mutmut_1": (_REASON_1),
    "arag_graph.core.safety.x_secrets_in_env__mutmut_5": (_REASON_3),
    "arag_graph.core.endpoints.x_client_endpoint__mutmut_35": (
        "equivalent: `holders[:2]` appends `root_client` again after the others, but `root_client` is "
        "already the first holder read, so reading it a second time can find nothing new"
    ),
}

# What happened after a module's last run (tests added against its survivors, not yet re-counted).
MODULE_NOTES: dict[str, str] = {
    "arag_graph/index/load.py": (
        "The follow-up of a load whose build was replaced (`_load_following_current`), against the 50-search race "
        "and unit tests with a scripted load (tests/test_index_updates.py, `follows_current`): 24 of 32 killed; the "
        "8 left are equivalent (below): a loop bound one longer that the last attempt never lets run, `strict=None` "
        "for False, `root.is_dir() or True` where no CURRENT can be read anyway, and the text of an unreachable "
        "assertion. Every mutant that changes behaviour is killed."
    ),
    "arag_graph/corag/chain.py": (
        "Rerun after unit tests of the chain's nodes (tests/test_corag_nodes.py: `retrieve_step`, `check` and "
        "`reformulate` on hand-written chain states, each reply, fallback and failure and what it writes: the "
        "link's fields in one line, the confidence or logprob penalty, the warnings kept and added, the stops, "
        "the temperature and what is missing in a sampled reformulation, the sample number reaching the "
        "offline policy, the `chain_step` event). The first run, with the chain-length tests alone, killed 239 "
        "of 354 (68%). Now 348 of 354 (98%); the 6 left are equivalent (below)."
    ),
    "arag_graph/corag/graph.py": (
        "The decoding strategies' first wave and the tree search's step (`first_wave`, `_finished`, "
        "`_candidate_tasks`, `_rollout_tasks`, `_tree_step`, `_queries`, `_best`), against unit tests that run "
        "one wave at a time on chain runs written by hand (tests/test_corag_tree.py: every field of every task, "
        "which paths are finished, the scores with and without rollouts, ties, paths that searched the same "
        "words, finished paths carried in the beam, the recursion limit's boundary, the answering path) and a "
        "greedy chain at exactly max_steps. Its first run, with the chain-length test alone, was stopped after "
        "about 40 minutes; the first with the unit tests killed 395 of 417. Now 406 of 417 (97%); the 11 left "
        "are equivalent (below)."
    ),
    "arag_graph/run/budgets.py": (
        "Rerun after unit tests against the first run's 44 survivors (103 of 147 then, 70%): tests/test_budgets.py's "
        "`test_cap_*` drive `RunBudget` one request at a time, with an input price of $1 a token so the sums stay "
        "exact: each cap at exactly its limit and one token (or a millionth of a dollar) past it, used tokens as "
        "input plus output, the tool schemas counted as part of a request, a request tokenized only when it could "
        "pass a cap, a refused request leaving room for a smaller one, the prompt counted when the provider "
        "reports no usage, a streamed reply at exactly its limit, the whole input's size and the refusals' text. "
        "146 of 147 killed (99%); the one left is equivalent (below)."
    ),
    "arag_graph/core/artifacts.py": (
        "The checked reader of a tool message's artifact (`artifact_of`) and the read set (`read_in`), the "
        "whole module, against unit tests on hand-made tool messages (tests/test_tool_artifacts.py: every "
        "field at its type and bounds, anything but a tool message's dict read as empty, the read set in "
        "order and, with the run's index, only chunks whose text the message holds) and the tools' read set "
        "against the run's own index. 98 of 101 killed (97%); the 3 left are equivalent (below). Rerun under "
        "this path (the code was arag_graph/llm/tool_artifacts.py): the same 98 of 101."
    ),
    "arag_graph/index/write.py": (
        "Run under this path since the split of issue 33 moved the switch here from index/build.py "
        "(`_build_locked` is `build_locked` now, every body unchanged). Only the switch is mutated, split off "
        "from writing the build's files (`_write_build`, not mutated): "
        "`_build_locked` (what a failed build leaves: the one-line write error, no directory of a failed "
        "first build), `_switch` (stale builds removed, the new build recorded before it exists, CURRENT "
        "pointed at it once it is complete, a failed build dropped and discarded), `_drop_build` (a server "
        "collection dropped only when named for its build) and `_write_failure`. Left out of the selection: "
        "the SIGKILLed rebuilds of tests/test_index.py (their subprocess cannot load mutmut's configuration) "
        "and the interrupted updates of an embedded Chroma store, whose client deadlocks in mutmut's forked "
        "test process (a first run counted the 9 mutants that got that far as timeouts, none as surviving); "
        "the interrupted matrix updates go through the same switch. Writing the tests found a real bug: an "
        "interrupt after CURRENT was renamed to the new build (in the directory's fsync) dropped that build "
        "and left CURRENT naming nothing (fixed: a failed build is dropped only while CURRENT does not name "
        "it; test_an_interrupt_after_current_is_replaced_leaves_the_new_build_answering). The run before "
        "this one left 9 survivors; one was no equivalent (OSError no longer passed over when a build's "
        "manifest cannot be read) and is killed by the `manifest-unreadable` case of "
        "test_dropping_a_build_drops_the_server_collection_named_for_it_and_no_other. Rerun: 124 of 132 "
        "killed (94%), the 8 left equivalent (below). Run again under this path (issue 38): the same 124 of "
        "132, the same 8 survivors."
    ),
    # --- agent/tools.py, index/keywords.py, evaluators/predictions.py ---
    "arag_graph/index/keywords.py": (
        "The brute-force comparisons driven by hypothesis are left out (`-k 'not hypothesis'`): the seeded "
        "ones check the same rule in a third of the time. Counted again after tests against the first "
        "run's 24 survivors (154 of 178 then): 159 of 178 (89%), all 19 left equivalent. 7 of those were "
        "code that does nothing, now removed: `_top`'s `chunk_ids` argument (never read), the float64 "
        "given to `np.zeros` (its default) and the offset map's pre-filled list and end entry in "
        "`_match_spans` (built as one comprehension now, whenever lower-casing changed a length). Rerun: "
        "149 of 161 killed (93%); the 12 left are equivalent, cost choices of the search (dense array or "
        "sorted union, the sampling threshold of `_kth_largest`), `str.count` against the same count by a "
        "literal pattern, and a `minlength` that is always met."
    ),
    # --- end of agent/tools.py, index/keywords.py, evaluators/predictions.py ---
    "arag_graph/index/integrity.py": (
        "Finished (all 410 mutants; the first run stopped at 300) after tests against its survivors: a read "
        "that fails midway through copy_verified (an injected EIO: the damage line names the file and the "
        "index), the pinned fingerprint of a fixed vector (the fixed direction's seed and unit length are part "
        "of the index format), float32 fingerprints of empty input, no numpy warning on an overflowing vector, "
        "chunk IDs cut to 40 characters in verify_sentences' line. 398 of 410 killed (97%); the 12 left are "
        "equivalent (below)."
    ),
    "arag_graph/evaluators/predictions.py": (
        "Counted again after tests against the first run's 34 survivors (222 of 228): the 6 left are equivalent. "
        "Rerun under this path (it was evaluators/predictions.py before evaluators/ moved into arag_graph/): "
        "the same 222 of 228."
    ),
    "arag_graph/evaluators/html_report.py": (
        "The page's title and data (issue 38: `arag ask --html` writes the question into `<title>`). First "
        "run: 63 of 97 (65%); the one selected test read the title as HTML but no exact escape and not the "
        "data's placement. Tests added (the title escaped exactly, and the page read back: first-view JSON, "
        "the packed steps and snippets, placeholders replaced once), each planted mutant failing them: 89 "
        "of 97 killed (92%), the 8 left equivalent (below)."
    ),
    "arag_graph/llm/openai_chat.py": (
        "First run (issue 38): 89 of 186 (48%); the four selected tests checked streamed text and tool-call "
        "arguments, not a structured reply's `parsed`, `llm_output` or `generation_info`. Writing the tests "
        "that check them (tests/test_openai_chat.py) found a leak: a pydantic `parsed` was decoded but never "
        "redacted (scrub() does not look inside objects), fixed. With them: 169 of 187, then, after tests "
        "for the 18 left (each planted mutant failing them), 185 of 187 killed (99%), the 2 left equivalent. "
        "Rerun with the request payload (`_get_request_payload`: null text, the reply limit's name, tool "
        "results as user turns) and `tool_results_as_user_turns` mutated too: 297 of 316 first, then, after "
        "tests of every content shape, an assistant turn's own text and the stop words, 312 of 316 (99%), "
        "the 4 left equivalent (below)."
    ),
    "arag_graph/run/pipeline.py": (
        "What counts toward an agent's `message_token_budget` (`_text`, `message_tokens`, "
        "`over_token_budget`), against tests/test_pipeline.py: the exact text of a turn's calls, valid and "
        "not, and the character shortcut at exactly the budget. First run 23 of 43 (its tests checked only "
        "that calls count at all); then 37 of 43; with exact-text tests of `_text`, 39 of 43. Rerun after "
        "`_text` lost a branch no message reaches and a join of the text alone: 36 of 37 (97%), the one left "
        "equivalent (below)."
    ),
    "arag_graph/tools/mcp_server.py": (
        "The memory given back after sessions end (issue 38: `MemoryReturn.observe`, `release_memory`, "
        "`malloc_trim`) and the open-session count; `http_app` is not mutated (see MODULES). First run: 29 "
        "of 32; one survivor was a gap, `release_memory` not calling the trim passed every test (a test now "
        "checks it, and fails with the mutant planted by hand). Rerun: 30 of 32 killed (94%), the 2 left "
        "equivalent (below)."
    ),
    "arag_graph/index/manifest.py": (
        "The manifest's reader and writer: its damage cases (the matrix build's), the seal, the URL rule. The "
        "first run of this module selected only the seal and fragment tests and mutated nothing else well: 75 "
        "of 146 (51%); the selection then took in the manifest's own damage cases, 116 of 146 (79%). Tests "
        "written against the 30 left: every line of `from_file` whole (a read that fails after the open, "
        "with and without strerror; an unsupported format of any size; a 50-character unknown field; a "
        "nested wrong type; no `format_version` read as the current format), a Chroma URL in the manifest "
        "and a fragment with a second '#'. Each planted by hand fails them. The Chroma cases are left out: "
        "an embedded Chroma client deadlocks in mutmut's forked test process, and a deadlocked child uses "
        "no CPU, so mutmut (whose timeout is CPU time) never ends it; before the module fixture built each "
        "store on first use, even matrix cases built the Chroma store and hung. Rerun: 136 of 146 killed "
        "(93%), the 10 left equivalent (below)."
    ),
    "arag_graph/core/safety.py": (
        "Rerun after the tests added against the first run's 35 survivors (the selection now includes "
        "`could_straddle` and `other_clients`, the tests written for them): 231 of 236 killed (98%). The 5 "
        "left are equivalent (below). Writing those tests found a real bug: `_seconds_waited` read httpx's "
        "`request` property outside its `try`, so a timeout exception without its request escaped "
        "`describe_model_error` as a RuntimeError (fixed)."
    ),
    "arag_graph/core/endpoints.py": (
        "One survivor is killed by a test case added after the run, one is equivalent: 88 of 89 once rerun."
    ),
    "arag_graph/index/layout.py": (
        "Rerun after fast unit tests in tests/test_index_ownership.py (no build: CURRENT, the ownership "
        "record, an earlier version's index and stale builds on files written by hand; a read, a directory "
        "fsync, a listing and a delete that fail, injected). The first run (149 of 172, 87%) found that a "
        "CURRENT was judged by its first 4,097 bytes only, so a build name followed by 4 KiB of blanks and "
        "anything after was accepted (fixed: a CURRENT over 4,096 bytes is damage). 166 of 177 killed (94%); "
        "the 11 left are equivalent (below). The three tests that start processes or index a directory "
        "corpus (minutes each on a loaded machine) are left out of the selection."
    ),
    "arag_graph/run/policy.py": (
        "Rerun after fast tests in tests/test_configuration.py reached what the first run left unchecked or "
        "uncovered: check_index_models (each root, links to roots, the default index in any spelling, the "
        "endpoint checked first, nothing read from the working directory), resolve, _same_path, "
        "check_endpoint's exact lines per client kind, the Chroma list from both settings and Chroma's "
        "spellings, OpenAI's API implied only without a default; those functions are now mutated too (362 "
        "mutants, up from 264, none uncovered). One survivor was a real bug: a Chroma URL whose port is no "
        "number was silently allowed as port 8000 (fixed: refused). 352 of 362 killed (97%), one more killed "
        "by a test added after the run (353, 98%), the 9 left equivalent (below)."
    ),
}

# mutmut's exit codes of a mutant's test run
KILLED, SURVIVED, NO_TESTS, TIMEOUT = {1, 3, 37}, {0}, {5, 33}, {36, 24, -24, 152, 255}


def copy_repo(dest: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, target)


# Imported by mutmut's fork server before it forks a child per mutant (``forkserver_warmup = "import"``):
# the sample index and its encoder, loaded once there, are in every child's memory (load_index's
# per-process cache), so a mutant's test run neither loads the model nor opens the index again.
WARMUP = """\
import os

from arag_graph.index.load import load_index

load_index(os.environ["ARAG_TEST_SAMPLE_INDEX"], cache=True).embeddings.model
"""


def configure(work: Path, module: str, tests: list[str], *, sample_index: bool = False) -> None:
    source = module.split("/")[0] + "/"
    with (work / "pyproject.toml").open("a", encoding="utf-8") as fh:
        fh.write(
            "\n[tool.mutmut]\n"
            f"source_paths = [{source!r}]\n"
            f"only_mutate = [{module!r}]\n"
            f"pytest_add_cli_args_test_selection = {json.dumps(tests)}\n"
            # one process: mutmut collects which tests reach which function in the process it starts
            'pytest_add_cli_args = ["-p", "no:cacheprovider", "-n", "0", "-q", "-x", "-m", "not slow"]\n'
            "use_git_change_detection = false\n"
            # mutmut times a mutant out at 15 × the tests' clean durations + this constant, and those
            # durations leave out fixtures (an index built per forked run): with its default of 1 s, a
            # surviving mutant whose tests build an index timed out, and a timeout counts as killed
            "timeout_constant = 120.0\n"
        )
        also_copy = ["data/"]  # tests read the repository's data/ next to tests/ (tests.conftest.data_file)
        if sample_index:
            (work / "mutation_warmup.py").write_text(WARMUP, encoding="utf-8")
            modules = [t.removesuffix(".py").replace("/", ".") for t in tests if t.endswith(".py")]
            preload = ["mutation_warmup", *modules]
            (work / "mutation_warmup.txt").write_text("\n".join(preload) + "\n", encoding="utf-8")
            also_copy.append("mutation_warmup.py")
            fh.write(f'forkserver_warmup = "import"\npreload_modules_file = {str(work / "mutation_warmup.txt")!r}\n')
        fh.write(f"also_copy = {json.dumps(also_copy)}\n")
    subprocess.run(["git", "init", "-q", "."], cwd=work, check=True)


def run_module(module: str, max_children: int) -> dict[str, Any]:
    target = MODULES[module]
    tests = target.pytest_args()
    patterns = target.patterns(module)
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    with tempfile.TemporaryDirectory(prefix="arag-mutation-") as tmp:
        work = Path(tmp)
        copy_repo(work)
        configure(work, module, tests, sample_index=target.sample_index)
        started = time.time()
        log = RESULTS / f"mutation-{Path(module).stem}.log"
        RESULTS.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if target.sample_index:
            # Built once with the unmutated code: every mutant's run loads it instead of encoding the
            # sample again (minutes per mutant on a loaded machine).
            env["ARAG_TEST_SAMPLE_INDEX"] = str(work / "sample-index")
            build = "from arag_graph.index.sample import ensure_sample_index as e; import sys; e(sys.argv[1])"
            subprocess.run([sys.executable, "-c", build, env["ARAG_TEST_SAMPLE_INDEX"]], cwd=REPO, check=True)
        if target.hotpot_index:
            env["ARAG_TEST_HOTPOT_INDEX"] = str(work / "hotpot-index")
            (work / "hotpot-slice").mkdir()
            build = (
                "import sys; from pathlib import Path; from tests.conftest import build_hotpot_index, "
                "write_hotpot_slice; build_hotpot_index(write_hotpot_slice(Path(sys.argv[1]))[0], Path(sys.argv[2]))"
            )
            argv = [sys.executable, "-c", build, str(work / "hotpot-slice"), env["ARAG_TEST_HOTPOT_INDEX"]]
            subprocess.run(argv, cwd=REPO, check=True)
        with log.open("w", encoding="utf-8") as fh:
            command = [mutmut, "run", "--max-children", str(max_children), *patterns]
            subprocess.run(command, cwd=work, stdout=fh, stderr=fh, env=env)
        meta_path = work / "mutants" / f"{module}.meta"
        codes: dict[str, int | None] = {}
        if meta_path.exists():
            codes = json.loads(meta_path.read_text())["exit_code_by_key"]
        if patterns:  # the mutants of the guarding functions only; the rest were not run
            codes = {k: c for k, c in codes.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}
        if not codes or any(c is None for c in codes.values()):
            raise SystemExit(f"mutmut did not finish {module}: see {log}")
        log.unlink()
        survivors = sorted(k for k, c in codes.items() if c in SURVIVED)
        timeouts = sorted(k for k, c in codes.items() if c in TIMEOUT)
        diffs = {}
        for name in survivors:
            shown = subprocess.run([mutmut, "show", name], cwd=work, capture_output=True, text=True).stdout
            diffs[name] = "\n".join(
                line for line in shown.splitlines() if line[:1] in "+-@" and line[:3] not in ("---", "+++")
            )
        return {
            "module": module,
            "tests": target.shown(),
            "functions": list(target.functions),
            "command": f"python bench/mutation.py {module} --max-children {max_children}",
            "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "seconds": round(time.time() - started),
            "generated": len(codes),
            "killed": sum(c in KILLED for c in codes.values()),  # type: ignore[operator]
            "timeout": sum(c in TIMEOUT for c in codes.values()),
            "survived": len(survivors),
            "no_tests": sum(c in NO_TESTS for c in codes.values()),
            "other": sum(c not in KILLED | SURVIVED | NO_TESTS | TIMEOUT for c in codes.values()),
            "survivors": diffs,
            "timeouts": timeouts,
        }


def render(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "# Mutation testing of the critical modules",
        "",
        "Written by `bench/mutation.py` (mutmut 3.8.1, with the workers each row's command names), each",
        "module against the fast tests that cover it, narrowed with `-k` to the tests that call its guarding",
        "code directly (no server, no real index where the guard does not need one). Where a module is large",
        "only its guarding functions are mutated (listed in its section). Killed counts timeouts as killed;",
        "*not covered* are mutants in functions none of the selected tests calls (mutmut does not run them):",
        "they count as not killed. *Explained* are survivors either killed by a test added after the run or",
        "equivalent (each with its reason below). Target: 90% killed per module.",
        "",
        "| module | tests | generated | killed | survived | explained | not covered | killed % | command |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    current, stale = split_stale(results)
    for module in MODULES:
        r = current.get(module)
        if not (REPO / module).is_file():
            lines.append(f"| `{module}` | {MODULES[module].shown()} | file missing: update MODULES | | | | | | |")
            continue
        if r is None:
            command = f"`python bench/mutation.py {module}`"
            lines.append(f"| `{module}` | {MODULES[module].shown()} | not yet run | | | | | | {command} |")
            continue
        killed = r["killed"] + r["timeout"]
        tests = r["tests"] if isinstance(r["tests"], str) else ", ".join(r["tests"])
        share = 100 * killed / r["generated"] if r["generated"] else 0
        explained = sum(name in REASONS for name in r["survivors"])
        lines.append(
            f"| `{module}` | {tests} | {r['generated']} | {killed} | {r['survived']} | {explained} | "
            f"{r['no_tests']} | {share:.0f}% | `{r['command']}` ({r['finished']}, {r['seconds']} s) |"
        )
    for module, r in sorted(current.items(), key=lambda item: list(MODULES).index(item[0])):
        lines += ["", f"## {module}", "", f"Command: `{r['command']}` (mutmut 3.8.1)", ""]
        if r.get("functions"):
            lines += [f"Mutated only the guarding functions: {', '.join(f'`{f}`' for f in r['functions'])}.", ""]
        if module in MODULE_NOTES:
            lines += [MODULE_NOTES[module], ""]
        if r.get("timeouts"):  # counted as killed: a mutant that makes a test hang is caught by it
            lines += [f"Timed out (counted as killed): {', '.join(f'`{name}`' for name in r['timeouts'])}.", ""]
        for name, diff in r["survivors"].items():
            reason = REASONS.get(name, "not yet triaged: a test to kill it, or the reason it is equivalent, is owed")
            lines += [f"- `{name}`: {reason}", "", "```diff", diff, "```", ""]
    if stale:
        lines += [
            "",
            "## Stale results",
            "",
            "Stored in mutation.json for a module that is no longer mapped or no longer exists (moved or",
            "renamed): not counted above and not current. Run the module under its new path and drop the key.",
            "",
            "| stored module | why stale | generated | killed | survived | finished |",
            "| --- | --- | ---: | ---: | ---: | --- |",
        ]
        for module, (why, r) in stale.items():
            killed = r.get("killed", 0) + r.get("timeout", 0)
            lines.append(
                f"| `{module}` | {why} | {r.get('generated', '?')} | {killed} | {r.get('survived', '?')} | "
                f"{r.get('finished', '?')} |"
            )
    return "\n".join(lines) + "\n"


def split_stale(results: dict[str, dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[str, Any]]]:
    """The stored results of modules still mapped and present, and the others with why they are stale.

    A module moved or renamed leaves its old key in mutation.json; rendered with the current ones, its
    survivors looked like open work of a module the table calls "not yet run" under its new name."""
    current: dict[str, dict[str, Any]] = {}
    stale: dict[str, tuple[str, Any]] = {}
    for module, r in results.items():
        if module not in MODULES:
            stale[module] = ("no longer in MODULES" if (REPO / module).is_file() else "file no longer exists", r)
        elif not (REPO / module).is_file():
            stale[module] = ("file no longer exists", r)
        else:
            current[module] = r
    return current, stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"modules to mutate (default: all of {', '.join(MODULES)})")
    parser.add_argument("--max-children", type=int, default=1, help="parallel test processes (default 1)")
    parser.add_argument("--render", action="store_true", help="only rewrite mutation.md from mutation.json")
    args = parser.parse_args(argv)
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {unknown}; choose from {list(MODULES)}")
    store = RESULTS / "mutation.json"
    results: dict[str, dict[str, Any]] = json.loads(store.read_text()) if store.exists() else {}
    if args.render:
        (RESULTS / "mutation.md").write_text(render(results), encoding="utf-8")
        return 0
    for module in args.modules or list(MODULES):
        print(f"mutating {module} against {MODULES[module].shown()}", flush=True)
        result = run_module(module, args.max_children)
        # Read again before merging: another run (of other modules) may have written since this one began.
        results = json.loads(store.read_text()) if store.exists() else {}
        results[module] = result
        RESULTS.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(results, indent=2) + "\n")
        (RESULTS / "mutation.md").write_text(render(results), encoding="utf-8")
        r = results[module]
        print(
            f"  {r['generated']} mutants: {r['killed']} killed, {r['survived']} survived, {r['no_tests']} not covered"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
