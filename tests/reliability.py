"""Figures of the fault-injection suite (issue 7): what each test tried and what survived.

Every fault-injection test calls :func:`record` with its counts. They are printed (``pytest -s``
shows them) and, when ``ARAG_RELIABILITY_LOG`` names a file, appended to it as JSON Lines, which
``bench/bench_reliability.py`` runs the suite with and turns into bench/results/reliability.md.
The counts come from the run itself, never from constants: a test that tried fewer cases records
fewer.
"""

from __future__ import annotations

import fcntl
import json
import os
from typing import Any

LOG_ENV = "ARAG_RELIABILITY_LOG"


def record(
    area: str,
    case: str,
    *,
    trials: int = 0,
    faults: int = 0,
    survived: int = 0,
    inputs: int = 0,
    lost: int = 0,
    **details: Any,
) -> dict[str, Any]:
    """Note what one test did.

    ``trials``: runs or processes started; ``faults``: faults injected (a kill, a model fault, a
    malformed input, a hostile chunk, a key-quoting error); ``survived``: faults after which the run
    still ended as the contract says (answer or one-line error, old index loadable, ...);
    ``inputs``: inputs tried (malformed or generated files, questions); ``lost``: records, runs or
    index states lost or corrupted (must be 0: tests assert it before recording).
    """
    entry: dict[str, Any] = {
        "area": area,
        "case": case,
        "trials": trials,
        "faults": faults,
        "survived": survived,
        "inputs": inputs,
        "lost": lost,
        **details,
    }
    line = json.dumps(entry, sort_keys=True, default=str)
    print(f"[reliability] {line}")
    path = os.environ.get(LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)  # xdist workers or parallel runs append whole lines
            fh.write(line + "\n")
    return entry
