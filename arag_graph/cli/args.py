"""Checked command-line values: numbers with a range, text that is UTF-8, the model's request limits.

argparse parses the numbers (``type=int``/``float``, so ``--workers many`` is its usage error);
the commands then check them here before anything runs, so a value that makes no sense
(``--workers 0``, ``--temperature nan``, ``--top-k 50``) ends in the one ``arag: error:`` line
naming the flag. ``float("nan")`` and ``float("inf")`` parse without complaint, which is why every
float is checked to be finite. Out-of-range values are refused, never clamped: a person typed them.
(Tools called by a model clamp instead: a model's odd argument must not end its run.)
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from collections.abc import Iterable, Iterator

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
