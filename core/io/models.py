"""What identifies a model, for signatures and cache keys.

A model folder is identified by its files: the SHA-256 of its weight and configuration files
(``.safetensors``, ``.bin``, ``.json``; each one's path relative to the folder, then its bytes,
in sorted order), so the same files anywhere have the same identity and any changed byte gives
another. The digest is remembered across runs by the files' ``stat`` (``capmetrics.io.digests``):
a folder whose files are unchanged is not read again. A name that is no folder (a model hub
name) is identified by its name and revision, a bundled default model by its package's version.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from capmetrics.io.digests import file_digest, files_digest

__all__ = [
    "IDENTITY_SUFFIXES",
    "file_digest",
    "folder_digest",
    "installed_version",
    "model_identity",
]

#: The files of a model folder that its identity covers.
IDENTITY_SUFFIXES = (".safetensors", ".bin", ".json")


def folder_digest(folder: str | Path) -> str:
    """``sha256:<hex>`` of the folder's files with :data:`IDENTITY_SUFFIXES` (subfolders too)."""
    root = Path(folder)
    files = sorted(p for p in root.rglob("*") if p.suffix in IDENTITY_SUFFIXES and p.is_file())
    return f"sha256:{files_digest(files, root)}"


def model_identity(
    model: str | None, path: str | Path, revision: str | None = None, package: str | None = None
) -> str:
    """The identity of ``model`` (as the user named it; None: the bundled default, installed as
    the distribution ``package``) found at ``path``: ``package==version`` for the default, the
    :func:`folder_digest` of a folder, else ``model@revision`` (``@default`` without one)."""
    if model is None and package is not None:
        return f"{package}=={version(package)}"
    if not Path(path).is_dir():
        return f"{model}@{revision or 'default'}"
    return folder_digest(path)


def installed_version(dist: str, missing: str = "unknown") -> str:
    """The installed version of distribution ``dist``, or ``missing`` where it is not installed."""
    try:
        return version(dist)
    except PackageNotFoundError:
        return missing
