"""A tool whose result carries an image block, for the tests of the views that show it.

``draw_loss`` stands in for the ``python`` tool's capture (issue 15): its render returns the text and
an ``ImageBlock`` with its bytes (the reduced image the model gets), and its card's rich output is
the original, larger figure — both real matplotlib PNGs. ``tool_module()`` is its source, for a
kernel to run (a ``%%python`` cell, or a module beside a notebook).
"""

from __future__ import annotations

import base64
import hashlib
import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from dsh_kernel.runtime.text import format_size

DESCRIPTION = "Figure: 1 axes titled 'Training loss'; x 'epoch' 0-9, y 'loss'; 1 line 'train'"


def figure_png(width: int, height: int) -> bytes:
    """A real matplotlib figure (``width`` x ``height`` px) as PNG bytes."""
    fig = Figure(figsize=(width / 100, height / 100), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    loss = [2.3, 1.6, 1.1, 0.8, 0.62, 0.55, 0.53, 0.61, 0.74, 0.9]
    ax.plot(range(10), loss, label="train")
    ax.set_title("Training loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.legend()
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    return out.getvalue()


ORIGINAL = figure_png(640, 480)
SENT = figure_png(320, 240)
REDUCTION = f"640x480 PNG {len(ORIGINAL) // 1000} kB → 320x240 PNG {len(SENT) // 1000} kB"
SENT_LINE = (
    f"Sent to the model: 1 image, 320x240 PNG, {format_size(len(SENT))} "
    f"(reduced from 640x480 PNG {len(ORIGINAL) // 1000} kB)"
)
WITHHELD_LINE = f"Not sent to the model (text-only model): described as: {DESCRIPTION}"


def tool_module() -> str:
    """The source of a module defining ``draw_loss`` (module docstring)."""
    sent, original = base64.b64encode(SENT).decode(), base64.b64encode(ORIGINAL).decode()
    return f"""from dsh_kernel.llm.types import ImageBlock, TextBlock
from dsh_kernel.tools.types import ToolDefinition

SENT = {sent!r}
ORIGINAL = {original!r}


def _render(args, value):
    image = ImageBlock(
        sha256={hashlib.sha256(SENT).hexdigest()!r}, media_type="image/png", width=320,
        height=240, size={len(SENT)}, description={DESCRIPTION!r}, reduction={REDUCTION!r},
        data=SENT,
    )
    return (TextBlock(text=value), image)


def _meta(args, value):
    png = {{"image/png": ORIGINAL, "text/plain": "<Figure size 640x480 with 1 Axes>"}}
    return {{"outputs": [{{"output_type": "display_data", "data": png, "metadata": {{}}}}]}}


draw_loss = ToolDefinition(
    name="draw_loss", description="Draw the training loss.",
    parameters={{"type": "object", "properties": {{}}}},
    execute=lambda args, ctx: "drew the training loss", render=_render,
    presentation_meta=_meta, read_only=True,
)
"""
