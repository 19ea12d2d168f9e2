"""The aligner as an extension module compiled ahead of time, so a process that scores METEOR
imports neither numba nor its JIT.

numba's just-in-time path costs every fresh process about half a second before the first pair is
aligned (importing numba, its type system and loading the cached machine code), which is more than
aligning all of Flickr8k-Expert. So on first use ``_align.align_all`` is compiled once (by a child
process that announces it on stderr, so numba and LLVM never stay in the scoring process) with
numba's ahead-of-time compiler (``numba.pycc``; it needs a C compiler) into an ordinary extension
module under the cache folder (``meteor/aligner-<key>/``, keyed by the aligner's source and the
numba, numpy and Python versions), with its SHA-256 next to it. Later processes check the checksum
and import the module: a few milliseconds, no numba. The generated code is the same kernel:
tests/plugins/test_meteor_native.py checks it against the just-in-time and plain-Python runs of the
same functions.

Where it cannot be built (no C compiler, no numba) the reason is stored next to it and the
aligner runs through numba's JIT (or as plain Python without numba): same numbers, slower start.
``CAPMETRICS_METEOR_AOT=0`` turns the compiled module off; ``NUMBA_DISABLE_JIT=1`` runs the plain
Python functions.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
import warnings
from collections.abc import Callable
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np
from capmetrics.engine.notices import one_time_step
from capmetrics.errors import MetricError
from capmetrics.io.digests import sha256_file
from capmetrics.plugins.meteor._child import finish, run_child, start_child, stopped

MODULE = "capmetrics_meteor_aligner"
OFF_ENV = "CAPMETRICS_METEOR_AOT"
#: numba's types of the arguments of ``align_all`` (C-contiguous arrays), in order; it returns
#: int64 statistics (pairs x 23).
ARG_TYPES = (
    "i8",
    "i8",
    "i8",
    "i4",
    "i8",
    "i8",
    "u1",
    "i8",
    "i8",  # tests .. nb_val
    "i8",
    "i8",
    "i8",
    "i8",
    "i8",
    "i8",
    "i8",
    "i8",
    "i8",  # ng_off .. para_val
    "i8",
    "b1",
)  # kinds, exact_slot
_DTYPES = tuple(np.dtype(bool if t == "b1" else t) for t in ARG_TYPES)


def _signature() -> str:
    return f"i8[:,::1]({','.join(f'{t}[::1]' for t in ARG_TYPES)})"


def _key() -> str:
    here = Path(__file__).with_name("_align.py")
    digest = hashlib.sha256()
    for part in (
        here.read_bytes(),
        Path(__file__).with_name("_formula.py").read_bytes(),
        _signature().encode(),
    ):
        digest.update(part)
    for name in ("numba", "numpy"):
        try:
            digest.update(f"{name}={version(name)}".encode())
        except PackageNotFoundError:
            digest.update(f"{name}=none".encode())
    digest.update(f"{sys.version}|{sysconfig.get_config_var('EXT_SUFFIX')}|{sys.platform}".encode())
    return digest.hexdigest()[:16]


def _sha256(path: Path) -> str:
    return sha256_file(path)  # the bytes just built or about to be loaded: read every time


def _load(folder: Path) -> Callable[..., np.ndarray] | None:
    """The compiled ``align_all`` in ``folder``, or None where it is missing or fails its
    checksum."""
    files = list(folder.glob(f"{MODULE}*{sysconfig.get_config_var('EXT_SUFFIX')}"))
    check = folder / "sha256"
    if len(files) != 1 or not check.is_file() or check.read_text().strip() != _sha256(files[0]):
        return None
    spec = importlib.util.spec_from_file_location(MODULE, files[0])
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.align_all  # type: ignore[no-any-return]


def _build(folder: Path) -> None:
    """Compile ``_align.align_all`` with numba.pycc into ``folder`` (atomically: a temporary
    folder next to it is renamed). Raises whatever stops the compiler."""
    from capmetrics.plugins.meteor import _align

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".aligner-", dir=folder.parent))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pycc's pending-deprecation notice
            from numba.pycc import CC

            cc = CC(MODULE)
            cc.output_dir = str(tmp)
            cc.verbose = False
            cc.export("align_all", _signature())(_align.align_all.py_func)
            cc.compile()
        built = list(tmp.glob(f"{MODULE}*"))
        if len(built) != 1:
            raise RuntimeError(f"numba.pycc wrote {[p.name for p in built]}, expected one module")
        (tmp / "sha256").write_text(_sha256(built[0]) + "\n")
        try:
            os.replace(tmp, folder)
        except OSError:  # another process finished first: keep its module
            if _load(folder) is None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _adapted(kernel: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """``kernel`` taking any integer arrays: each is made the contiguous type of the signature."""

    def align_all(*arrays: np.ndarray) -> np.ndarray:
        return kernel(
            *(np.ascontiguousarray(a, dtype=t) for a, t in zip(arrays, _DTYPES, strict=True))
        )

    return align_all


def _jit() -> Callable[..., np.ndarray]:
    from capmetrics.plugins.meteor._align import align_all

    return align_all  # type: ignore[no-any-return]


def module_folder(root: Path) -> Path:
    """Where the compiled module for this aligner source, numba, numpy and Python lives."""
    return root / "meteor" / f"aligner-{_key()}"


def describe(root: Path) -> str:
    """What ``aligner(root)`` runs in this process, in words (for ``capmetrics setup meteor``)."""
    kernel = aligner(root)
    if kernel.__module__ == __name__:
        return f"compiled module in {module_folder(root)} (no numba at run time)"
    failed = module_folder(root).with_name(module_folder(root).name + ".failed")
    why = (
        failed.read_text().strip()
        if failed.is_file()
        else "turned off (CAPMETRICS_METEOR_AOT=0 or NUMBA_DISABLE_JIT)"
    )
    if type(kernel).__name__ == "function":
        return f"plain Python (numba is not installed or is disabled; slow): {why}"
    return (
        f"numba's JIT (the compiled module could not be built: {why}; delete {failed} to try again)"
    )


COMPILE_USUAL = "5-20 s"


def _failed(where: Path) -> Path:
    return where.with_name(where.name + ".failed")


def build_or_mark(root: Path) -> None:
    """Compile the module for the cache root ``root`` (announced on stderr); where that fails,
    write the reason next to it (``<folder>.failed``) so later runs use the JIT without trying."""
    where = module_folder(root)
    shutil.rmtree(where, ignore_errors=True)  # missing, corrupt or not importable: build it again
    try:
        with one_time_step("compiling METEOR's aligner (numba.pycc)", COMPILE_USUAL):
            _build(where)
    except Exception as err:  # no C compiler, no numba, a read-only cache: remember why
        try:
            where.parent.mkdir(parents=True, exist_ok=True)
            _failed(where).write_text(f"{type(err).__name__}: {err}\n")
        except OSError:
            pass


def _try_load(where: Path) -> Callable[..., np.ndarray] | None:
    try:
        return _load(where) if where.is_dir() else None
    except ImportError:
        return None


@lru_cache(maxsize=4)
def aligner(root: Path) -> Callable[..., np.ndarray]:
    """``align_all`` for this process: the compiled module under ``root/meteor`` (compiled on
    first use by a child process, so neither numba nor the compiler's memory stays here), else
    numba's JIT (or plain Python)."""
    if (
        os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
        or os.environ.get(OFF_ENV, "1") == "0"
    ):
        return _jit()
    started = _COMPILING.pop(root, None)
    if started is not None:  # a child started by the first use's table build: wait for it
        finish(started)
    where = module_folder(root)
    if _failed(
        where
    ).is_file():  # compiling did not work here before: do not pay for it on every run
        return _jit()
    kernel = _try_load(where)
    if kernel is None:
        _compile(root)
        if stopped():  # an interrupted preparation: not here either
            raise MetricError("METEOR's aligner compile was stopped")
        kernel = _try_load(where)
        if kernel is None and not _failed(where).is_file():  # the child could not run: compile here
            build_or_mark(root)
            kernel = _try_load(where)
        if kernel is None:
            return _jit()
    return _adapted(kernel)


#: Compiling children started ahead of the first call (by the first use's table build).
_COMPILING: dict[Path, Any] = {}


def _wanted(root: Path) -> bool:
    """Whether this process would compile the module for ``root`` (it is on, not built, not
    failed)."""
    if (
        os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")
        or os.environ.get(OFF_ENV, "1") == "0"
    ):
        return False
    where = module_folder(root)
    return not _failed(where).is_file() and _try_load(where) is None


def start_compile(root: Path) -> None:
    """Start compiling in a child process now, if it will be needed, so that it runs beside
    other first-use work; :func:`aligner` waits for it (else the end of this process does)."""
    if root not in _COMPILING and _wanted(root):
        if not _COMPILING:
            atexit.register(_finish_compiling)
        _COMPILING[root] = start_child("aligner", root)


def _finish_compiling() -> None:
    while _COMPILING:
        finish(_COMPILING.popitem()[1])


def _compile(root: Path) -> None:
    """Compile in a child process (see ``_child``)."""
    run_child("aligner", root)
