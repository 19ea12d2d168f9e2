"""Strict JSON for everything capmetrics writes, and bounded reading of what it reads.

Every JSON the project writes goes through :func:`dumps`: numpy scalars and arrays become
numbers and lists, tuples and sets become lists, paths become strings, and NaN/±inf become
``null`` (RFC 8259 has no NaN; ``jq`` and JavaScript reject Python's ``NaN`` tokens). A value
that has no JSON form is an error naming the key path where it sits, not a silent ``str()``.

Every file capmetrics reads whole (data, configs, cache manifests) goes through
:func:`read_bytes`: it must be a regular file (a FIFO or ``/dev/zero`` would hang or never end)
no larger than the input size limit (1 GiB; ``--max-input-size`` or ``$CAPMETRICS_MAX_INPUT_SIZE``
raise it). Standard input (the data file ``-``) goes through :func:`read_stdin`, bounded by the
same limit counted as the bytes come in. :func:`parse_json` turns every way JSON can be hostile
(nesting past the parser's recursion limit, a 5000-digit integer, ``NaN``) into a one-line
:class:`DataError`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
import weakref
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from pathlib import PurePath
from typing import Any

import numpy as np
from capmetrics.errors import CapmetricsError, DataError


def jsonable(value: Any, path: str = "$") -> Any:
    """``value`` as plain JSON types (dict, list, str, int, float, bool, None), recursively;
    non-finite floats become None."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, np.integer)) and not isinstance(value, np.bool_):
        return int(value)
    if isinstance(value, (float, np.floating)):
        f = float(value)
        return f if math.isfinite(f) else None
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biu":  # tolist() gives Python ints and bools
            return value.tolist()
        if value.dtype.kind == "f":  # whole-array: non-finite floats become None
            finite = np.isfinite(value)
            if finite.all():
                return value.tolist()
            out = value.astype(object)
            out[~finite] = None
            return out.tolist()
        return [jsonable(v, f"{path}[{i}]") for i, v in enumerate(value.tolist())]
    if isinstance(value, Mapping):
        return {_key(k, path): jsonable(v, f"{path}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v, f"{path}[{i}]") for i, v in enumerate(items)]
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, complex) or isinstance(value, np.complexfloating):
        raise CapmetricsError(f"cannot write {path} as JSON: complex number {value!r}")
    raise CapmetricsError(f"cannot write {path} as JSON: {type(value).__name__} has no JSON form")


def _key(key: Any, path: str) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, (int, float, bool, np.integer, np.floating)) or key is None:
        return json.dumps(jsonable(key))
    raise CapmetricsError(f"cannot write {path} as JSON: key {key!r} is a {type(key).__name__}")


def dumps(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``value`` (see :func:`jsonable`), UTF-8 characters kept."""
    return json.dumps(jsonable(value), indent=indent, ensure_ascii=False, allow_nan=False)


def loads_strict(text: str) -> Any:
    """Parse JSON and refuse the non-standard ``NaN``/``Infinity`` tokens Python accepts."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-standard JSON token {token}")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------------------------------
# Bounded reading: every file capmetrics reads (data, configs, manifests) goes through here.

#: Environment variable that raises (or lowers) the size limit of a file read whole, in bytes
#: or with a K/M/G/T suffix; ``capmetrics score --max-input-size`` sets it for one run.
SIZE_ENV = "CAPMETRICS_MAX_INPUT_SIZE"
#: The default size limit: 1 GiB (a JSONL file over 256 MiB is streamed, each line bounded).
DEFAULT_MAX_BYTES = 1 << 30
#: Nesting deeper than this in a config or manifest is refused (the formats need 4 levels).
MAX_DEPTH = 64
#: An integer literal longer than this is refused (Python's int/str conversion limit is 4300),
#: and so is an item id longer than this as text.
MAX_INT_DIGITS = 1000
_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_limit_override: ContextVar[int | None] = ContextVar("max_input_bytes", default=None)


