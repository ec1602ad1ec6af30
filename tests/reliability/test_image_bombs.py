"""A 50-megapixel image costs a reduction a few megabytes, never its full decode (issue 15, item 6).

Measured in a fresh interpreter (its peak resident size, ``ru_maxrss``, before and after): a 50 MP
RGBA PNG (200 MB decoded, under 1 MB of file) is withheld from its header alone, and a 50 MP RGB
JPEG (150 MB decoded) is decoded at a quarter of its size by Pillow's draft mode. The images are
made in another process, so their making does not count.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.reliability.support import FIGURES
from tests.unit.runtime.images import make_bomb_png

MAKE_JPEG = """
import sys
from PIL import Image
Image.new("RGB", (8000, 6250), (40, 90, 160)).save(sys.argv[1], format="JPEG", quality=60)
"""

REDUCE = """
import json, resource, sys
from pathlib import Path
from dsh_kernel.runtime.images import reduce_image, WithheldImage
png, jpeg = Path(sys.argv[1]).read_bytes(), Path(sys.argv[2]).read_bytes()
reduce_image(b"", "image/png")  # Pillow's decoders imported before the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
a = reduce_image(png, "image/png")
after_png = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
b = reduce_image(jpeg, "image/jpeg")
after_jpeg = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({
    "png": a.reason if isinstance(a, WithheldImage) else None,
    "jpeg": None if isinstance(b, WithheldImage) else [b.width, b.height, b.reduction],
    "png_kb": after_png - base,
    "jpeg_kb": after_jpeg - after_png,
}))
"""


def test_fifty_megapixel_images_are_reduced_in_bounded_memory(tmp_path: Path) -> None:
    png = tmp_path / "bomb.png"
    png.write_bytes(make_bomb_png(8000, 6250))
    jpeg = tmp_path / "bomb.jpg"
    subprocess.run([sys.executable, "-c", MAKE_JPEG, str(jpeg)], check=True, timeout=60)
    out = subprocess.run(
        [sys.executable, "-c", REDUCE, str(png), str(jpeg)],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    got = json.loads(out.stdout)
    assert got["png"] == (
        "8000x6250 PNG is 50.0 megapixels, over the 36-megapixel limit for reduction"
    )
    width, height, reduction = got["jpeg"]
    assert (width, height) == (1024, 800)
    assert reduction.startswith("8000x6250 JPEG")
    FIGURES.append(
        f"images: 50 MP PNG withheld, +{got['png_kb'] / 1024:.1f} MB peak; 50 MP JPEG reduced to "
        f"1024x800, +{got['jpeg_kb'] / 1024:.1f} MB peak (a full decode is 150-200 MB)"
    )
    assert got["png_kb"] < 20 * 1024  # the file itself, not its 200 MB of pixels
    assert got["jpeg_kb"] < 60 * 1024  # a quarter-size decode (9 MB), not 150 MB
