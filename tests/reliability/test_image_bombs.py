"""A 50-megapixel image costs a reduction a few megabytes, never its full decode (issue 15, item 6).

Measured in a fresh interpreter (its peak resident size, Linux's ``VmHWM`` reset before each image,
else ``ru_maxrss``): a 50 MP
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
from dsh_kernel.runtime.image_reduce import reduce_image, WithheldImage

def peak_kb():
    # the peak since the last reset (Linux: VmHWM, reset by clear_refs 5), else the process's peak
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

def reset():
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass

png, jpeg = Path(sys.argv[1]).read_bytes(), Path(sys.argv[2]).read_bytes()
reduce_image(b"", "image/png")  # Pillow's decoders imported before the baseline
reset(); base = peak_kb()
a = reduce_image(png, "image/png")
png_kb = peak_kb() - base
reset(); base = peak_kb()
b = reduce_image(jpeg, "image/jpeg")
jpeg_kb = peak_kb() - base
print(json.dumps({
    "png": a.reason if isinstance(a, WithheldImage) else None,
    "jpeg": None if isinstance(b, WithheldImage) else [b.width, b.height, b.reduction],
    "png_kb": png_kb,
    "jpeg_kb": jpeg_kb,
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
