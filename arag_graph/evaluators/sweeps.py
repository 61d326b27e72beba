"""Sweeps: one evaluation over several values of a setting (``--set reasoning_effort=minimal,low,high``).

``--max-steps 5,10,15,20`` sweeps the step cap; ``--set KEY=V1,V2,...`` sweeps any other setting a
chosen graph has: ``reasoning_effort``, a tool set, naive_rag's ``retriever``, CoRAG's ``n`` and
``beam`` once CoRAG has them. Nothing here names a setting: what a graph's configuration schema
declares decides. A comma list is a sweep unless the field is free text (``system_prompt``), whose
commas are the user's. Several sweeps in one run multiply (every combination runs). A graph
without the swept setting runs once, as without the sweep.

The values are checked and coerced by each graph's own configuration class before any work
(``n=2`` becomes the integer 2, so plots and tables sort it as a number), and keep the order they
were given in: that is the order of the summary's rows and of the plot's axis.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from arag_graph.registry import config_for, get_graph_spec

__all__ = ["combinations", "split_settings"]


def _free_text(key: str, graphs: Sequence[str]) -> bool:
    """Whether ``key`` is a plain text field (its commas belong to the value) in the first graph that has it."""
    for name in graphs:
        field = get_graph_spec(name).config.model_fields.get(key)
        if field is not None:
            return field.annotation is str
    return True  # no graph has it: check_settings reports that, unsplit


def _values(raw: Any) -> list[Any] | None:
    """The values of a sweep (a list, or comma-separated text); None for a single value."""
    if isinstance(raw, (list, tuple)):
        return list(raw)
    if isinstance(raw, str) and "," in raw:
        return [part.strip() for part in raw.split(",")]
    return None


def _coerced(key: str, values: Iterable[Any], graphs: Sequence[str], fixed: Mapping[str, Any]) -> list[Any]:
    """Each value checked by every graph that has ``key`` (one-line error otherwise), typed as the first has it."""
    having = [name for name in graphs if key in get_graph_spec(name).config.model_fields]
    typed: list[Any] = []
    for value in values:
        for name in having:
            config_for(name, **{**fixed, key: value})  # raises a one-line ContextError naming the field
        coerced = getattr(config_for(having[0], **{key: value}), key) if having else value
        if coerced not in typed:
            typed.append(coerced)
    return typed


def split_settings(values: Mapping[str, Any], graphs: Sequence[str]) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """``--set`` values as (fixed settings, sweeps): each sweep's values checked, typed and in order given."""
    fixed: dict[str, Any] = {}
    lists: dict[str, list[Any]] = {}
    for key, raw in values.items():
        swept = _values(raw)
        if swept is None or (isinstance(raw, str) and _free_text(key, graphs)):
            fixed[key] = raw
        else:
            lists[key] = swept
    sweeps = {key: _coerced(key, swept, graphs, fixed) for key, swept in lists.items()}
    return fixed, sweeps


def combinations(fields: Iterable[str], sweeps: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every combination of the swept values for a graph with ``fields`` ([{}] when none applies)."""
    names = set(fields)
    own = [(key, values) for key, values in sweeps.items() if key in names]
    return [dict(zip([k for k, _ in own], combo, strict=True)) for combo in itertools.product(*(v for _, v in own))]
