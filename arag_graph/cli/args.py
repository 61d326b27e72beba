"""Checked command-line values: numbers with a range, text that is UTF-8, the model's request limits.

argparse parses the numbers (``type=int``/``float``, so ``--workers many`` is its usage error);
the commands then check them here before anything runs, so a value that makes no sense
(``--workers 0``, ``--temperature nan``, ``--top-k 50``) ends in the one ``arag: error:`` line
naming the flag. ``float("nan")`` and ``float("inf")`` parse without complaint, which is why every
float is checked to be finite. Out-of-range values are refused, never clamped: a person typed them.
(Tools called by a model clamp instead: a model's odd argument must not end its run.)

The flags that several commands share are defined here too, one ``add_*`` function each, so a flag
new to a group of commands is one function here and one call in each command's ``_*_command``
(the command modules: :mod:`~arag_graph.cli.index_cmd`, :mod:`~arag_graph.cli.ask`, ...).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from arag_graph.cli import logs
from arag_graph.core.errors import AragError


def whole_number(value: int | None, flag: str, low: int, high: int | None = None, *, example: str) -> None:
    """Refuse an integer ``value`` of ``flag`` outside ``low``..``high`` (None: not given, nothing to check)."""
    if value is not None and (value < low or (high is not None and value > high)):
        bound = f"from {low} to {high}" if high is not None else f"{low} or more"
        raise AragError(f"{flag} {value} is out of range; give {bound}, e.g. {example}")


def number(value: float | None, flag: str, low: float, high: float, *, above_low: bool = False, example: str) -> None:
    """Refuse a ``value`` of ``flag`` that is not finite or lies outside ``low``..``high`` (``low`` excluded with
    ``above_low``); None: not given, nothing to check."""
    if value is None:
        return
    if not math.isfinite(value):
        raise AragError(f"{flag} {value} is not a finite number; e.g. {example}")
    if value > high or value < low or (above_low and value == low):
        bound = f"above {low:g} and at most {high:g}" if above_low else f"from {low:g} to {high:g}"
        raise AragError(f"{flag} {value:g} is out of range; give a number {bound}, e.g. {example}")


def top_k(value: int | None) -> None:
    """``--top-k``: refused outside the tools' range (one rule for ask, eval and sample-chains)."""
    from arag_graph.tools.toolkit import TOP_K_MAX, TOP_K_MIN

    whole_number(value, "--top-k", TOP_K_MIN, TOP_K_MAX, example="--top-k 5")


def add_model_limits(parser: argparse.ArgumentParser, *, judge: bool = False) -> None:
    """``--model-timeout`` and ``--model-retries``: how long a model request may take, and how often it is retried.

    The defaults (None) leave the choice to :func:`arag_graph.llm.models.request_limits`: the environment
    (``$ARAG_MODEL_TIMEOUT``, ``$ARAG_MODEL_RETRIES``), else 30 s and 2 retries.
    """
    also = " (the judge's too)" if judge else ""
    parser.add_argument(
        "--model-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help=f"total seconds per attempt of a model request{also}, whole reply included "
        "(default $ARAG_MODEL_TIMEOUT, else 30)",
    )
    parser.add_argument(
        "--model-retries",
        type=int,
        default=None,
        metavar="N",
        help=f"retries of a failed or timed-out model request{also} (default $ARAG_MODEL_RETRIES, else 2)",
    )


def model_limits(args: argparse.Namespace) -> dict[str, float | int]:
    """The request limits given on the command line, checked, as configuration fields (only those given)."""
    from arag_graph.llm.models import RETRIES_RANGE, TIMEOUT_RANGE

    timeout, retries = getattr(args, "model_timeout", None), getattr(args, "model_retries", None)
    number(timeout, "--model-timeout", *TIMEOUT_RANGE, example="--model-timeout 120")
    whole_number(retries, "--model-retries", *RETRIES_RANGE, example="--model-retries 2")
    limits: dict[str, float | int] = {}
    if timeout is not None:
        limits["timeout"] = timeout
    if retries is not None:
        limits["max_retries"] = retries
    return limits


