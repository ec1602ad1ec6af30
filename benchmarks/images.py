"""Benchmark: what the python tool's images cost (issue 15) — capture and reduction per figure, and
the image payload a request carries with 1 and 10 figures.

Through the real runtime with matplotlib's Agg backend: the code draws its figures and leaves them
open, as most plotting code does, and the run's end (``OutputCapture.sweep``, what ``CodeRunner.run``
calls) draws each as PNG, describes it from the live object and closes it; then the python tool's
render step turns the outputs into image blocks (``runtime.image_blocks``: decode, downscale,
re-encode, cap):

1. **Per figure**, median and p95 over ``--reps`` runs, for a *typical* figure (the default
   640x480 at 100 dpi: two lines, a scatter series, a legend) and a *large* one (20x15 in at 100
   dpi, 2000x1500 px, the same artists): *capture* — the run's end drawing the open figure as PNG and
   describing it; *reduction* — turning that output into an image block.
2. **Payload**: the base64 the model is sent for a run that leaves 1 and 10 figures open (typical,
   then large), reduced, against the captured PNGs as they came out of matplotlib (what a tool that
   forwards display outputs as they are would send; ``--per-call`` is raised to 10 so all 10 go).

Run: ``make bench`` or ``python benchmarks/images.py [--reps 15]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import matplotlib

matplotlib.use("agg")

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.types import ImageBlock
from dsh_kernel.runtime import DEFAULT_CAPS, OutputCapture
from dsh_kernel.runtime.image_blocks import output_image_blocks
from dsh_kernel.runtime.image_reduce import ImageCaps

FIGURE = (
    "import matplotlib.pyplot as plt\n"
    "import math\n"
    "xs = [i / 10 for i in range(200)]\n"
    "fig, ax = plt.subplots(figsize={size}, dpi=100)\n"
    "ax.plot(xs, [math.sin(x) for x in xs], label='sin')\n"
    "ax.plot(xs, [math.cos(x) for x in xs], label='cos')\n"
    "ax.scatter(xs[::10], [math.sin(x) * 0.5 for x in xs[::10]], label='samples')\n"
    "ax.set_title('Waves'); ax.set_xlabel('t'); ax.set_ylabel('value'); ax.legend()\n"
)
SIZES = {"typical": "(6.4, 4.8)", "large": "(20, 15)"}


def code_for(size: str, figures: int) -> str:
    return "\n".join(FIGURE.format(size=SIZES[size]) for _ in range(figures))


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def captured(size: str, figures: int) -> tuple[tuple[JsonObject, ...], float]:
    """The display outputs of a run that left ``figures`` open, and the seconds its end took to
    draw, describe and close them (``OutputCapture.sweep``, as ``CodeRunner.run`` calls it)."""
    capture = OutputCapture(DEFAULT_CAPS)  # knows the figures open before the code
    exec(code_for(size, figures), {})
    with capture:
        started = time.perf_counter()
        capture.sweep()
        seconds = time.perf_counter() - started
    return capture.result().outputs, seconds


def blocks_of(outputs: tuple[JsonObject, ...], caps: ImageCaps) -> tuple[list[ImageBlock], float]:
    started = time.perf_counter()
    blocks, _notes = output_image_blocks(outputs, caps)
    return list(blocks), time.perf_counter() - started


def raw_base64(outputs: tuple[JsonObject, ...]) -> int:
    total = 0
    for output in outputs:
        data = output.get("data")
        if isinstance(data, dict):
            payload = data.get("image/png")
            total += len(payload) if isinstance(payload, str) else 0
    return total


def per_figure(size: str, reps: int) -> None:
    capture: list[float] = []
    reduce: list[float] = []
    block: ImageBlock | None = None
    captured(size, 1)  # warm-up: imports, font cache
    for _ in range(reps):
        outputs, seconds = captured(size, 1)
        capture.append(seconds)
        blocks, seconds = blocks_of(outputs, ImageCaps())
        reduce.append(seconds)
        block = blocks[0]
    assert block is not None
    print(
        f"  {size:8s} capture median {statistics.median(capture) * 1000:6.1f} ms  "
        f"p95 {p95(capture) * 1000:6.1f} ms │ reduction median "
        f"{statistics.median(reduce) * 1000:6.1f} ms  p95 {p95(reduce) * 1000:6.1f} ms │ "
        f"{block.width}x{block.height} {block.media_type} {block.size / 1000:.1f} kB"
        + (f" ({block.reduction})" if block.reduction else " (sent as captured)")
    )


def payload(size: str, figures: int) -> None:
    outputs, _ = captured(size, figures)
    blocks, _ = blocks_of(outputs, ImageCaps(per_call=10))
    sent = sum(len(b.data or "") for b in blocks)
    raw = raw_base64(outputs)
    print(
        f"  {size:8s} × {figures:2d}: {len(blocks):2d} images, {sent / 1000:8.1f} kB of base64 "
        f"sent │ as captured {raw / 1000:8.1f} kB │ ×{raw / max(sent, 1):.1f} smaller"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run that only checks the benchmark still works (make test runs it); its figures mean nothing",
    )
    args = ap.parse_args()
    if args.quick:
        args.reps = 1
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"images: capture + reduction per figure ({args.reps} reps)")
    for size in SIZES:
        per_figure(size, args.reps)
    print("images: the payload of one run's figures (base64 of the image blocks)")
    for size in SIZES:
        for figures in (1, 2) if args.quick else (1, 10):
            payload(size, figures)


if __name__ == "__main__":
    main()