def parse_size(text: str, what: str = SIZE_ENV) -> int:
    """``"512M"`` -> 536870912: a positive size in bytes, with an optional K/M/G/T suffix
    (powers of 1024, an ``i``/``B`` after it allowed: ``2GiB``)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    if not match or float(match.group(1)) <= 0:
        raise CapmetricsError(f"{what} must be a size such as 1073741824, 512M or 4G, got {text!r}")
    return int(float(match.group(1)) * _SUFFIXES[match.group(2).upper()])


def max_input_bytes() -> int:
    """The size limit of a file read whole: :func:`limit_input`'s, else
    ``$CAPMETRICS_MAX_INPUT_SIZE``, else 1 GiB."""
    override = _limit_override.get()
    if override is not None:
        return override
    env = os.environ.get(SIZE_ENV, "").strip()
    return parse_size(env) if env else DEFAULT_MAX_BYTES


@contextlib.contextmanager
def limit_input(max_bytes: int | None) -> Iterator[None]:
    """Within the block, files are read up to ``max_bytes`` (None: the usual limit)."""
    token = _limit_override.set(max_bytes)
    try:
        yield
    finally:
        _limit_override.reset(token)


def _problem(
    source: str, message: str, line: int | None = None, header: str | None = None
) -> DataError:
    from capmetrics.data.model import Problem

    return DataError(
        [Problem(source, None, message, line)], header=header or f"cannot load {source}"
    )


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (``a FIFO (named pipe)``, ...)."""
    for test, word in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return word
    return "not a regular file"


def check_regular_file(
    path: str | os.PathLike[str], what: str = "input", header: str | None = None
) -> int:
    """The size of ``path``, which must be a regular file (a link to one is fine): a FIFO, a
    device such as ``/dev/zero`` or a folder is refused by name before anything reads it (a
    read would hang or never end).

    Raises:
        DataError: naming the path and what it is.
    """
    source = os.fspath(path)
    try:
        info = os.stat(source)
    except OSError as err:
        raise _problem(source, f"cannot read: {err.strerror}", header=header) from err
    except ValueError as err:  # an embedded NUL byte
        raise _problem(source, f"cannot read: {err}", header=header) from err
    if not stat.S_ISREG(info.st_mode):
        raise _problem(
            source,
            f"{what} must be a regular file; this is {file_kind(info.st_mode)}",
            header=header,
        )
    return info.st_size


def _too_big(source: str, size: str, limit: int, header: str | None) -> DataError:
    return _problem(
        source,
        f"{size} is over the input size limit of {limit:,} bytes; raise it with "
        f"--max-input-size or ${SIZE_ENV} (e.g. 4G)",
        header=header,
    )


