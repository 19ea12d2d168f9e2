"""Where models run: ``--device auto|cpu|cuda[:N]`` resolved in one place, and batches that
halve when the GPU runs out of memory.

Components with a ``device`` parameter take ``None`` to mean the run's device (set by the CLI's
``--device``, or :func:`use_device`; ``auto`` when nothing set it). ``auto`` is CUDA when torch
sees a GPU, else the CPU. Only model work (embedding) runs on the device, always in the calling
process; executor workers never touch it (see :mod:`capmetrics.engine.parallel`).
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import numpy as np
from capmetrics.errors import CapmetricsError

T = TypeVar("T")
DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")
_run_device: list[str] = []


class DeviceError(CapmetricsError, ValueError):
    """A device that is malformed or that torch cannot see."""


def check_device(device: str) -> str:
    """``device`` if it is ``auto``, ``cpu``, ``cuda`` or ``cuda:N``; else a DeviceError."""
    if not isinstance(device, str) or not DEVICE_PATTERN.fullmatch(device):
        raise DeviceError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N")
    return device


@contextlib.contextmanager
def use_device(device: str) -> Iterator[None]:
    """Make ``device`` the run's device for components whose ``device`` is None."""
    _run_device.append(check_device(device))
    try:
        yield
    finally:
        _run_device.pop()


def run_device() -> str:
    """The device of the current run (``auto`` when none was set)."""
    return _run_device[-1] if _run_device else "auto"


def cuda_report() -> str:
    """What torch sees, in words (for errors)."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if torch.cuda.is_available():
        names = ", ".join(
            f"cuda:{i} {torch.cuda.get_device_name(i)}" for i in range(torch.cuda.device_count())
        )
        return f"torch {torch.__version__} sees {torch.cuda.device_count()} CUDA device(s): {names}"
    build = torch.version.cuda or "none (a CPU-only build)"
    return f"torch {torch.__version__} sees no CUDA device (CUDA build: {build})"


def resolve_device(device: str | None = None) -> str:
    """The concrete torch device (``cpu`` or ``cuda:N``) for ``device`` (None: the run's).

    Raises:
        DeviceError: ``cuda``/``cuda:N`` that torch cannot see, naming what it sees.
    """
    device = check_device(run_device() if device is None else device)
    if device == "cpu":
        return "cpu"
    torch: Any = sys.modules.get("torch")
    if torch is None:
        try:
            import torch
        except ImportError:
            if device == "auto":
                return "cpu"
            raise DeviceError(f"device {device!r} needs torch with CUDA: {cuda_report()}") from None
    available = torch.cuda.is_available()
    if device == "auto":
        return "cuda:0" if available else "cpu"
    index = int(device.partition(":")[2] or 0)
    if not available or index >= torch.cuda.device_count():
        raise DeviceError(f"device {device!r} is not available: {cuda_report()}")
    return f"cuda:{index}"


def device_signature(device: str) -> dict[str, str]:
    """The signature entry of a resolved device: none on the CPU (the reference values), the
    device otherwise (GPU kernels round differently: values can differ in the last digits)."""
    return {} if device == "cpu" else {"device": device}


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` is torch's GPU out-of-memory error."""
    torch = sys.modules.get("torch")
    oom = getattr(getattr(torch, "cuda", None), "OutOfMemoryError", None) if torch else None
    if oom is not None and isinstance(error, oom):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def in_halving_batches(
    run: Callable[[Sequence[T], int], np.ndarray], items: Sequence[T], batch_size: int, what: str
) -> np.ndarray:
    """``run(items, batch_size)``, retried with half the batch size (down to 1) while the GPU
    is out of memory, with one warning per halving; rows are stacked in order.

    ``run`` must give the same rows whatever the batch size it is called with (batching
    changes padding only). Long inputs run in blocks of ``PROGRESS_BLOCK`` items, each
    reported to :func:`capmetrics.engine.progress.work` as sentences embedded; while a progress bar
    listens, blocks of a few batches (:data:`LISTENED_BLOCK`), so that it moves."""
    from capmetrics.engine.progress import listening, work

    size = max(1, batch_size)
    block_size = min(PROGRESS_BLOCK, max(size, LISTENED_BLOCK)) if listening() else PROGRESS_BLOCK
    if len(items) <= block_size:
        with work(len(items), "sentences") as advance:
            out = _halving(run, items, [size], what)
            advance(len(items))
        return out
    sizes, parts = [size], []
    with work(len(items), "sentences") as advance:
        for start in range(0, len(items), block_size):
            block = items[start : start + block_size]
            parts.append(_halving(run, block, sizes, what))
            advance(len(block))
    return np.concatenate(parts)


#: Items per block of :func:`in_halving_batches` (one progress report per block).
PROGRESS_BLOCK = 4096
#: Items per block while a progress bar listens (:func:`capmetrics.engine.progress.listening`).
LISTENED_BLOCK = 256


def _halving(
    run: Callable[[Sequence[T], int], np.ndarray], items: Sequence[T], sizes: list[int], what: str
) -> np.ndarray:
    """``run(items, sizes[0])``, halving ``sizes[0]`` (kept for the next block) while out of GPU
    memory."""
    while True:
        try:
            return run(items, sizes[0])
        except Exception as err:
            if not is_out_of_memory(err) or sizes[0] == 1:
                raise
            _empty_cache()
            sizes[0] = max(1, sizes[0] // 2)
            warnings.warn(
                f"{what}: out of GPU memory; retrying with batch_size={sizes[0]}",
                ResourceWarning,
                stacklevel=3,
            )


def _empty_cache() -> None:
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()