def flags(args: argparse.Namespace, *names: str) -> list[tuple[str, str | None]]:
    """``(flag, value)`` pairs of the named arguments, for :func:`require_utf8`."""
    return [(f"--{name.replace('_', '-')}", getattr(args, name, None)) for name in names]


def require_utf8(values: Iterable[tuple[str, str | None]]) -> None:
    """Refuse text that is not UTF-8: ``(what, value)`` pairs, such as ``("--out", args.out)``.

    Python hands a command-line byte that is not UTF-8 over as a lone surrogate, which only fails
    later, when the text is printed, sent to a model or written into JSON. Checked first, it is one
    line naming the argument and the byte.
    """
    for what, value in values:
        if value is None:
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            try:  # a byte the command line could not decode arrives as a surrogate escape of it
                shown = " ".join(f"0x{b:02x}" for b in os.fsencode(value[exc.start : exc.end]))
            except UnicodeEncodeError:
                shown = repr(value[exc.start])
            raise AragError(
                f"{what} is not UTF-8 text (byte {shown} at character {exc.start}); give it as UTF-8"
            ) from None


@contextlib.contextmanager
def file_errors_as_one_line(out: str) -> Iterator[None]:
    """An ``OSError`` (a full disk, a read-only directory) as the one-line :class:`AragError`.

    Writers here append and replace files atomically, so what was written before the error stays
    usable and a rerun resumes from it; the line says so instead of a traceback.
    """
    try:
        yield
    except OSError as exc:
        where = exc.filename or out
        reason = exc.strerror or " ".join(str(exc).split())
        raise AragError(
            f"cannot write {where}: {reason}; free disk space or fix permissions and rerun to resume "
            "(what was written is kept), or choose another --out"
        ) from None


def check_run_limits(max_steps: int | None, top_k_value: int | None) -> None:
    """``--max-steps`` and ``--top-k`` as given on the command line (None: the graph's default).

    ``--top-k`` follows one rule in every command: refused outside the tools' range (the tools clamp
    only what a model asks for).
    """
    if max_steps is not None and max_steps < 0:
        raise AragError(f"--max-steps {max_steps} is not a step cap; give 0 or more tool steps, e.g. --max-steps 15")
    top_k(top_k_value)


def set_values(pairs: Sequence[str]) -> dict[str, str]:
    """``--set KEY=VALUE`` pairs; the graphs' configuration classes coerce and check the values."""
    values: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AragError(f"--set {pair!r}: give KEY=VALUE, e.g. --set tools=no_chunk_read")
        values[key.strip()] = value.strip()
    return values


def html_file(path: Path, flag: str) -> None:
    """An HTML file to write: refused before any work when it is a directory or its directory is missing."""
    if path.is_dir():
        raise AragError(f"{flag} {path} is a directory; give a file name, e.g. {flag} {path / 'report.html'}")
    if not path.parent.is_dir():
        raise AragError(f"{flag} {path}: directory {path.parent} does not exist; create it or give another file")


# --------------------------------------------------------------------------------------------
# Flags that several commands share


def output_flags() -> argparse.ArgumentParser:
    """``-v``/``-q``, on every command: how much goes to stderr (see :mod:`arag_graph.cli.logs`)."""
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help=f"more on stderr: -v arag's debug lines, -vv other libraries' info too (default: ${logs.ENV}, else info)",
    )
    group.add_argument("-q", "--quiet", action="store_true", help="errors only on stderr, and no progress bars")
    return flags


def add_model_choice(p: argparse.ArgumentParser, model_help: str, base_url_help: str) -> None:
    """``--model`` and ``--base-url``: the chat model a command runs (ask, eval, reproduce, sample-chains).

    The value is resolved by :func:`arag_graph.cli.resolve.choose_model_spec`.
    """
    p.add_argument("--model", default=None, help=model_help)
    p.add_argument("--base-url", default=None, help=base_url_help)


