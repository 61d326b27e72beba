"""The ``paper`` profile: one module lists what it changes, and every place that has a default obeys it.

Index (``arag index --profile paper``, the manifest), runs (every graph's ``profile`` context field,
the CLI's ``--profile``), evaluations (the judge, the resume fingerprint) and the docs' table, which
must equal the module's.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from arag_graph.core.errors import AragError
from arag_graph.core.profiles import index_values, run_values
from arag_graph.index.build import BuildOptions
from arag_graph.registry import config_for, deviations, get_graph_spec, graph_names, profile_table

REPO = Path(__file__).resolve().parents[1]


def test_the_docs_table_is_the_modules_table() -> None:
    page = (REPO / "docs/guide/reproducing.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- profile-table:start -->\n(.*?)\n<!-- profile-table:end -->", page, re.S)
    assert found, "docs/guide/reproducing.md lost its profile table markers"
    assert found.group(1) == profile_table(), "regenerate the table: see the command above it in the page"


def test_every_deviation_says_what_differs_why_and_how_to_revert_it() -> None:
    listed = deviations()
    for d in listed:
        assert d.paper_source and d.reason and d.switch, d.setting
    table = profile_table()
    assert table.count("\n") == len(listed) + 1
    differing = [d for d in listed if d.differs]
    # The differences come first, so the table's head is what a reproduction must know.
    rows = table.splitlines()[2:]
    assert [r.split("|")[1].strip(" `") for r in rows[: len(differing)]] == [d.setting for d in differing]
    assert {"keyword_match", "contextual_headers", "max_steps", "judge"} <= {d.setting for d in differing}


def test_a_familys_rows_name_its_schemas_by_class_and_reach_only_them() -> None:
    """A family's rows sit beside its schema and name it by class (an import the layer test sees, not a
    string); each schema a row names lists the row, and a row reaches no other schema."""
    from arag_graph.core.profiles import Deviation

    configs = {get_graph_spec(name).config for name in graph_names()}
    for d in deviations():
        for schema in d.contexts:
            assert isinstance(schema, type) and schema in configs, (d.setting, schema)
            assert d in schema.paper_profile(), (d.setting, schema.__name__)
    arag, corag = get_graph_spec("arag").config, get_graph_spec("corag").config
    row = Deviation("max_steps", "run", 15, 7, "planted", "planted", "planted", contexts=(arag,))
    assert run_values("paper", arag, [row]) == {"max_steps": 7}
    assert run_values("paper", corag, [row]) == {}  # CoRAG has max_steps too, but the row names A-RAG
    assert run_values("package", arag, [row]) == {}


def test_run_settings_name_fields_the_schemas_have() -> None:
    """Every run-scope setting the profile switches is a field of some graph's context schema."""
    fields = {f for name in graph_names() for f in get_graph_spec(name).config.model_fields}
    missing = {d.setting for d in deviations() if d.scope == "run" and d.setting not in fields}
    assert missing == set(), f"no context schema has {sorted(missing)}: fix the row in arag_graph/core/profiles.py"


@pytest.mark.parametrize("graph", ["arag", "arag_naive", "naive_rag", "corag", "srag", "direct"])
def test_the_paper_profile_sets_each_graphs_paper_values_and_an_explicit_value_wins(graph: str) -> None:
    schema = get_graph_spec(graph).config
    wanted = run_values("paper", schema, schema.paper_profile())
    assert wanted, graph  # every graph has at least the pinned output limit and top-k
    paper = config_for(graph, profile="paper")
    package = config_for(graph)
    for name, value in wanted.items():
        assert getattr(paper, name) == value, (graph, name)
    assert paper.profile == "paper" and package.profile == "package"
    if graph in ("arag", "arag_naive"):
        assert (package.max_steps, paper.max_steps) == (15, 20)
        assert config_for(graph, profile="paper", max_steps=5).max_steps == 5
    if graph == "corag":
        assert (package.loop_similarity, paper.loop_similarity) == (0.9, 1.0)


def test_a_served_caller_may_choose_the_profile_but_not_an_unknown_one() -> None:
    schema = get_graph_spec("arag").config
    assert schema(profile="paper").max_steps == 20  # a caller's context: policed, and allowed
    with pytest.raises(AragError, match="profile"):
        schema(profile="fastest")


def test_index_options_of_the_profiles() -> None:
    assert index_values("package") == {}
    paper = BuildOptions.for_profile("paper")
    assert (paper.keyword_match, paper.contextual_headers, paper.profile) == ("substring", False, "paper")
    assert BuildOptions.for_profile("paper", contextual_headers=True).contextual_headers is True
    assert BuildOptions.for_profile(None) == BuildOptions()
    with pytest.raises(AragError, match="--profile 'papers' is not a profile"):
        BuildOptions.for_profile("papers")


def test_the_judge_is_the_papers_except_for_the_offline_policy(tmp_path: Path) -> None:
    from arag_graph.evaluators.plan import EvalPlan, with_profile

    base = {"dataset": tmp_path / "q.json", "graphs": ["arag"], "out": tmp_path / "out"}
    assert with_profile(EvalPlan(**base, model="gpt-4o-mini", profile="paper")).judge == "gpt-5-mini"
    assert with_profile(EvalPlan(**base, model="gpt-4o-mini", profile="paper", judge="j")).judge == "j"
    assert with_profile(EvalPlan(**base, model="offline", profile="paper")).judge is None
    assert with_profile(EvalPlan(**base, model="gpt-4o-mini")).judge is None


def test_resuming_with_another_profile_is_refused(tmp_path: Path) -> None:
    from arag_graph.evaluators.plan import EvalPlan
    from arag_graph.evaluators.predictions import check_resume

    questions = tmp_path / "q.json"
    questions.write_text("[]", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    plan = EvalPlan(dataset=questions, graphs=["arag"], out=out)
    digest = hashlib.sha256(b"[]").hexdigest()
    # A run from before profiles (no profile in its fingerprint) ran the package's defaults.
    fingerprint = {"dataset_sha256": digest, "model": "offline", "judge": None, "top_k": 5, "context": {}}
    (out / "run.json").write_text(json.dumps({"fingerprint": fingerprint}), encoding="utf-8")
    check_resume(plan, None)
    paper = EvalPlan(dataset=questions, graphs=["arag"], out=out, profile="paper")
    with pytest.raises(AragError, match="profile differ"):
        check_resume(paper, None)


def test_ask_and_eval_refuse_an_unknown_profile_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from arag_graph.cli.main import main

    for argv in (
        ["ask", "q", "--profile", "papr"],
        ["eval", "--dataset", "x.json", "--graphs", "arag", "--profile", "papr"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == "arag: error: --profile 'papr' is not a profile; choose package or paper"
