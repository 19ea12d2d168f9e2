"""Images of items: where they are, whether they can be read, and opening them.

An item's ``image`` is a local path or an already loaded ``PIL.Image.Image``. The loaders
resolve relative paths against the data file's folder, or against ``images`` (``--images
DIR``) when it is given; an item without an image whose id names a file in ``images``
(``<id>.jpg``, ``.jpeg``, ``.png``, ...: the convention of clipscore.py) gets that file.
Metrics that need images (``Distance.needs_images``) check every item before any work, and
report every missing or unreadable image at once.

Images are untrusted input: a path must be a regular file of sane length; only JPEG (and
its MPO variant), PNG, WebP, BMP, TIFF and GIF (first frame) are opened (an EPS file named
``.jpg`` is refused, never handed to Ghostscript); and the pixel count and aspect ratio are
checked from the header, before decoding (:class:`ImageLimits`; a decompression bomb or a
1 × 100000 strip is an input error, not an out-of-memory). The limits can be raised:
:func:`use_image_limits`, ``--max-image-pixels`` / ``--max-image-aspect``, or the
environment variables ``CAPMETRICS_MAX_IMAGE_PIXELS`` / ``CAPMETRICS_MAX_IMAGE_ASPECT``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
import re
import stat
import threading
import warnings
from collections.abc import Hashable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from capmetrics.data.model import Dataset, Item, Problem
from capmetrics.errors import DataError, MetricError
from capmetrics.io.identity import Identity

#: Suffixes tried for ``<images>/<id>.<suffix>`` (clipscore.py's convention).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG", ".tiff", ".bmp", ".webp")
#: The image formats that are opened (Pillow's names; a camera's multi-picture JPEG opens as JPEG).
IMAGE_FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "TIFF", "GIF")
#: Longest image path accepted (characters), and longest part of it (the usual NAME_MAX).
MAX_PATH_CHARS = 4096
MAX_NAME_CHARS = 255


@dataclasses.dataclass(frozen=True)
class ImageLimits:
    """What an image's header may declare before it is decoded.

    Args:
        max_pixels: width × height at most (default: Pillow's ``MAX_IMAGE_PIXELS``, 89.5
            million, about 9459 × 9459; a 30000 × 30000 PNG is 900 million).
        max_aspect: the longer side at most this many times the shorter (a 1 × 100000 strip
            would be resized to 224 × 22.4 million pixels).
    """

    max_pixels: int = 89_478_485
    max_aspect: float = 50.0

    def problem(self, size: tuple[int, int]) -> str | None:
        """Why an image of ``size`` (width, height) is refused, or None."""
        width, height = size
        if width < 1 or height < 1:
            return f"declares an empty size ({width} × {height})"
        if width * height > self.max_pixels:
            return (
                f"is {width} × {height} = {width * height:,} pixels, more than the limit of "
                f"{self.max_pixels:,} (raise it with --max-image-pixels or "
                "CAPMETRICS_MAX_IMAGE_PIXELS)"
            )
        if max(width, height) > self.max_aspect * min(width, height):
            return (
                f"is {width} × {height}, an aspect ratio over the limit of "
                f"{self.max_aspect:g}:1 (raise it with --max-image-aspect or "
                "CAPMETRICS_MAX_IMAGE_ASPECT)"
            )
        return None


def _env_limits() -> ImageLimits:
    limits = ImageLimits()
    for field, name, kind in (
        ("max_pixels", "CAPMETRICS_MAX_IMAGE_PIXELS", int),
        ("max_aspect", "CAPMETRICS_MAX_IMAGE_ASPECT", float),
    ):
        text = os.environ.get(name)
        if text:
            try:
                value = kind(text)
            except ValueError:
                raise MetricError(f"${name} must be a number, got {text!r}") from None
            if value <= 0:
                raise MetricError(f"${name} must be positive, got {text!r}")
            override: dict[str, Any] = {field: value}
            limits = dataclasses.replace(limits, **override)
    return limits


_LIMITS: ContextVar[ImageLimits | None] = ContextVar("capmetrics_image_limits", default=None)


def image_limits() -> ImageLimits:
    """The limits in force: :func:`use_image_limits`'s, else the environment's, else the
    defaults."""
    return _LIMITS.get() or _env_limits()


@contextlib.contextmanager
def use_image_limits(
    max_pixels: int | None = None, max_aspect: float | None = None
) -> Iterator[ImageLimits]:
    """Within the block, images may declare up to ``max_pixels`` and ``max_aspect`` (None:
    keep the current limit)."""
    current = image_limits()
    for name, value in (("max_pixels", max_pixels), ("max_aspect", max_aspect)):
        if value is not None and (isinstance(value, bool) or not value > 0):
            raise MetricError(f"{name} must be positive, got {value!r}")
    limits = ImageLimits(
        int(max_pixels) if max_pixels is not None else current.max_pixels,
        float(max_aspect) if max_aspect is not None else current.max_aspect,
    )
    token = _LIMITS.set(limits)
    try:
        yield limits
    finally:
        _LIMITS.reset(token)


def path_problem(image: str | os.PathLike[str]) -> str | None:
    """Why the path ``image`` is not a readable regular file of sane length, or None (no
    exception: a 5000-character path or a NUL byte is a named problem, not ``ENAMETOOLONG``)."""
    text = os.fspath(image)
    name = _short(text)
    if "\0" in str(text):
        return f"image path {name} contains a NUL character"
    if len(text) > MAX_PATH_CHARS or any(len(part) > MAX_NAME_CHARS for part in Path(text).parts):
        return (
            f"image path {name} is too long ({len(text)} characters; at most {MAX_PATH_CHARS}, "
            f"{MAX_NAME_CHARS} per folder or file name)"
        )
    try:
        mode = os.stat(text).st_mode
    except OSError as err:
        if err.errno in (errno.ENOENT, errno.ENOTDIR):
            return f"image {name} does not exist"
        if err.errno == errno.ENAMETOOLONG:
            return f"image path {name} is too long for the file system"
        return f"image {name} cannot be read: {err.strerror or err}"
    except ValueError as err:
        return f"image path {name} is not usable: {err}"
    if not stat.S_ISREG(mode):
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a pipe"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "not a regular file"
        )
        return f"image {name} is not a file ({kind})"
    return None


def _short(text: str, keep: int = 120) -> str:
    """``repr`` of a path, cut in the middle when long (a 5000-character path in one line)."""
    if len(text) <= keep:
        return repr(text)
    return repr(f"{text[: keep // 2]}...{text[-keep // 2 :]}")


def _open_header(path: str, limits: ImageLimits) -> Any:
    """``Image.open`` restricted to :data:`IMAGE_FORMATS`, its declared size checked against
    ``limits`` before anything is decoded. Raises :class:`ImageRefused` with the reason."""
    from PIL import Image, UnidentifiedImageError

    with warnings.catch_warnings():  # our limit decides; Pillow's bomb warning would only repeat it
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            opened = Image.open(path, formats=_openers())
        except UnidentifiedImageError:
            raise ImageRefused(
                f"image {_short(path)} is not an image file in an accepted format "
                f"({', '.join(IMAGE_FORMATS)})"
            ) from None
        except Image.DecompressionBombError as err:
            size = re.search(r"\((\d+) pixels\)", str(err))
            pixels = int(size.group(1)) if size else None
            count = f"{pixels:,} pixels" if pixels else "too many pixels"
            if pixels is None or pixels > limits.max_pixels:
                raise ImageRefused(
                    f"image {_short(path)} is {count}, more than the limit of "
                    f"{limits.max_pixels:,} "
                    "(raise it with --max-image-pixels or CAPMETRICS_MAX_IMAGE_PIXELS)"
                ) from None
            raise ImageRefused(
                f"image {_short(path)} is {count}, more than Pillow's own limit (twice "
                "PIL.Image.MAX_IMAGE_PIXELS); raise that too to open it"
            ) from None
    why = limits.problem(opened.size)
    if why is not None:
        opened.close()
        raise ImageRefused(f"image {_short(path)} {why}")
    return opened


def _openers() -> list[str]:
    """:data:`IMAGE_FORMATS` that this Pillow can open (WebP may be built without)."""
    from PIL import Image

    if not all(f in Image.OPEN for f in IMAGE_FORMATS):
        Image.init()
    return [f for f in IMAGE_FORMATS if f in Image.OPEN]


class ImageRefused(MetricError):
    """An image file that is not opened: wrong kind of file, format, size or aspect ratio."""


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


def with_images(
    dataset: Dataset, base: Path | None = None, images: str | Path | None = None
) -> Dataset:
    """The dataset with every item's image resolved (see the module doc)."""
    if images is None and all(item.image is None for item in dataset.items):
        return dataset
    root = Path(images).expanduser() if images is not None else None
    if root is not None and not root.is_dir():
        raise DataError(
            [Problem(str(images), None, "--images is not a folder")], header="cannot use --images"
        )
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
    """What identifies an image within a run: its path, or the loaded object itself (held by
    the key and compared by identity, so a later image at a collected one's address differs)."""
    if isinstance(image, (str, os.PathLike)):
        return ("path", os.fspath(image))
    return ("object", Identity(image))


