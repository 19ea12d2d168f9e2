"""Model folders are untrusted input: checked before a third-party library opens one.

transformers, sentence-transformers and open_clip open the files of a model folder with plain
``open()``: a FIFO named ``modules.json`` or ``config.json`` would block the run forever, a link
to ``/dev/zero`` named ``tokenizer.json`` would read until memory runs out. Every model-folder
loader calls :func:`check_model_path` first: every file in the folder (its subfolders too; links
followed, dot-folders such as ``.git`` left out) must be a regular file, and the text files a
library parses whole (configs, tokenizers: anything but weights) must be within the input size
limit (1 GiB; ``--max-input-size``, ``$CAPMETRICS_MAX_INPUT_SIZE``). Weight files
(``.safetensors``, ``.bin``, ``.pt``, ...) are read as tensors, memory-mapped where the format
allows, so only their kind is checked. The folder is walked on every check (a FIFO put in a
subfolder later leaves the folder's own modification time as it was; walking costs little next to
loading a model). The first file that fails is a one-line
:class:`~capmetrics.errors.MetricError` naming it and what it is. A name that is no local path
(a model hub name) is left to the library.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from capmetrics.errors import MetricError
from capmetrics.io.strict_json import SIZE_ENV, file_kind, max_input_bytes

#: Files read as tensors (the size limit does not apply; they must still be regular files).
WEIGHT_SUFFIXES = frozenset(
    {
        ".safetensors",
        ".bin",
        ".pt",
        ".pth",
        ".ckpt",
        ".h5",
        ".msgpack",
        ".onnx",
        ".gguf",
        ".npy",
        ".npz",
        ".ot",
        ".pb",
        ".tflite",
    }
)
#: The files Hugging Face libraries read beside a single weight file (a ``.gguf``'s folder).
SIDE_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
)
#: A folder with more entries than this, or nested deeper, is not a model folder.
MAX_ENTRIES = 20_000
MAX_DEPTH = 8


def _check_file(file: str, info: os.stat_result, name: str, what: str, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise MetricError(
            f"{what}: {name} is {file_kind(info.st_mode)}, not a regular file; a model folder "
            "holds regular files only (a pipe would hang the run, a device would never end)"
        )
    if info.st_size > limit and Path(file).suffix.lower() not in WEIGHT_SUFFIXES:
        raise MetricError(
            f"{what}: {name} is {info.st_size:,} bytes, over the input size limit of {limit:,} "
            f"bytes for a file read whole; raise it with --max-input-size or ${SIZE_ENV}"
        )


def check_model_path(path: str | os.PathLike[str], what: str | None = None) -> str:
    """``path`` as a string, once the model folder (or file) it names is safe to hand to a
    library (see the module doc); a path that does not exist (a hub name) is returned as it is.

    Args:
        path: a model folder, a single model file, or a hub name.
        what: how messages name the model (default ``model='<path>'``).

    Raises:
        MetricError: naming the first file that is not a regular file, or a text file over the
            size limit, or a folder too large or deep to be a model folder.
    """
    text = os.fspath(path)
    what = what or f"model={text!r}"
    try:
        info = os.stat(text)
    except (OSError, ValueError):
        return text  # no such local path: a hub name, or the library's own error
    limit = max_input_bytes()
    if not stat.S_ISDIR(info.st_mode):
        _check_file(text, info, repr(text), what, limit)
        folder = os.path.dirname(text) or "."
        for side in SIDE_FILES:  # what a library reads beside a single file (a .gguf)
            beside = os.path.join(folder, side)
            try:
                side_info = os.stat(beside)
            except (OSError, ValueError):
                continue
            _check_file(beside, side_info, repr(beside), what, limit)
        return text
    _check_folder(text, info, what, limit)
    return text


def _check_folder(root: str, info: os.stat_result, what: str, limit: int) -> None:
    seen = {(info.st_dev, info.st_ino)}
    stack: list[tuple[str, int]] = [(root, 0)]
    entries = 0
    while stack:
        folder, depth = stack.pop()
        try:
            listing = list(os.scandir(folder))
        except OSError:
            continue  # unreadable: the library reports it
        for entry in sorted(listing, key=lambda e: e.name):
            entries += 1
            if entries > MAX_ENTRIES:
                raise MetricError(
                    f"{what}: the folder holds more than {MAX_ENTRIES:,} files; not a model folder"
                )
            try:
                entry_info = entry.stat(follow_symlinks=True)
            except OSError:
                continue  # a broken link cannot hang a run; the library names it if it needs it
            name = repr(os.path.relpath(entry.path, root))
            if stat.S_ISDIR(entry_info.st_mode):
                key = (entry_info.st_dev, entry_info.st_ino)
                if entry.name.startswith(".") or key in seen:
                    continue  # .git, .cache: no library reads them; a link loop ends here
                if depth + 1 > MAX_DEPTH:
                    raise MetricError(
                        f"{what}: folders nest more than {MAX_DEPTH} levels deep ({name}); "
                        "not a model folder"
                    )
                seen.add(key)
                stack.append((entry.path, depth + 1))
            else:
                _check_file(entry.path, entry_info, name, what, limit)


__all__ = ["check_model_path"]
