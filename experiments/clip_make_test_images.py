"""Small real photographs for the CLIP tests, from scikit-image's bundled sample data."""

import os

import skimage
import skimage.data
from PIL import Image

D = os.path.join(os.path.dirname(skimage.data.__file__))
out = "/work/main/tests/data/clip/images"


def L(n):
    return Image.open(os.path.join(D, n))


a = L("astronaut.png").convert("RGB")
a.crop((40, 60, 440, 360)).save(f"{out}/astronaut.jpg", quality=90)
a.crop((0, 200, 512, 300)).save(f"{out}/astronaut_strip.jpg", quality=90)  # 512x100 panorama
L("chelsea.png").convert("RGB").save(f"{out}/chelsea.jpg", quality=90)  # 451x300
L("coffee.png").convert("RGB").save(f"{out}/coffee.jpg", quality=85)  # 600x400
r = L("rocket.jpg")
r.resize((r.width // 2, r.height // 2), Image.LANCZOS).save(f"{out}/rocket.jpg", quality=90)
L("camera.png").convert("L").resize((256, 200), Image.LANCZOS).save(
    f"{out}/camera_gray.png"
)  # mode L
h = L("hubble_deep_field.jpg").convert("RGB")
h.crop((300, 300, 480, 450)).save(f"{out}/hubble_small.jpg", quality=90)  # 180x150 < 224
m = Image.open(f"{out}/rocket.jpg")
m.quantize(64).save(f"{out}/rocket_palette.png")  # mode P
g = L("logo.png")
g.resize((200, 120), Image.LANCZOS).save(f"{out}/logo_rgba.png")  # mode RGBA
for f in sorted(os.listdir(out)):
    im = Image.open(f"{out}/{f}")
    print(f, im.size, im.mode, os.path.getsize(f"{out}/{f}"))
print(skimage.__version__)
c = Image.open(f"{out}/coffee.jpg")
c.crop((150, 0, 400, 400)).save(f"{out}/coffee_portrait.jpg", quality=90)  # 250x400
Image.open(f"{out}/chelsea.jpg").resize((300, 200), Image.LANCZOS).convert("CMYK").save(
    f"{out}/chelsea_cmyk.jpg", quality=90
)
