#!/usr/bin/env bash
# Prepare what bench/bench_gpu.py needs on a GPU machine that has no network, and list what travels.
#
# Such a machine (one H200 here, lent to some sessions for a few minutes) has PyTorch, transformers,
# sentence-transformers, tokenizers, numpy, tqdm, filelock and tiktoken, and takes at most 64 MiB:
# the repository's tracked files (about 63 MB) plus what this script puts in .gpu/ (about 3 MB):
#
#   .gpu/model/              all-MiniLM-L6-v2's configuration and tokenizer (under 1 MB); run.sh draws
#                            seeded random float16 weights of its shape there (see step 1)
#   .gpu/wheels/*.whl        the Python packages the machine lacks, for its CPython 3.12:
#                            langchain-core, pydantic, pydantic-core, annotated-types,
#                            typing-inspection, uuid-utils (what `build_index` imports beyond its own)
#   .gpu/shim/bpe_openai/    a stand-in for bpe-openai (whose 41 MB wheel would not fit): the same
#                            o200k_base table (1.7 MB) run by the machine's tiktoken, which would
#                            otherwise download it; the token counts are checked equal here first
#   .gpu/run.sh              installs the wheels into /tmp/site and runs the benchmark, writing
#                            gpu.json and gpu.md to $OUT
#
# Usage, here:   bash bench/gpu_payload.sh           (then carry .gpu; it is git-ignored locally)
# there:         bash .gpu/run.sh [bench_gpu.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=.gpu
PY="${PYTHON:-.venv/bin/python}"
rm -rf "$DIR"
mkdir -p "$DIR/wheels" "$DIR/shim/bpe_openai" "$DIR/model"
exclude="$(git rev-parse --git-path info/exclude)"
grep -qxF "/$DIR/" "$exclude" 2>/dev/null || echo "/$DIR/" >>"$exclude"

# 1. The model's configuration and tokenizer only; its weights are drawn on the GPU machine (run.sh).
# The repository now carries the default encoder's int8 graph (52 MB), so its real weights (45 MB even in
# float16) no longer fit beside it in 64 MiB. This benchmark measures speed and GPU-against-CPU
# agreement, which depend on the architecture and the sequence lengths, not on the weights' values:
# seeded random weights of the same shape give the same figures (it reports no retrieval quality).
"$PY" - "$DIR/model" <<'EOF'
import shutil
import sys
from pathlib import Path

from arag_graph.index.encoders import _default_model_path

source, target = Path(_default_model_path()), Path(sys.argv[1])
for path in source.rglob("*"):
    if path.is_file() and path.suffix in (".json", ".txt") and path.name != "data_config.json":
        (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target / path.relative_to(source))
EOF

# 2. Wheels of the missing packages, at the versions installed here.
versions="$("$PY" - <<'EOF'
from importlib.metadata import version
print(" ".join(f"{n}=={version(n)}" for n in (
    "langchain-core", "pydantic", "pydantic-core", "annotated-types", "typing-inspection", "uuid-utils")))
EOF
)"
# shellcheck disable=SC2086
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$DIR/wheels" $versions

# 3. The o200k_base stand-in, checked against bpe-openai on the corpus.
"$PY" - "$DIR/shim/bpe_openai" <<'EOF'
import json
import shutil
import sys
from pathlib import Path

import bpe_openai
from bpe_openai import registry

target = Path(sys.argv[1])
spec = registry.o200k_base()
(target / "o200k_base.json").write_text(
    json.dumps({"pat_str": spec["pat_str"], "special_tokens": spec["special_tokens"]}), encoding="utf-8"
)
shutil.copy2(Path(bpe_openai.__file__).parent / "data" / "o200k_base.tiktoken.gz", target)
(target / "__init__.py").write_text('''"""A stand-in for bpe-openai on a machine without it: o200k_base run by tiktoken.

bench/gpu_payload.sh writes it: the table is bpe-openai's own (tiktoken alone would download it),
and the script checked that both count the same tokens.
"""

import base64
import functools
import gzip
import json
from pathlib import Path

import tiktoken

HERE = Path(__file__).parent


@functools.cache
def get_encoding(name: str) -> tiktoken.Encoding:
    spec = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
    with gzip.open(HERE / f"{name}.tiktoken.gz", "rt", encoding="ascii") as fh:
        ranks = {base64.b64decode(token): int(rank) for token, rank in (line.split() for line in fh if line.strip())}
    return tiktoken.Encoding(name=name, pat_str=spec["pat_str"], mergeable_ranks=ranks,
                             special_tokens=spec["special_tokens"])
''', encoding="utf-8")
EOF
"$PY" - "$DIR/shim" <<'EOF'
import json
import sys
from pathlib import Path

import bpe_openai

texts = [d["text"] for d in json.loads(Path("data/2wiki-corpus/corpus.json").read_text(encoding="utf-8"))[:2000]]
reference = bpe_openai.get_encoding("o200k_base")
sys.path.insert(0, sys.argv[1])
for name in [m for m in sys.modules if m == "bpe_openai" or m.startswith("bpe_openai.")]:
    del sys.modules[name]
import bpe_openai as shim  # noqa: E402

assert Path(shim.__file__).parent.parent == Path(sys.argv[1]).resolve(), shim.__file__
ours = shim.get_encoding("o200k_base")
assert all(ours.encode_ordinary(t) == reference.encode_ordinary(t) for t in texts), "token ids differ"
print(f"o200k_base stand-in: same tokens as bpe-openai on {len(texts)} passages")
EOF

# 4. The command to run there.
cat >"$DIR/run.sh" <<'EOF'
#!/usr/bin/env bash
# On the GPU machine, from the repository's root: bash .gpu/run.sh [bench_gpu.py options]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/wheels/*.whl
export PYTHONPATH="/tmp/site:$PWD/.gpu/shim:$PWD" PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=true
# MiniLM's architecture with seeded random float16 weights (see gpu_payload.sh, step 1).
python3 - .gpu/model <<'PY'
import sys
import torch
from transformers import BertConfig, BertModel
torch.manual_seed(0)
folder = sys.argv[1]
BertModel(BertConfig.from_pretrained(folder)).half().save_pretrained(folder)
PY
cd bench
python3 bench_gpu.py --model ../.gpu/model --out "${OUT:-/tmp}/gpu.json" "$@"
EOF

echo "what travels besides the tracked files:"
find "$DIR" -type f -printf '%10s  %p\n' | sort -k2
du -sb "$DIR" | awk '{printf "%.1f MB in %s\n", $1 / 1e6, $2}'
git ls-files -z | xargs -0 du -cb | tail -1 | awk '{printf "%.1f MB of tracked files\n", $1 / 1e6}'
