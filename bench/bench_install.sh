#!/usr/bin/env bash
# The default install, measured (issue 36, item 5): a clean virtualenv, `pip install .` of this checkout
# with no pip cache, then the demo on the bundled sample; its size, the two times, MET or NOT MET against
# the targets (700 MB, 4 minutes for both together), and proof that torch, transformers, scipy and
# chromadb are absent. Writes bench/results/install.json; the prose is bench/results/install.md.
#
#   bash bench/bench_install.sh            (about 2-5 minutes; needs the package registry, nothing else)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
start=$(date +%s.%N)
"$work/venv/bin/python" -m pip install --quiet --no-cache-dir . 2> >(grep -v "^WARNING: Location" >&2)
installed=$(date +%s.%N)
ARAG_CACHE_DIR="$work/cache" "$work/venv/bin/arag" demo --questions 3 >"$work/demo.log"
done_at=$(date +%s.%N)
size_mb=$(du -sm "$work/venv" | cut -f1)
distributions=$("$work/venv/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l)
absent=$("$work/venv/bin/python" - <<'EOF'
import importlib.util
print(",".join(m for m in ("torch", "transformers", "scipy", "sentence_transformers", "chromadb")
               if importlib.util.find_spec(m) is None))
EOF
)
largest=$(du -sm "$work"/venv/lib/python*/site-packages/* | sort -rn | head -8 | awk '{n=split($2,p,"/"); printf "%s%s %s", (NR>1?", ":""), p[n], $1}')
"$PYTHON" - "$start" "$installed" "$done_at" "$size_mb" "$distributions" "$absent" "$largest" "$(grep -c '^  answer:' "$work/demo.log")" <<'EOF'
import json
import platform
import sys
from pathlib import Path

start, installed, done, size, count = (float(v) for v in sys.argv[1:6])
absent, largest, answers = sys.argv[6], sys.argv[7], int(sys.argv[8])
install_s, demo_s = installed - start, done - installed
total = install_s + demo_s
result = {
    "command": "bash bench/bench_install.sh",
    "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
    "install_seconds": round(install_s, 1),
    "demo_seconds": round(demo_s, 1),
    "total_seconds": round(total, 1),
    "venv_mb": int(size),
    "distributions": int(count),
    "absent": absent.split(",") if absent else [],
    "largest_mb": largest,
    "demo_answers": answers,
    "size_met": size <= 700,
    "time_met": total <= 240,
}
Path("bench/results").mkdir(parents=True, exist_ok=True)
Path("bench/results/install.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
print(f"venv {int(size)} MB ({int(count)} distributions), target 700 MB: {'MET' if size <= 700 else 'NOT MET'}")
print(f"pip install . {install_s:.0f} s + demo {demo_s:.0f} s = {total:.0f} s, target 240 s: "
      f"{'MET' if total <= 240 else 'NOT MET'}")
print(f"absent: {absent or 'none'}; demo answered {answers} questions; largest (MB): {largest}")
EOF