def add_chroma_timeout(p: argparse.ArgumentParser) -> None:
    """``--chroma-timeout``: on the commands that open an index's Chroma server (index, search, read, verify)."""
    p.add_argument(
        "--chroma-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="total time each Chroma server request may take, whole reply included "
        "(default $ARAG_CHROMA_TIMEOUT, else 60)",
    )


def add_device(p: argparse.ArgumentParser) -> None:
    """``--device``: on the commands that encode or search (index and its --update, search, ask, eval, mcp)."""
    p.add_argument(
        "--device",
        default=None,
        metavar="{auto,cpu,cuda,cuda:N,mps}",
        help="where the embedding model and an exact index's sentence matrix run: auto (a GPU PyTorch sees, "
        "else the CPU), cpu, cuda, cuda:N or mps; a setting of this run, never written into an index "
        "(default $ARAG_DEVICE, else auto)",
    )


def apply_device(args: argparse.Namespace) -> None:
    """Make ``--device`` this run's device: every index the process builds or loads, and the graphs
    of a server it starts, read it from ``$ARAG_DEVICE`` (:func:`arag_graph.index.devices.check_device`)."""
    value = getattr(args, "device", None)
    if value is not None:
        from arag_graph.index.devices import DEVICE_ENV, check_device

        os.environ[DEVICE_ENV] = check_device(value)


def add_profile(p: argparse.ArgumentParser, text: str) -> None:
    """``--profile package|paper`` (:mod:`arag_graph.core.profiles`); checked by the command, one line."""
    p.add_argument("--profile", default=None, metavar="{package,paper}", help=text)


def add_settings(p: argparse.ArgumentParser, text: str) -> None:
    """``--set KEY=VALUE`` (repeatable) into ``args.settings``; :func:`set_values` parses the pairs."""
    p.add_argument("--set", action="append", default=[], dest="settings", metavar="KEY=VALUE", help=text)


def add_embedding(p: argparse.ArgumentParser) -> None:
    """``--embedding`` and ``--embedding-base-url``: the model a new index embeds with (recorded in it)."""
    p.add_argument(
        "--embedding",
        default=None,
        metavar="SPEC",
        help="embedding model: a sentence-transformers folder or cached name, or openai:NAME for an "
        "OpenAI-compatible endpoint (key from OPENAI_API_KEY); default the packaged all-MiniLM-L6-v2. "
        "Recorded in the index, which then embeds queries with it; never downloaded",
    )
    p.add_argument(
        "--embedding-base-url",
        default=None,
        metavar="URL",
        help="base URL of the openai:NAME endpoint, e.g. http://localhost:8080/v1 (recorded; never a key)",
    )


# --------------------------------------------------------------------------------------------
# Choices the library defines, listed in --help


class HelpFormatter(argparse.HelpFormatter):
    """Help that lists the choices of the options whose choices the library defines (graphs, formats,
    encoders), read only when help is shown: ``arag`` starts without importing the graph registry
    or the encoders, and the command's own checks keep their one-line errors for a wrong value."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = super()._get_help_string(action)
        listed = getattr(action, "listed_choices", None)
        return f"{text} (one of: {', '.join(listed())})" if listed is not None and text else text


def listed(action: argparse.Action, choices: Callable[[], Sequence[str]]) -> None:
    """Have :class:`HelpFormatter` list ``choices()`` in the help of ``action``."""
    action.listed_choices = choices  # type: ignore[attr-defined]


def graph_names() -> list[str]:
    from arag_graph import registry

    return registry.graph_names()


def table_names() -> Sequence[str]:
    from arag_graph.evaluators.reproduce import TABLES

    return list(TABLES)


def corpus_formats() -> Sequence[str]:
    from arag_graph.index.corpus import CORPUS_FORMATS

    return CORPUS_FORMATS


def question_formats() -> Sequence[str]:
    from arag_graph.qa.datasets import QUESTION_FORMATS

    return QUESTION_FORMATS


def encoders() -> Sequence[str]:
    from arag_graph.index.encoders import ENCODERS

    return ENCODERS
