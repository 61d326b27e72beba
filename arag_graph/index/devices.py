"""Where local models and the sentence matrix run: ``auto``, ``cpu``, ``cuda``, ``cuda:N`` or ``mps``.

A device is a setting of the run, like a thread count, and never part of an index: the same index
is built on a GPU and searched on a laptop, or the other way round. Nothing here writes it down.

``auto`` takes a GPU when PyTorch sees one and the CPU otherwise. Answering that costs an import
of torch (seconds), which every ``arag search`` would pay on machines that have no GPU at all; so
``auto`` first looks for a GPU driver's device files and takes the CPU at once when there are
none, or when torch is not installed (the default install has no torch: only the torch encoders
run on a GPU).
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

from arag_graph.core.errors import AragError

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
"""The device names accepted (``cuda:N`` for the N-th GPU)."""
DEFAULT_DEVICE = "auto"
DEVICE_ENV = "ARAG_DEVICE"
"""The device of a run that names none (``auto`` when unset): how a server's graphs, which load their
index themselves, are told the device ``arag serve --device`` was given."""

_PATTERN = re.compile(r"(auto|cpu|mps|cuda(?::\d+)?)")
# Device files a GPU driver creates: NVIDIA's, AMD's ROCm (torch.cuda there too) and WSL's GPU bridge.
_GPU_FILES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg")
TORCH_EXTRA = "pip install 'arag-graph[torch]'"


def check_device(device: str | None) -> str:
    """``device`` in its canonical spelling, or a one-line error listing the choices. ``None`` is
    ``$ARAG_DEVICE``, else ``auto``."""
    where = ""
    if device is None:
        device = os.environ.get(DEVICE_ENV) or DEFAULT_DEVICE
        where = f" (from ${DEVICE_ENV})" if os.environ.get(DEVICE_ENV) else ""
    name = str(device).strip().lower()
    if name == "gpu":
        name = "cuda"
    if not _PATTERN.fullmatch(name):
        raise AragError(f"unknown device {device!r}{where}; use one of {', '.join(DEVICES)} (default {DEFAULT_DEVICE})")
    return name


def is_accelerator(device: str) -> bool:
    """Whether a resolved device is a GPU (anything but the CPU)."""
    return device != "cpu"


def torch_installed() -> bool:
    return importlib.util.find_spec("torch") is not None


def _gpu_driver_present() -> bool:
    """A cheap hint that a GPU may be there, read without importing torch."""
    if sys.platform == "darwin":  # Apple silicon: only torch can tell whether MPS works
        return True
    if any(os.path.exists(path) for path in _GPU_FILES):
        return True
    gpus = Path("/proc/driver/nvidia/gpus")
    return gpus.is_dir() and any(gpus.iterdir())


def resolve_device(device: str | None = None) -> str:
    """The device to run on: ``cpu``, ``cuda:N`` or ``mps``; ``auto`` (or ``None``) decides.

    An explicit GPU that cannot be used fails in one line saying why (no torch, no CUDA in this
    torch build, no such GPU) instead of silently running on the CPU.
    """
    name = check_device(device)
    if name == "cpu":
        return "cpu"
    if name == "auto":
        if not torch_installed() or not _gpu_driver_present():
            return "cpu"
        import torch

        if torch.cuda.is_available():
            return f"cuda:{torch.cuda.current_device()}"
        mps = getattr(torch.backends, "mps", None)
        return "mps" if mps is not None and mps.is_available() else "cpu"
    if not torch_installed():
        raise AragError(f"device {name}: runs the model with PyTorch, which is not installed; {TORCH_EXTRA}")
    import torch

    if name == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise AragError("device mps: this machine's PyTorch has no Apple GPU (MPS); use device cpu or auto")
        return "mps"
    if not torch.cuda.is_available():
        raise AragError(
            f"device {name}: PyTorch sees no CUDA GPU here (torch {torch.__version__}, a CPU-only build or no "
            "driver); use device cpu or auto"
        )
    index = int(name.partition(":")[2] or torch.cuda.current_device())
    count = torch.cuda.device_count()
    if index >= count:
        raise AragError(f"device {name}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    return f"cuda:{index}"
