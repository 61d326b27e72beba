"""Profiles: the package's defaults (``package``) or the papers' settings (``paper``), one switch apart.

The package's defaults differ from the papers where a measurement (or a clear cost) argued for it:
word-prefix keyword matching answers from an inverted index, contextual headers help BM25 and
keyword search, and so on. A reproduction needs the papers' behaviour instead, without hunting
for the flags. :data:`DEVIATIONS` and the rows each graph family keeps beside its context schema
list those differences: for each setting, the package default, the paper's value, the reason the
package differs, and the switch that reverts it by hand. ``--profile paper`` (``arag index``,
``ask``, ``eval``, ``reproduce``) and the ``profile`` context field of every graph apply the
paper's values from these rows; nothing else in the package names them.
``docs/guide/reproducing.md``'s deviation table is generated from them (:func:`deviation_table` of
:func:`arag_graph.registry.deviations`) and a test checks that the two are equal. A graph family's
own rows sit beside its context schema and name it by class, which the layer test sees.

Where a setting applies:

* ``index``: chosen when an index is built (``arag index``, or the index ``arag eval`` builds);
  the manifest records the profile, and an evaluation checks the index's settings against it.
* ``run``: a field of a graph's context schema; the paper profile fills it when the run does not
  set it (a value set explicitly, ``--max-steps 5`` or a served caller's field, wins). It only
  selects among values the schema allows, so a served run may ask for it.
* ``eval``: a setting of the evaluation (the judge model).
* ``none``: a difference no switch can revert here (a model the package cannot download, a
  fine-tuned model the paper trained); listed so the table is complete, never applied.

A new setting that deviates from a paper gets its row here (or, if one family has it, beside that
family's context schema), in the same change that adds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from arag_graph.core.errors import AragError

__all__ = [
    "ARAGOG_PAPER",
    "ARAG_PAPER",
    "CORAG_PAPER",
    "DEFAULT_PROFILE",
    "DEVIATIONS",
    "PROFILES",
    "SRAG_PAPER",
    "Deviation",
    "Profile",
    "check_profile",
    "deviation_table",
    "eval_value",
    "index_values",
    "run_values",
]

Profile = Literal["package", "paper"]
PROFILES: tuple[str, ...] = ("package", "paper")
DEFAULT_PROFILE: Profile = "package"

Scope = Literal["index", "run", "eval", "none"]


@dataclass(frozen=True)
class Deviation:
    """One setting whose package default is not what a paper did (or is pinned to what it did)."""

    setting: str
    """The setting's name: a ``BuildOptions`` field (index), a context field (run), an evaluation option."""
    scope: Scope
    package: Any
    """The package's default."""
    paper: Any
    """What the paper did; the value the ``paper`` profile applies (``scope="none"``: not applied)."""
    paper_source: str
    """Which paper, and where in it (or in our notes, ``papers.md``) the value comes from."""
    reason: str
    """Why the package's default differs: the measurement or the cost that justified it."""
    switch: str
    """How to get the paper's behaviour by hand (besides ``--profile paper``)."""
    contexts: tuple[type, ...] = ()
    """run scope: the context schemas it applies to, by class (a family's own rows sit beside its schema,
    ``arag/context.py``, ``corag/context.py``); empty: every schema with the field."""

    @property
    def differs(self) -> bool:
        """Whether the package's default is not the paper's (otherwise the profile only pins it)."""
        return self.package != self.paper


ARAG_PAPER = "A-RAG (Du et al., 2026)"
CORAG_PAPER = "CoRAG (Wang et al., 2025)"
SRAG_PAPER = "SRAG (arXiv 2412.04235)"
ARAGOG_PAPER = "ARAGOG (Blagaj et al., 2024)"

