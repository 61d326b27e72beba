"""Running a test's commands in a private mount namespace: read-only binds and small file systems.

The tests run as root, for whom permission bits do not stop a write, so "a read-only index" or "a
full disk" must be real: a read-only bind mount (``EROFS`` even for root) or a small tmpfs. Linux
mount namespaces (``unshare -m``) make those mounts visible to one subprocess only and vanish with
it, so nothing on the machine changes. Where mount namespaces are not allowed the tests skip.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULT_MARK = "@@result@@ "


def require_mount_namespaces() -> None:
    """Skip unless ``unshare -m`` can mount here (it needs root or a user namespace)."""
    unshare = shutil.which("unshare")
    if unshare is None or sys.platform != "linux":
        pytest.skip("needs Linux mount namespaces (unshare -m)")
    probe = subprocess.run(
        [unshare, "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        pytest.skip(f"mount namespaces are not allowed here: {probe.stderr.strip()[:200]}")


def subprocess_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGSMITH_", "LANGCHAIN_", "OPENAI_"))}
    env.update(
        {
            "PYTHONPATH": str(REPO),
            "ARAG_CACHE_DIR": str(cache),
            "LANGSMITH_TRACING": "false",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
        }
    )
    return env


def run_in_namespace(mounts: list[str], script: str, args: list[str], env: dict[str, str], timeout: float = 600) -> Any:
    """Run ``script`` (Python, with ``args`` as ``sys.argv[1:]``) after the shell ``mounts``, in a
    private mount namespace; returns what the script printed after :data:`RESULT_MARK` as JSON."""
    python = shlex.join([sys.executable, "-c", script, *args])
    command = " && ".join([*mounts, f"exec {python}"])
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", command], env=env, capture_output=True, text=True, timeout=timeout, cwd=REPO
    )
    for line in done.stdout.splitlines():
        if line.startswith(RESULT_MARK):
            return json.loads(line[len(RESULT_MARK) :])
    raise AssertionError(f"no result (exit {done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def read_only_bind(path: Path) -> list[str]:
    """Shell commands that make ``path`` read-only (for this namespace only)."""
    where = shlex.quote(str(path))
    return [f"mount --bind {where} {where}", f"mount -o remount,bind,ro {where}"]


# The body of a script that runs CLI commands in one process (the encoder loads once) and reports
# each one's exit code, stdout and stderr. Commands come as a JSON list in sys.argv[1].
CLI_SCRIPT = f"""
import contextlib, io, json, sys
from arag_graph.cli.main import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:
            import traceback
            traceback.print_exc(file=err)
            code = "raised"
    results.append({{"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()}})
print({RESULT_MARK!r} + json.dumps(results))
"""
