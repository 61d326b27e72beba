"""``arag mcp --transport http`` under clients that initialise and leave without DELETE (issue 38).

A probe of an earlier version opened 1,500 such sessions: the server grew from 287 MB to 499 MB and
stayed there, with no session cap and no idle expiry. This starts ``arag mcp --transport http``
on the bundled sample index as a user would (a subprocess, niced), opens 1,500 sessions one after
another (``initialize``, then gone), waits for idle ones to expire, and does it again (``--waves``),
reading the server's resident memory (``VmRSS`` in ``/proc/PID/status``) at the start, after each
wave's clients and after each wait. Three settings:

- ``unbounded``: ``--max-sessions 100000 --session-idle 86400``, standing for a server without
  bounds (every session is admitted and kept for the whole run);
- ``bounded``: ``--max-sessions 2000 --session-idle 10``: all 1,500 admitted, then closed once idle;
- ``bounded-malloc``: the same with ``PYTHONMALLOC=malloc`` in the server's environment (Python's small
  objects from glibc's malloc, whose free pages ``malloc_trim`` gives back once the sessions ended);
- ``default``: the defaults (100 sessions, 300 s idle, not waited out here): sessions past the 100th
  are refused (503) and the memory stays near its start.

    python bench/bench_mcp_sessions.py            # writes bench/results/mcp_sessions.{json,md}
    python bench/bench_mcp_sessions.py --clients 300
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from importlib.metadata import version
from pathlib import Path
from typing import Any

from benchenv import RESULTS, ROOT, machine

# The first request of an MCP client over HTTP, as tests/test_mcp.py sends it.
from tests.test_mcp import _HEADERS as HEADERS
from tests.test_mcp import _INITIALIZE as INITIALIZE

SETTINGS = {
    "unbounded": ["--max-sessions", "100000", "--session-idle", "86400"],
    "bounded": ["--max-sessions", "2000", "--session-idle", "10"],
    "bounded-malloc": ["--max-sessions", "2000", "--session-idle", "10"],
    "default": [],
}
ENV = {"bounded-malloc": {"PYTHONMALLOC": "malloc"}}
"""Settings run with more in the server's environment: Python's small objects from glibc's malloc instead
of Python's own arenas, so that malloc_trim can give back what expired sessions left."""


def rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` in MB (VmRSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def run_setting(name: str, index: Path, clients: int, settle: float, waves: int) -> dict[str, Any]:
    import httpx

    argv = [sys.executable, "-m", "arag_graph.cli.main", "mcp", "--index", str(index), "--transport", "http"]
    argv += ["--port", "0", *SETTINGS[name]]
    env = {**os.environ, **ENV.get(name, {})}
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"serving on (http://\S+)", line)
        if not match:
            raise RuntimeError(f"no URL announced: {line!r}")
        url = match.group(1)
        # The server logs each refused session (a 503) to stderr: read it all, or a full pipe blocks it.
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        statuses: Counter[int] = Counter()
        idle = float(SETTINGS[name][3]) if SETTINGS[name] else 300.0
        waited = min(idle, 60.0) + settle
        after, later, opened = [], [], 0.0
        with httpx.Client(timeout=120) as client:
            client.post(url, json=INITIALIZE, headers=HEADERS).raise_for_status()  # the lazy set-up, paid first
            time.sleep(1)
            start = rss_mb(proc.pid)
            for _ in range(waves):
                began = time.perf_counter()
                # Each initialize without a session ID opens a session; none is ever ended (no DELETE), as
                # clients that initialise and leave. (One connection carries them: sessions are not
                # connections.)
                for _ in range(clients):
                    statuses[client.post(url, json=INITIALIZE, headers=HEADERS).status_code] += 1
                opened += time.perf_counter() - began
                after.append(round(rss_mb(proc.pid), 1))
                time.sleep(waited)
                later.append(round(rss_mb(proc.pid), 1))
        return {
            "setting": name,
            "flags": " ".join([*SETTINGS[name], *(f"({k}={v})" for k, v in ENV.get(name, {}).items())])
            or "(defaults: --max-sessions 100 --session-idle 300)",
            "clients": clients,
            "waves": waves,
            "statuses": dict(sorted(statuses.items())),
            "seconds_to_open": round(opened, 1),
            "rss_start_mb": round(start, 1),
            "rss_after_mb": after,
            "rss_later_mb": later,
            "waited_s": round(waited, 1),
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def render(results: list[dict[str, Any]], info: dict[str, Any], command: str) -> str:
    lines = [
        "# MCP HTTP sessions: 1,500 clients that initialise and leave",
        "",
        f"`{command}` on {info['cpu']} ({info['cores']} cores, shared), Python {info['python']}; "
        "the server is `arag mcp --transport http` on the bundled sample index, its memory `VmRSS`.",
        "",
        "| setting | flags | clients per wave | answers (HTTP status: count) | RSS at start | each wave: after "
        "its clients, then after the wait | waited |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        statuses = ", ".join(f"{k}: {v}" for k, v in r["statuses"].items())
        waves = "; ".join(f"{a} MB, then {b} MB" for a, b in zip(r["rss_after_mb"], r["rss_later_mb"], strict=True))
        lines.append(
            f"| {r['setting']} | `{r['flags']}` | {r['clients']} | {statuses} | {r['rss_start_mb']} MB | "
            f"{waves} | {r['waited_s']} s |"
        )
    lines += [
        "",
        "Unbounded, every session is kept for the server's lifetime and each wave adds to the memory.",
        "Bounded, idle sessions are closed after `--session-idle` seconds; once they have ended the server",
        "collects garbage and calls glibc's `malloc_trim(0)` (`MemoryReturn` in arag_graph/tools/mcp_server.py),",
        "which gives back the free pages of glibc's arenas. What stays is Python's own small-object arenas",
        "(pymalloc frees an arena only when every object in it is gone, and a few survivors pin each one):",
        "the number of live Python blocks is back at its start (`sys.getallocatedblocks()`, measured in",
        "process), but the resident size is not. With `PYTHONMALLOC=malloc` in the server's environment",
        "(bounded-malloc) small objects come from glibc too, and the trim brings the memory back near its",
        "start. The next wave reuses the memory either way. With the defaults at most 100 sessions are",
        "open at once, so the peak itself stays near the start.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1500)
    parser.add_argument("--waves", type=int, default=2, help="times the clients come, each after the last expired")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds to wait past the idle time")
    parser.add_argument("--settings", default="unbounded,bounded,bounded-malloc,default")
    args = parser.parse_args()
    import httpx

    from arag_graph.index.sample import ensure_sample_index

    index = ensure_sample_index(progress=False).path
    os.nice(5)
    results = []
    for name in args.settings.split(","):
        results.append(run_setting(name, index, args.clients, args.settle, args.waves))
        print(json.dumps(results[-1]), flush=True)
    info = machine(mcp=version("mcp"), httpx=httpx.__version__)
    command = "python bench/bench_mcp_sessions.py " + " ".join(sys.argv[1:])
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mcp_sessions.json").write_text(json.dumps({"machine": info, "results": results}, indent=1) + "\n")
    (RESULTS / "mcp_sessions.md").write_text(render(results, info, command.strip()))
    print(render(results, info, command.strip()))


if __name__ == "__main__":
    main()
