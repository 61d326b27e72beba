"""What every command's ``--json`` prints: exactly one strict JSON object on stdout."""

from __future__ import annotations

import sys
from typing import Any


def print_json(obj: Any) -> None:
    """Exactly one strict JSON object (no NaN or Infinity, secrets redacted).

    See :func:`arag_graph.core.jsonl.dumps`.
    """
    from arag_graph.core.jsonl import dumps

    sys.stdout.write(dumps(obj) + "\n")