def open_image(image: Any, limits: ImageLimits | None = None) -> Any:
    """A decoded ``PIL.Image.Image`` (as the file stores it: no mode conversion, no EXIF
    rotation, like the reference code) from a path or a loaded image. A path is checked first
    (:func:`path_problem`, the format and ``limits``: default :func:`image_limits`; give them
    explicitly from a worker thread, which does not see the caller's context)."""
    from PIL import Image

    if isinstance(image, Image.Image):
        return image
    if isinstance(image, (str, os.PathLike)):
        why = path_problem(image)
        if why is not None:
            raise ImageRefused(why)
        with _open_header(os.fspath(image), limits or image_limits()) as opened:
            opened.load()  # a GIF: its first frame
            return opened
    raise MetricError(f"an image must be a path or a PIL image, got {type(image).__name__}")


def image_problem(image: Any, limits: ImageLimits | None = None) -> str | None:
    """Why ``image`` cannot be used (no image; a path that is too long, missing or not a
    regular file; not an image in an accepted format; more pixels or a longer side than
    ``limits`` allow), or None; reads only the file's header."""
    if image is None:
        return "has no image (give one with the 'image' field or --images DIR)"
    if isinstance(image, (str, os.PathLike)):
        why = path_problem(image)
        if why is not None:
            return why
        try:
            _open_header(os.fspath(image), limits or image_limits()).close()
        except ImageRefused as err:
            return str(err)
        except OSError as err:
            return f"image {_short(os.fspath(image))} cannot be read: {err.strerror or err}"
        except (ValueError, SyntaxError) as err:  # Pillow's errors on damaged headers
            return f"image {_short(os.fspath(image))} cannot be read: {err}"
        return None
    try:
        from PIL import Image
    except ImportError:
        return "has a loaded image but Pillow is not installed"
    if not isinstance(image, Image.Image):
        return f"image must be a path or a PIL image, got {type(image).__name__}"
    return None


