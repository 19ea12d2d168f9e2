"""Keep freed memory in the process for reuse, where statistics run (glibc only).

The per-item statistics allocate and free many mid-sized numpy arrays (split masks, indicator
tensors, n-gram tables). By default glibc gives the top of the heap back to the operating system
whenever enough of it is free, and the next allocation faults fresh zeroed pages in again; Dask
workers make this far worse by starting with ``MALLOC_TRIM_THRESHOLD_=65536``. Measured on
TRM-CIDEr-D (10+5 texts, 1,000 splits): ~60 page faults per item in a plain process and ~130 in a
Dask worker, 15-50 % of the CPU time; with the settings below, none after warm-up.

The allocator belongs to the process. :func:`keep_freed_memory` runs in the worker processes
that capmetrics starts (:mod:`capmetrics.engine.workers`), and in the ``capmetrics`` command's own
process where it runs statistics (:func:`keep_freed_memory_if_owned`, after
:mod:`capmetrics.cli.process` called :func:`own_process`); never in a program that calls the
library.
"""

from __future__ import annotations

import ctypes
import platform

#: glibc's ``mallopt`` parameters (malloc.h).
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
#: Free memory kept at the top of the heap before it is returned (and the padding of each growth).
TRIM_THRESHOLD = 128 * 2**20
TOP_PAD = 16 * 2**20
#: Allocations from this size get their own mapping (glibc's largest dynamic threshold).
MMAP_THRESHOLD = 32 * 2**20
#: :func:`return_freed_memory`'s mapping threshold.
BUILD_MMAP_THRESHOLD = 8 * 2**20

_outcome: bool | None = None
_owned = False  # the process is the capmetrics command's (own_process)


def own_process(owned: bool = True) -> None:
    """Let :func:`keep_freed_memory_if_owned` tune this process: only for the process of the
    ``capmetrics`` command (:mod:`capmetrics.cli.process`), never a host's."""
    global _owned
    _owned = owned


def owns_process() -> bool:
    """Whether :func:`own_process` was called in this process."""
    return _owned


def keep_freed_memory_if_owned() -> bool:
    """:func:`keep_freed_memory` in the command's own process; elsewhere nothing (False)."""
    return keep_freed_memory() if _owned else False


def keep_freed_memory() -> bool:
    """Set glibc's trim threshold, top padding and mmap threshold so that freed heap memory is
    reused instead of returned and faulted in again (at most ~128 MiB stays reserved). Once per
    process (forked children inherit it); False where the C library is not glibc."""
    global _outcome
    if _outcome is None:
        _outcome = _set_glibc_options()
    return _outcome


def _set_glibc_options() -> bool:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")  # glibc's soname (find_library would run ldconfig)
        return all(
            libc.mallopt(param, value) == 1
            for param, value in (
                (M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                (M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                (M_TOP_PAD, TOP_PAD),
            )
        )
    except (OSError, AttributeError):
        return False


def return_freed_memory() -> bool:
    """The opposite trade, for a one-off build that allocates and frees arrays of growing size
    (METEOR's resource tables): blocks from 8 MiB get their own mapping and freed heap is given
    back (from 128 KiB at the top), so the peak stays near what is held. Smaller blocks come from
    the heap and are reused: at a 128 KiB mapping threshold every block of the table's text and
    arrays was mapped and faulted in afresh (3.7 s of system time of an 18.9 s build, against
    1.3 s of 16.4 s now, for 35 MB more at the peak). False where not glibc."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return all(
            libc.mallopt(param, value) == 1
            for param, value in (
                (M_MMAP_THRESHOLD, BUILD_MMAP_THRESHOLD),
                (M_TRIM_THRESHOLD, 128 * 1024),
            )
        )
    except (OSError, AttributeError):
        return False