DEVIATIONS: tuple[Deviation, ...] = (
    Deviation(
        setting="keyword_match",
        scope="index",
        package="word",
        paper="substring",
        paper_source=f"{ARAG_PAPER}, keyword_search: case-insensitive count(k, text) x len(k)",
        reason="word-prefix matching answers from an inverted index (about 1 ms at 200,000 passages instead of a "
        "scan) and finds the gold passages as often: keyword_search recall@5 0.50 (word) vs 0.49 (substring) "
        "on HotpotQA-100 (bench/results/quality.md)",
        switch="arag index --keyword-match substring",
    ),
    Deviation(
        setting="contextual_headers",
        scope="index",
        package=True,
        paper=False,
        paper_source=f"{ARAG_PAPER}, index: bare sentences embedded, keywords matched in the chunk text",
        reason="titles help the lexical searches: on HotpotQA-100 keyword_search recall@5 0.605 vs 0.50 and "
        "BM25 0.755 vs 0.695 with headers, semantic_search unchanged at 0.765 (bench/results/quality.md)",
        switch="arag index --no-contextual-headers",
    ),
    Deviation(
        setting="embedding",
        scope="none",
        package="all-MiniLM-L6-v2 (packaged)",
        paper="Qwen3-Embedding-0.6B",
        paper_source=f"{ARAG_PAPER}, settings (the same encoder for every method)",
        reason="the package ships a small encoder and never downloads one; recall@5 0.765 on HotpotQA-100 "
        "(bench/results/quality.md). The profile cannot switch it",
        switch="arag index --embedding PATH (a local Qwen3-Embedding-0.6B folder)",
    ),
    Deviation(
        setting="max_tokens",
        scope="run",
        package=16_384,
        paper=16_384,
        paper_source=f"{ARAG_PAPER}, settings: max_tokens >= 16384",
        reason="same as the paper; pinned for every graph",
        switch="--set max_tokens=16384",
    ),
    Deviation(
        setting="top_k",
        scope="run",
        package=5,
        paper=5,
        paper_source=f"{ARAG_PAPER}, settings: top-k = 5 for every method",
        reason="same as the paper; pinned for every graph",
        switch="--top-k 5",
    ),
    Deviation(
        setting="judge",
        scope="eval",
        package=None,
        paper="gpt-5-mini",
        paper_source=f"{ARAG_PAPER}, evaluation: GPT-5-mini judges LLM-Acc for every method, after human verification",
        reason="a judge costs a model call per question and needs a key, so none runs unless asked (LLM-Acc is "
        "then reported unavailable, never estimated); the paper profile uses the paper's judge whenever the "
        "model is not the offline policy",
        switch="--judge gpt-5-mini",
    ),
    Deviation(
        setting="window",
        scope="run",
        package=3,
        paper=3,
        paper_source=f"{ARAGOG_PAPER}, sentence window: 3 sentences was best",
        reason="same as the paper; pinned",
        switch="--set window=3",
    ),
    Deviation(
        setting="merge_threshold",
        scope="run",
        package=0.5,
        paper=0.5,
        paper_source=f"{ARAGOG_PAPER}, auto-merging: default threshold 0.5",
        reason="same as the paper; pinned",
        switch="--set merge_threshold=0.5",
    ),
    Deviation(
        setting="decomposer and triplet extractor",
        scope="none",
        package="zero-shot prompts",
        paper="fine-tuned models",
        paper_source=f"{SRAG_PAPER}, method (its notes allow zero-shot prompting instead)",
        reason="no fine-tuned model ships with the package; the prompts are in arag_graph/srag/prompts.py",
        switch="none (give a fine-tuned model with --model)",
    ),
)
"""The settings the ``paper`` profile applies or pins for every graph, and the differences it cannot revert.

A graph family's own rows (A-RAG's step cap, CoRAG's loop rule) live with its context schema, which
names them in :meth:`~arag_graph.run.configuration.GraphContext.paper_profile`;
:func:`arag_graph.registry.deviations` is the whole list, as the docs' table shows it."""


def check_profile(profile: str | None, flag: str = "--profile") -> Profile:
    """``profile`` checked (None: the default); one line naming the profiles otherwise."""
    if profile is None:
        return DEFAULT_PROFILE
    name = str(profile).strip().lower()
    if name not in PROFILES:
        raise AragError(f"{flag} {str(profile)[:40]!r} is not a profile; choose {' or '.join(PROFILES)}")
    return name  # type: ignore[return-value]


def index_values(profile: str | None) -> dict[str, Any]:
    """The index settings a profile chooses (``keyword_match``, ``contextual_headers``); empty for ``package``."""
    if check_profile(profile) != "paper":
        return {}
    return {d.setting: d.paper for d in DEVIATIONS if d.scope == "index"}


def run_values(profile: str | None, schema: type, deviations: Iterable[Deviation] = DEVIATIONS) -> dict[str, Any]:
    """The context values the ``paper`` profile gives ``schema`` (a context class) from ``deviations``.

    A row applies when it is run-scoped, names one of the schema's fields and either names no
    schema or names this class itself.
    """
    if check_profile(profile) != "paper":
        return {}
    names = set(getattr(schema, "model_fields", ()))
    return {
        d.setting: d.paper
        for d in deviations
        if d.scope == "run" and d.setting in names and (not d.contexts or schema in d.contexts)
    }


def eval_value(profile: str | None, setting: str) -> Any:
    """The evaluation setting (``judge``) the ``paper`` profile gives; None for ``package``."""
    if check_profile(profile) != "paper":
        return None
    return next((d.paper for d in DEVIATIONS if d.scope == "eval" and d.setting == setting), None)


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int) and value >= 10_000:
        return f"{value:,}"
    return str(value)


def deviation_table(deviations: Iterable[Deviation] = DEVIATIONS) -> str:
    """The Markdown table of the docs (``docs/guide/reproducing.md``): differences first, then pinned values."""
    rows = list(deviations)
    head = "| setting | where | package default | paper | paper, where | why the package differs | switch |"
    lines = [head, "|---|---|---|---|---|---|---|"]
    for d in sorted(rows, key=lambda d: not d.differs):
        where = {"index": "index", "run": "run", "eval": "evaluation", "none": "not switchable"}[d.scope]
        if d.contexts:
            where += " (" + ", ".join(c.__name__ for c in d.contexts) + ")"
        cells = [
            f"`{d.setting}`",
            where,
            _shown(d.package),
            _shown(d.paper),
            d.paper_source,
            d.reason,
            f"`{d.switch}`" if d.scope != "none" else d.switch,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)