def read_bytes(
    path: str | os.PathLike[str],
    what: str = "input",
    max_bytes: int | None = None,
    header: str | None = None,
) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes`` (default
    :func:`max_input_bytes`); a larger file is refused before it is read, and reading stops
    there should it grow meanwhile.

    Raises:
        DataError: not a regular file, unreadable, or over the limit (naming how to raise it).
    """
    source = os.fspath(path)
    limit = max_input_bytes() if max_bytes is None else max_bytes
    size = check_regular_file(source, what, header)
    if size > limit:
        raise _too_big(source, f"{size:,} bytes", limit, header)
    try:
        with open(source, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as err:
        raise _problem(source, f"cannot read: {err.strerror}", header=header) from err
    if len(data) > limit:
        raise _too_big(source, "the file grew while read and", limit, header)
    return data


#: The data file name that means standard input (``capmetrics score -``).
STDIN = "-"
#: What standard input is called in messages.
STDIN_NAME = "<stdin>"
_STREAM_BLOCK = 1 << 20
_stdin_read: weakref.WeakSet[Any] = weakref.WeakSet()


def is_stdin(path: str | os.PathLike[str] | None) -> bool:
    """Whether ``path`` is ``-``, standard input."""
    return path is not None and os.fspath(path) == STDIN


def read_stream(
    handle: Any,
    source: str = STDIN_NAME,
    max_bytes: int | None = None,
    header: str | None = None,
    json_text: bool = True,
) -> bytes | bytearray:
    """The bytes of the binary stream ``handle`` (a pipe: its size is unknown), at most
    ``max_bytes`` (default :func:`max_input_bytes`), counted while they are read: reading stops
    one block past the limit. With ``json_text``, a NUL byte or a first character other than
    ``{`` or ``[`` (after a BOM and whitespace) ends the read at once, since JSON and JSONL
    data never hold one (``cat /dev/zero | capmetrics score -`` stops at its first block).

    Raises:
        DataError: over the limit, not JSON text, or a read error, naming ``source``.
    """
    limit = max_input_bytes() if max_bytes is None else max_bytes
    buf = bytearray()
    started = not json_text
    while True:
        try:
            block = handle.read(min(_STREAM_BLOCK, limit + 1 - len(buf)))
        except OSError as err:
            raise _problem(source, f"cannot read: {err.strerror or err}", header=header) from err
        if not block:
            return buf
        if isinstance(block, str):  # a text stream put in place of sys.stdin (a notebook's)
            block = block.encode("utf-8")
        if json_text:
            nul = block.find(b"\0")
            if nul >= 0:
                at = len(buf) + nul
                raise _problem(
                    source,
                    f"holds a NUL byte at byte {at:,}: not JSON or JSONL text",
                    bytes(buf).count(b"\n") + block[:nul].count(b"\n") + 1,
                    header,
                )
        buf += block
        if not started:
            head = bytes(buf[:4096]).removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n")
            if head:
                started = True
                if head[:1] not in (b"{", b"["):
                    raise _problem(
                        source,
                        f"does not start like JSON or JSONL (first character {head[:1]!r}); "
                        "the data is a JSON object or list, or JSON objects one per line",
                        header=header,
                    )
        if len(buf) > limit:
            raise _too_big(source, f"what came in ({len(buf):,} bytes so far)", limit, header)


def read_stdin(max_bytes: int | None = None, header: str | None = None) -> bytes | bytearray:
    """Standard input, read whole through :func:`read_stream` (once per process: a second read
    is refused by name, as it would find nothing). A terminal is refused: pipe the data in.

    Raises:
        DataError: see :func:`read_stream`; standard input already read; a terminal.
    """
    import sys

    stream = sys.stdin
    if stream is None:
        raise _problem(STDIN_NAME, "there is no standard input to read", header=header)
    handle = getattr(stream, "buffer", stream)
    if handle in _stdin_read:
        raise _problem(
            STDIN_NAME,
            "standard input was already read in this run (it can be read once): give the "
            "other inputs as files",
            header=header,
        )
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError, OSError):  # closed or replaced by a plain object
        terminal = False
    if terminal:
        raise _problem(
            STDIN_NAME,
            "standard input is a terminal; pipe the data in (cat data.jsonl | capmetrics "
            "score -) or give a file",
            header=header,
        )
    with contextlib.suppress(TypeError):
        _stdin_read.add(handle)
    return read_stream(handle, STDIN_NAME, max_bytes, header)


class _LongInteger(ValueError):
    """An integer literal of more than :data:`MAX_INT_DIGITS` digits."""


def _bounded_int(text: str) -> int:
    digits = len(text) - (text[:1] == "-")
    if digits > MAX_INT_DIGITS:
        raise _LongInteger(
            f"holds an integer of {digits:,} digits; at most {MAX_INT_DIGITS} are read "
            "(ids are strings or integers of a sane length)"
        )
    return int(text)


def depth_over(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and dicts nest deeper than ``limit`` in ``value`` (walked without
    recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in node if isinstance(child, (list, dict)))
    return False


def parse_json(
    text: str | bytes,
    source: str,
    line: int | None = None,
    max_depth: int | None = None,
    header: str | None = None,
    allow_nan: bool = True,
) -> Any:
    """``json.loads`` of ``text``, bounded: invalid JSON, nesting too deep for the parser (or
    deeper than ``max_depth``), an integer of more than 1000 digits and (unless ``allow_nan``)
    the non-standard ``NaN``/``Infinity`` tokens are each a one-line :class:`DataError` naming
    the source and line."""
    try:
        value = (_DECODER if allow_nan else _STRICT_DECODER).decode(
            text.decode("utf-8") if isinstance(text, bytes) else text
        )
    except json.JSONDecodeError as err:
        raise _problem(
            source, f"not valid JSON: {err.msg}", err.lineno if line is None else line, header
        ) from err
    except RecursionError as err:
        raise _problem(
            source, "JSON nested too deeply (hundreds of levels; the formats need 3)", line, header
        ) from err
    except _LongInteger as err:
        raise _problem(source, str(err), line, header) from err
    except (ValueError, UnicodeDecodeError) as err:
        raise _problem(source, f"not valid JSON: {err}", line, header) from err
    if max_depth is not None and depth_over(value, max_depth):
        raise _problem(source, f"JSON nested more than {max_depth} levels deep", line, header)
    return value


def _refuse_constant(token: str) -> Any:
    raise ValueError(f"non-standard JSON token {token}")


#: Built once: ``json.loads`` with arguments would build a decoder per call (per JSONL line).
_DECODER = json.JSONDecoder(parse_int=_bounded_int)
_STRICT_DECODER = json.JSONDecoder(parse_int=_bounded_int, parse_constant=_refuse_constant)


def read_json(
    path: str | os.PathLike[str],
    what: str = "input",
    max_bytes: int | None = None,
    max_depth: int | None = None,
    header: str | None = None,
    allow_nan: bool = True,
) -> Any:
    """A JSON file read through :func:`read_bytes` and :func:`parse_json` (UTF-8, BOM allowed)."""
    source = os.fspath(path)
    data = read_bytes(source, what, max_bytes, header)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise _problem(
            source, f"invalid UTF-8 at byte {err.start}", data[: err.start].count(b"\n") + 1, header
        ) from err
    return parse_json(text, source, max_depth=max_depth, header=header, allow_nan=allow_nan)
