"""Typed configuration: values from forms and environments are coerced, bad ones fail in one line."""

from __future__ import annotations

import pytest

from arag_graph.configuration import AragConfig, CoragConfig, NaiveRagConfig, SragConfig
from arag_graph.errors import AragError
from arag_graph.registry import GRAPHS, config_for


def test_text_values_are_coerced_and_top_k_is_clamped() -> None:
    cfg = AragConfig(max_steps="3", top_k=99, hyde="true", temperature="0.5")  # type: ignore[arg-type]
    assert (cfg.max_steps, cfg.top_k, cfg.hyde, cfg.temperature) == (3, 20, True, 0.5)
    assert AragConfig(top_k=0).top_k == 1
    assert NaiveRagConfig(sentence_window="off").sentence_window is False  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("cls", "values", "fragment"),
    [
        (AragConfig, {"max_steps": "many"}, "max_steps='many' is not valid; give a whole number"),
        (AragConfig, {"max_steps": 2.5}, "give a whole number"),
        (AragConfig, {"max_steps": -1}, "max_steps=-1 is out of range"),
        (AragConfig, {"tools": "everything"}, "choose one of ['full'"),
        (AragConfig, {"hyde": "maybe"}, "give true or false"),
        (NaiveRagConfig, {"retriever": "sparse"}, "choose one of ['dense', 'bm25', 'hybrid']"),
        (CoragConfig, {"loop_similarity": 1.5}, "between 0.0 and 1.0"),
        (SragConfig, {"relevance_threshold": -0.1}, "relevance_threshold=-0.1 is out of range"),
    ],
)
def test_bad_values_fail_with_one_line(cls: type, values: dict, fragment: str) -> None:
    with pytest.raises(AragError) as err:
        cls(**values)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_from_context_accepts_mappings_and_names_unknown_fields() -> None:
    assert AragConfig.from_context({"max_steps": "4"}).max_steps == 4
    assert AragConfig.from_context(None) == AragConfig()
    with pytest.raises(AragError, match=r"unknown configuration field\(s\) \['bogus'\]"):
        AragConfig.from_context({"bogus": 1})


def test_every_graph_has_one_typed_configuration_with_defaults() -> None:
    for name, spec in GRAPHS.items():
        cfg = spec.config()
        assert cfg.top_k == 5, name
        assert config_for(name, top_k=7, not_a_field=1).top_k == 7