def check_images(dataset: Dataset, spec: str) -> None:
    """Raise one DataError listing every item whose image is missing, unreadable or refused
    (:func:`image_problem`), before any model runs."""
    problems = []
    limits = image_limits()
    for item in dataset.items:
        why = image_problem(item.image, limits)
        if why is not None:
            problems.append(Problem(dataset.source, item.id, why))
    if problems:
        raise DataError(problems, header=f"{spec} needs an image for every item")


def check_references(dataset: Dataset, spec: str) -> None:
    """Raise one DataError listing the items without references (``spec`` needs them)."""
    problems = [
        Problem(dataset.source, item.id, "has no references")
        for item in dataset.items
        if not item.references
    ]
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
        except ImageRefused as err:
            with self._lock:
                self.problems.append(str(err))
        except (OSError, ValueError, SyntaxError) as err:  # PIL raises these on damaged files
            name = (
                os.fspath(image) if isinstance(image, (str, os.PathLike)) else type(image).__name__
            )
            with self._lock:
                self.problems.append(f"image {_short(name)} cannot be decoded: {err}")

    def raise_if_any(self) -> None:
        if self.problems:
            raise DataError(
                [Problem("images", None, p) for p in self.problems], header="cannot read images"
            )


def items_with(dataset: Dataset, images: Sequence[Any]) -> Dataset:
    """The dataset with ``images[i]`` as item i's image (Python use)."""
    if len(images) != len(dataset.items):
        raise DataError(
            [Problem(dataset.source, None, f"{len(images)} images for {len(dataset.items)} items")]
        )
    return Dataset(
        [dataclasses.replace(item, image=im) for item, im in zip(dataset.items, images)],
        dataset.source,
        list(dataset.skipped),
    )


__all__ = [
    "IMAGE_FORMATS",
    "IMAGE_SUFFIXES",
    "ImageLimits",
    "ImageProblems",
    "ImageRefused",
    "Item",
    "check_images",
    "check_references",
    "image_key",
    "image_limits",
    "image_problem",
    "items_with",
    "open_image",
    "path_problem",
    "resolve_image",
    "use_image_limits",
    "with_images",
]
