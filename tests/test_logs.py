"""How the command line shows log records (arag_graph.cli.logs): the level from flags or the environment."""

from __future__ import annotations

import io
import logging
import warnings

import pytest

from arag_graph.cli.logs import cli_logging, level_of
from arag_graph.core.errors import AragError


def test_quiet_wins_then_verbose_then_the_environment_then_info() -> None:
    assert level_of() == logging.INFO
    assert level_of(env="warning") == logging.WARNING
    assert level_of(env=" DEBUG ") == logging.DEBUG
    assert level_of(verbose=1, env="error") == logging.DEBUG
    assert level_of(verbose=2, quiet=True, env="debug") == logging.ERROR


def test_an_unknown_level_in_the_environment_is_one_line_naming_the_variable() -> None:
    with pytest.raises(AragError, match=r"ARAG_LOG_LEVEL='loud' is not a log level; use one of debug, info"):
        level_of(env="loud")


def emit_everything() -> None:
    logging.getLogger("arag_graph.arag.graph").debug("agent detail")
    logging.getLogger("arag_graph.arag.graph").info("agent fact")
    logging.getLogger("arag_graph.arag.graph").warning("HyDE failed,\n  searched with the query")
    logging.getLogger("langsmith.client").info("third-party chatter")
    logging.getLogger("langsmith.client").warning("third-party warning")
    logging.getLogger("langsmith.client").error("third-party error")
    warnings.warn("a python warning", UserWarning, stacklevel=1)


@pytest.mark.parametrize(
    ("level", "verbose", "shown"),
    [
        (
            logging.INFO,
            0,
            [
                "arag: info: agent fact",
                "arag: warning: HyDE failed, searched with the query",
                "arag: warning: third-party warning",
                "arag: error: third-party error",
            ],
        ),
        (logging.ERROR, 0, ["arag: error: third-party error"]),
        (
            logging.DEBUG,
            2,
            [
                "arag: debug [arag_graph.arag.graph]: agent detail",
                "arag: info: agent fact",
                "arag: warning: HyDE failed, searched with the query",
                "arag: info: third-party chatter",
                "arag: warning: third-party warning",
                "arag: error: third-party error",
            ],
        ),
    ],
)
def test_records_shown_per_level_one_line_each(level: int, verbose: int, shown: list[str]) -> None:
    stream = io.StringIO()
    with cli_logging(level, verbose, stream), warnings.catch_warnings():
        warnings.simplefilter("always")
        emit_everything()
    lines = stream.getvalue().splitlines()
    python_warning = [line for line in lines if "a python warning" in line]
    assert [line for line in lines if "a python warning" not in line] == shown
    assert len(python_warning) == (0 if level >= logging.ERROR else 1)  # --quiet silences warnings too


def test_logging_is_restored_after_the_command() -> None:
    root, package = logging.getLogger(), logging.getLogger("arag_graph")
    before = (root.level, package.level, list(root.handlers))
    with cli_logging(logging.ERROR, 0, io.StringIO()):
        assert package.level == logging.ERROR
    assert (root.level, package.level, list(root.handlers)) == before


def test_log_lines_carry_no_url_credentials_or_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another library's record may quote a request URL or a reply: the command's log lines are redacted."""
    monkeypatch.setenv("ARAG_API_KEY", "operator-plain-key-in-a-log")
    stream = io.StringIO()
    with cli_logging(logging.INFO, stream=stream):
        logging.getLogger("httpx").warning("GET http://user:urlpass-1234@host/v1?api_key=qparam-5678 failed")
        logging.getLogger("arag_graph.arag").warning("the model said operator-plain-key-in-a-log")
    shown = stream.getvalue()
    assert shown.count("arag: warning:") == 2 and "host/v1" in shown
    for secret in ("urlpass-1234", "qparam-5678", "operator-plain-key-in-a-log"):
        assert secret not in shown, shown
