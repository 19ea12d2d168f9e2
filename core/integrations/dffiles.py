"""The one reader of document-frequency (df) files for the CIDEr integrations.

A ``df`` names a table of n-gram document frequencies, in one of two formats:

- the pickle that self-critical.pytorch's ``scripts/prepro_ngrams.py`` writes (``data/<name>.p``,
  ``-words.p`` or ``-idxs.p``): ``{"document_frequency": {n-gram tuple: count}, "ref_len":
  images}``, protocol 2, its table a ``collections.defaultdict(float)``. It is read by a
  restricted unpickler that builds only those shapes (dicts, that defaultdict, tuples, strings,
  bytes, integers, floats): any other object the file asks for (a ``__reduce__`` payload naming
  ``os.system`` and the like) is refused by name before anything is called, so reading a df
  someone shared runs no code;
- capmetrics' own df file (JSON, optionally gzipped), written by ``cider-d``'s ``save_df``, read
  by the ``cider-d`` component itself (``df=<path>``). :func:`convert_df` turns a pickle into it.

A name that is not a file is looked up as ``data/<name>.p`` from the working directory, as
ruotianluo/cider does.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from capmetrics.errors import MetricError

__all__ = ["DfPickleRefused", "convert_df", "df_kind", "df_path", "read_df_pickle"]

EXPECTED = (
    "expected the pickle self-critical.pytorch's scripts/prepro_ngrams.py writes: "
    "{'document_frequency': {n-gram tuple: count}, 'ref_len': number of images}"
)

#: The only globals a prepro_ngrams pickle names (its table is a defaultdict(float); Python 2
#: pickles spell builtins ``__builtin__``). Everything else is refused before it is called.
_ALLOWED = {
    ("collections", "defaultdict"),
    ("builtins", "float"),
    ("builtins", "int"),
    ("__builtin__", "float"),
    ("__builtin__", "int"),
}
_FACTORIES = (float, int)


class DfPickleRefused(MetricError):
    """A df pickle asks for an object that prepro_ngrams never writes (nothing was run)."""


def _defaultdict(factory: Any = None, *rest: Any) -> dict[Any, Any]:
    """``collections.defaultdict(float)`` as the unpickler may build it: a factory of float or
    int only, and a plain dict as the result (nothing of the file's choosing is kept)."""
    if rest or (factory is not None and factory not in _FACTORIES):
        raise pickle.UnpicklingError("a defaultdict with a default factory other than float or int")
    return {}


class _DfUnpickler(pickle.Unpickler):
    """Builds dicts, tuples, lists, strings, bytes and numbers; of the globals only
    ``collections.defaultdict`` (as a dict) and ``float``/``int`` (as its default factory)."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise DfPickleRefused(f"{module}.{name}")
        return _defaultdict if name == "defaultdict" else (float if name == "float" else int)

    def persistent_load(self, pid: Any) -> Any:
        raise DfPickleRefused(f"persistent id {pid!r:.40}")


def df_path(df: str | os.PathLike[str]) -> Path:
    """The file that ``df`` names: an existing path as it is, else ``data/<df>.p`` (from the
    working directory, as ruotianluo/cider opens it)."""
    path = Path(df)
    if path.is_file():
        return path
    named = Path("data") / f"{df}.p"
    if named.is_file():
        return named
    raise MetricError(
        f"df={str(df)!r}: no such file, and no {named} in {Path.cwd()} "
        "(a name is looked up as data/<name>.p, as ruotianluo/cider does)"
    )


def df_kind(path: str | os.PathLike[str]) -> Literal["pickle", "capmetrics"]:
    """Which reader a df file needs, from its first byte: a pickle (protocol 2 or later, as
    prepro_ngrams writes, or Python 2's protocols 0 and 1) or capmetrics' JSON df (plain or
    gzipped)."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError as err:
        raise MetricError(f"cannot read the df file {path}: {err}") from err
    if head[:1] in (
        b"\x80",
        b"(",
        b"}",
    ):  # PROTO; a protocol 0/1 dict starts with MARK or EMPTY_DICT
        return "pickle"
    if head == b"\x1f\x8b" or head.lstrip()[:1] == b"{":
        return "capmetrics"
    raise MetricError(
        f"df file {path} is neither a prepro_ngrams pickle nor a capmetrics df file "
        f"(JSON, written by cider-d's save_df); {EXPECTED}"
    )


def read_df_pickle(path: str | os.PathLike[str]) -> tuple[dict[str, int], int]:
    """A prepro_ngrams df pickle as (n-gram -> document frequency, with the n-gram's words joined
    by single spaces; the image count ``ref_len``), the form ``cider-d`` fits from.

    Read without running code (see the module doc); a refused object raises
    :class:`DfPickleRefused` naming the file and the object."""
    try:
        with open(path, "rb") as f:
            data = _DfUnpickler(f, encoding="latin1").load()
    except DfPickleRefused as err:
        raise DfPickleRefused(
            f"df pickle {path} asks for {err}, which a prepro_ngrams df never holds (only dicts, "
            "tuples, strings and numbers): refused, nothing in it was run; if you made this file, "
            "convert it in a session you trust (see capmetrics.integrations.dffiles.convert_df)"
        ) from None
    except (
        OSError,
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        ImportError,
        IndexError,
        KeyError,
        RecursionError,
        MemoryError,
    ) as err:
        raise MetricError(
            f"cannot read the df pickle {path}: {type(err).__name__}: {err}; {EXPECTED}"
        ) from err
    if not isinstance(data, Mapping) or not {"document_frequency", "ref_len"} <= data.keys():
        got = sorted(map(str, data))[:5] if isinstance(data, Mapping) else type(data).__name__
        raise MetricError(f"{path} is not a prepro_ngrams df pickle (got {got}); {EXPECTED}")
    table, ref_len = data["document_frequency"], data["ref_len"]
    if (
        not isinstance(table, Mapping)
        or isinstance(ref_len, bool)
        or not isinstance(ref_len, (int, float))
        or not ref_len >= 1
    ):
        raise MetricError(
            f"{path}: 'document_frequency' must be a dict and 'ref_len' a positive "
            f"number; {EXPECTED}"
        )
    df: dict[str, int] = {}
    for gram, count in table.items():
        if (
            not isinstance(gram, tuple)
            or not 1 <= len(gram) <= 4
            or not all(isinstance(w, str) for w in gram)
        ):
            raise MetricError(
                f"{path}: document_frequency key {gram!r:.60} is not a tuple of 1-4 "
                f"words; {EXPECTED}"
            )
        if (
            isinstance(count, bool)
            or not isinstance(count, (int, float))
            or not np.isfinite(count)
            or count != int(count)
            or count < 0
        ):
            raise MetricError(
                f"{path}: document_frequency[{gram!r:.60}] = {count!r:.40} is not a count"
            )
        if count:
            df[" ".join(gram)] = int(count)
    return df, int(ref_len)


def convert_df(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Write the prepro_ngrams pickle ``source`` (a path or a ``data/<name>.p`` name) as a
    capmetrics df file (JSON; ``.gz``: gzipped), which ``CiderD(df=target)``,
    ``CiderDReward(target)`` and ``cider-d(df=target)`` read; returns ``target``."""
    from capmetrics.components.base import Distance
    from capmetrics.registry.compose import compose

    table, images = read_df_pickle(df_path(source))
    metric = compose("cider-d", "distance", tokenizer=compose("whitespace", "tokenizer"))
    assert isinstance(metric, Distance)
    metric.fit_states([(table, images)])  # type: ignore[attr-defined]
    metric.save_df(target)  # type: ignore[attr-defined]
    return Path(target)
