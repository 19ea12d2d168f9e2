"""Command-line options for what shared files may do: ``--trust-code`` (let a TorchScript
checkpoint run its code) and the image limits (``--max-image-pixels``, ``--max-image-aspect``);
see docs/usage/guarantees.md, "What loading a shared file may do: nothing"."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Annotated

import typer

TrustCode = Annotated[
    bool,
    typer.Option(
        "--trust-code",
        help="Load TorchScript checkpoints (their code runs while they load). Off: such a file is "
        "refused with how to convert it to a state dict. Only for files from a source you trust.",
    ),
]
MaxImagePixels = Annotated[
    int | None,
    typer.Option(
        "--max-image-pixels",
        help="Refuse an image whose header declares more pixels than this (default 89478485, "
        "or $CAPMETRICS_MAX_IMAGE_PIXELS).",
        show_default=False,
        min=1,
    ),
]
MaxImageAspect = Annotated[
    float | None,
    typer.Option(
        "--max-image-aspect",
        help="Refuse an image whose longer side is more than this many times the shorter "
        "(default 50, or $CAPMETRICS_MAX_IMAGE_ASPECT).",
        show_default=False,
        min=1.0,
    ),
]


@contextlib.contextmanager
def shared_file_options(
    trust_code: bool = False,
    max_image_pixels: int | None = None,
    max_image_aspect: float | None = None,
) -> Iterator[None]:
    """The run's trust and image limits, as the options set them."""
    from capmetrics.data.images import use_image_limits
    from capmetrics.io.trust import use_trust_code

    if (
        max_image_pixels is not None
    ):  # the CLI process may tune Pillow's own guard; a library call never does
        from PIL import Image

        if Image.MAX_IMAGE_PIXELS is not None and Image.MAX_IMAGE_PIXELS < max_image_pixels:
            Image.MAX_IMAGE_PIXELS = max_image_pixels
    with use_trust_code(trust_code), use_image_limits(max_image_pixels, max_image_aspect):
        yield
