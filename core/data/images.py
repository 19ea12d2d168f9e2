"""Images of items: where they are, whether they can be read, and opening them.

An item's ``image`` is a local path or an already loaded ``PIL.Image.Image``. The loaders
resolve relative paths against the data file's folder, or against ``images`` (``--images
DIR``) when it is given; an item without an image whose id names a file in ``images``
(``<id>.jpg``, ``.jpeg``, ``.png``, ...: the convention of clipscore.py) gets that file.
Metrics that need images (``Distance.needs_images``) check every item before any work, and
report every missing or unreadable image at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

from capmetrics.data.model import Dataset, Item, Problem
from capmetrics.errors import DataError, MetricError

#: Suffixes tried for ``<images>/<id>.<suffix>`` (clipscore.py's convention).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG", ".tiff", ".bmp", ".webp")


def resolve_image(value: Any, base: Path | None, images: Path | None) -> Any:
    """``value`` as a path against ``images`` (else ``base``) if it is a relative path;
    loaded images and absolute paths unchanged."""
    if isinstance(value, (str, os.PathLike)):
        p = Path(value).expanduser()
        if not p.is_absolute():
            root = images if images is not None else base
            if root is not None:
                p = root / p
        return str(p)
    return value


def with_images(dataset: Dataset, base: Path | None = None, images: str | Path | None = None) -> Dataset:
    """The dataset with every item's image resolved (see the module doc)."""
    if images is None and all(item.image is None for item in dataset.items):
        return dataset
    root = Path(images).expanduser() if images is not None else None
    if root is not None and not root.is_dir():
        raise DataError([Problem(str(images), None, "--images is not a folder")], header="cannot use --images")
    by_stem: dict[str, str] | None = None
    items = []
    for item in dataset.items:
        image = item.image
        if image is None and root is not None:
            if by_stem is None:
                by_stem = _files_by_stem(root)
            image = by_stem.get(str(item.id))
        elif image is not None:
            image = resolve_image(image, base, root)
        items.append(item if image is item.image else dataclasses.replace(item, image=image))
    return Dataset(items, dataset.source, list(dataset.skipped))


def _files_by_stem(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in sorted(os.listdir(root)):
        stem, suffix = os.path.splitext(name)
        if suffix in IMAGE_SUFFIXES:
            out.setdefault(stem, str(root / name))
    return out


def image_key(image: Any) -> Hashable:
    """What identifies an image within a run: its path, or the loaded object itself."""
    if isinstance(image, (str, os.PathLike)):
        return ("path", os.fspath(image))
    return ("object", id(image))


def open_image(image: Any) -> Any:
    """A decoded ``PIL.Image.Image`` (as the file stores it: no mode conversion, no EXIF
    rotation, like the reference code) from a path or a loaded image."""
    from PIL import Image

    if isinstance(image, Image.Image):
        return image
    if isinstance(image, (str, os.PathLike)):
        with Image.open(os.fspath(image)) as opened:
            opened.load()
            return opened
    raise MetricError(f"an image must be a path or a PIL image, got {type(image).__name__}")


def image_problem(image: Any) -> str | None:
    """Why ``image`` cannot be used (no image, no file, not an image file), or None; reads
    only the file's header."""
    if image is None:
        return "has no image (give one with the 'image' field or --images DIR)"
    if isinstance(image, (str, os.PathLike)):
        p = Path(image)
        if not p.is_file():
            return f"image {os.fspath(image)!r} does not exist" if not p.exists() else f"image {os.fspath(image)!r} is not a file"
        from PIL import Image, UnidentifiedImageError

        try:
            with Image.open(p) as opened:
                opened.size  # noqa: B018 - the header is read
        except UnidentifiedImageError:
            return f"image {os.fspath(image)!r} is not an image file PIL can read"
        except OSError as err:
            return f"image {os.fspath(image)!r} cannot be read: {err.strerror or err}"
        return None
    try:
        from PIL import Image
    except ImportError:
        return "has a loaded image but Pillow is not installed"
    if not isinstance(image, Image.Image):
        return f"image must be a path or a PIL image, got {type(image).__name__}"
    return None


def check_images(dataset: Dataset, spec: str) -> None:
    """Raise one DataError listing every item whose image is missing or unreadable."""
    problems = []
    for item in dataset.items:
        why = image_problem(item.image)
        if why is not None:
            problems.append(Problem(dataset.source, item.id, why))
    if problems:
        raise DataError(problems, header=f"{spec} needs an image for every item")


def check_references(dataset: Dataset, spec: str) -> None:
    """Raise one DataError listing the items without references (``spec`` needs them)."""
    problems = [Problem(dataset.source, item.id, "has no references") for item in dataset.items if not item.references]
    if problems:
        raise DataError(problems, header=f"{spec} needs references")


class ImageProblems:
    """Decoding failures gathered across threads, raised together at the end."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def collect(self, image: Any) -> Iterator[None]:
        try:
            yield
        except (OSError, ValueError, SyntaxError) as err:  # PIL raises these on damaged files
            name = os.fspath(image) if isinstance(image, (str, os.PathLike)) else type(image).__name__
            with self._lock:
                self.problems.append(f"image {name!r} cannot be decoded: {err}")

    def raise_if_any(self) -> None:
        if self.problems:
            raise DataError([Problem("images", None, p) for p in self.problems], header="cannot read images")


def items_with(dataset: Dataset, images: Sequence[Any]) -> Dataset:
    """The dataset with ``images[i]`` as item i's image (Python use)."""
    if len(images) != len(dataset.items):
        raise DataError([Problem(dataset.source, None, f"{len(images)} images for {len(dataset.items)} items")])
    return Dataset([dataclasses.replace(item, image=im) for item, im in zip(dataset.items, images)],
                   dataset.source, list(dataset.skipped))


__all__ = ["IMAGE_SUFFIXES", "ImageProblems", "Item", "check_images", "check_references", "image_key",
           "image_problem", "items_with", "open_image", "resolve_image", "with_images"]
