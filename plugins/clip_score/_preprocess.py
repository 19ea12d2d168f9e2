"""CLIP's image preprocessing with PIL and torch (no torchvision): resize the short side to
``size`` with bicubic resampling (the long side ``int(size * long / short)``; an image already
that size is left alone), crop the centre ``size`` × ``size`` (offsets rounded half to even),
convert to RGB, scale to [0, 1] and normalise per channel. This is what OpenAI's ``clip``
package, clipscore.py, pac_score and open_clip do to an image, bit for bit in float32.

Hugging Face's CLIP image processor differs in two places (RGB conversion first, crop offsets
floored); :class:`Preprocess` has both variants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

OPENAI_MEAN = (0.48145466, 0.4578275, 0.40821073)
OPENAI_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class Preprocess:
    """How a model's images are prepared (part of the model's signature via :meth:`describe`)."""

    size: int = 224
    crop: int = 224
    mean: tuple[float, ...] = OPENAI_MEAN
    std: tuple[float, ...] = OPENAI_STD
    rgb_first: bool = False  # Hugging Face: convert before resizing
    floor_crop: bool = False  # Hugging Face: (h - crop) // 2 instead of round((h - crop) / 2)

    def describe(self) -> str:
        style = "hf" if (self.rgb_first or self.floor_crop) else "openai"
        return f"bicubic-short-side-{self.size}/center-crop-{self.crop}/{style}"

    def __call__(self, image: Any) -> Any:
        """A float32 tensor (3, crop, crop) from a PIL image."""
        import torch
        from PIL import Image

        if self.rgb_first and image.mode != "RGB":
            image = image.convert("RGB")
        w, h = image.size
        short, long = (w, h) if w <= h else (h, w)
        new_short, new_long = self.size, int(self.size * long / short)
        new_w, new_h = (new_short, new_long) if w <= h else (new_long, new_short)
        if (new_w, new_h) != (w, h):
            image = image.resize((new_w, new_h), Image.Resampling.BICUBIC)
        if self.floor_crop:
            top, left = (new_h - self.crop) // 2, (new_w - self.crop) // 2
        else:
            top, left = int(round((new_h - self.crop) / 2.0)), int(round((new_w - self.crop) / 2.0))
        image = image.crop((left, top, left + self.crop, top + self.crop))
        if image.mode != "RGB":
            image = image.convert("RGB")
        pixels = torch.from_numpy(np.array(image, dtype=np.uint8)).permute(2, 0, 1).contiguous()
        out = pixels.to(torch.float32).div(255)
        mean = torch.tensor(self.mean, dtype=torch.float32)[:, None, None]
        std = torch.tensor(self.std, dtype=torch.float32)[:, None, None]
        return out.sub_(mean).div_(std)
