"""Running the ``arag`` CLI in-process from tests, and the one-line error contract they check."""

from __future__ import annotations

import pytest

from arag_graph.cli.main import main


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``arag ARGV`` in this process: (exit code, stdout, stderr) of that call alone."""
    capsys.readouterr()  # drop anything earlier output left behind
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors exit from inside parse_args
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_error_line(code: int, out: str, err: str) -> str:
    """Bad input: a non-zero exit, nothing on stdout, one ``arag: error:`` line and no traceback."""
    assert code != 0
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("arag: error: ") and "Traceback" not in err
    return lines[0]
