"""Images as live objects: what a figure shows, in words, and the figures a run leaves open.

The text stand-in an image block carries for a model that takes no images is built here, from the
*live* object, while it still exists (a logged image is only bytes):

* ``describe_image_object(obj)`` — a matplotlib ``Figure`` (its suptitle, then per axes: title, axis
  labels and limits, log scales, the number and kind of artists — lines, scatter series, bar
  series, images, other collections and patches — and the legend entries), a PIL image (size and
  mode) or an ``IPython.display.Image`` (format and size); ``None`` for anything else. At most
  ``DESCRIPTION_CHARS`` characters.
* ``image_payload(obj)`` — the bytes and media type of such an object as an image (a figure as PNG,
  a PIL image as PNG, an ``IPython.display.Image`` as its own embedded bytes), for `` $`fig` ``.

A run's display outputs reach the render as JSON only, so the description travels in the output's
metadata under ``DESCRIPTION_KEY``; ``FigureTracker.annotate`` puts it there as a bundle is made.

``FigureTracker`` (one per run) also knows which pyplot figures were open before the run and which
the run displayed as an image. ``sweep(publish)`` at the end of the run displays each figure the run
opened and left open that it did not already show as an image (at most ``MAX_SWEPT_FIGURES``; a
note counts the rest) — so a figure drawn without ``plt.show()`` still reaches the card and the
model, whatever the backend — and closes every figure the run opened: none leaks into a later cell, and the cell shows each once. Figures that were open
before the run are the user's and are left as they are.

Nothing here imports matplotlib, PIL or IPython unless the object at hand is one of theirs (looked
up in ``sys.modules``); every function here swallows the errors of the objects it reads (a figure
whose artists misbehave gets a shorter description, never a failed run).
"""

from __future__ import annotations

import base64
import contextlib
import io
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, cast

from dsh_kernel.jsonvalue import JsonObject

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DESCRIPTION_KEY: Final = "dsh/description"
"""The display-output metadata key holding an image's description."""

DESCRIPTION_CHARS: Final = 600
MAX_SWEPT_FIGURES: Final = 20
"""Open figures a run's end draws at most (matplotlib's own warning count); more are closed undrawn."""
_AXES_DESCRIBED: Final = 6
_LEGEND_ENTRIES: Final = 8


def _figure_class() -> type[Figure] | None:
    if "matplotlib.figure" not in sys.modules:
        return None
    from matplotlib.figure import Figure

    return Figure


def is_figure(obj: object) -> bool:
    """True for a matplotlib ``Figure`` (without importing matplotlib)."""
    cls = _figure_class()
    return cls is not None and isinstance(obj, cls)


def _is_pil_image(obj: object) -> bool:
    if "PIL.Image" not in sys.modules:
        return False
    from PIL.Image import Image

    return isinstance(obj, Image)


def _is_ipython_image(obj: object) -> bool:
    if "IPython.core.display" not in sys.modules:
        return False
    from IPython.core.display import Image

    return isinstance(obj, Image)


def is_image_object(obj: object) -> bool:
    """A figure, a PIL image or an ``IPython.display.Image``."""
    return is_figure(obj) or _is_pil_image(obj) or _is_ipython_image(obj)


def describe_image_object(obj: object) -> str | None:
    """See the module docstring; never raises."""
    try:
        figure = _figure_class()
        if figure is not None and isinstance(obj, figure):
            text = _describe_figure(obj)
        elif _is_pil_image(obj):
            from PIL.Image import Image

            assert isinstance(obj, Image)
            text = f"an image (PIL, {obj.width}x{obj.height}, mode {obj.mode})"
        elif _is_ipython_image(obj):
            text = _describe_ipython_image(obj)
        else:
            return None
    except Exception:
        return f"an image ({type(obj).__name__})"
    return _cap(text)


def _cap(text: str) -> str:
    return text if len(text) <= DESCRIPTION_CHARS else text[: DESCRIPTION_CHARS - 1] + "…"


def _describe_ipython_image(obj: object) -> str:
    from IPython.core.display import Image

    assert isinstance(obj, Image)
    fmt = str(getattr(obj, "format", "") or "").upper() or "image"
    width, height = getattr(obj, "width", None), getattr(obj, "height", None)
    shown = f", shown at {width}x{height}" if width and height else ""
    return f"an image ({fmt} via IPython.display.Image{shown})"


def _num(value: float) -> str:
    return f"{value:.4g}"


def _describe_figure(fig: Figure) -> str:
    parts: list[str] = []
    axes = fig.get_axes()
    head = f"a matplotlib figure ({len(axes)} axes)"
    with contextlib.suppress(Exception):
        suptitle = fig.get_suptitle()
        if suptitle:
            head += f' titled "{suptitle}"'
    parts.append(head)
    for i, ax in enumerate(axes[:_AXES_DESCRIBED], start=1):
        parts.append(f"axes {i}: {_describe_axes(ax)}")
    if len(axes) > _AXES_DESCRIBED:
        parts.append(f"and {len(axes) - _AXES_DESCRIBED} more axes")
    return "; ".join(parts) + "."


def _describe_axes(ax: Axes) -> str:
    bits: list[str] = []
    title = ax.get_title()
    if title:
        bits.append(f'"{title}"')
    for name, label, lim, scale in (
        ("x", ax.get_xlabel(), ax.get_xlim(), ax.get_xscale()),
        ("y", ax.get_ylabel(), ax.get_ylim(), ax.get_yscale()),
    ):
        text = f"{name}"
        if label:
            text += f' "{label}"'
        text += f" {_num(lim[0])} to {_num(lim[1])}"
        if scale != "linear":
            text += f" ({scale})"
        bits.append(text)
    artists = _artists(ax)
    if artists:
        bits.append(", ".join(artists))
    legend = ax.get_legend()
    if legend is not None:
        entries = [t.get_text() for t in legend.get_texts()]
        shown = ", ".join(f'"{e}"' for e in entries[:_LEGEND_ENTRIES])
        more = (
            f" and {len(entries) - _LEGEND_ENTRIES} more" if len(entries) > _LEGEND_ENTRIES else ""
        )
        bits.append(f"legend {shown}{more}")
    return ", ".join(bits) if bits else "empty"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _artists(ax: Axes) -> list[str]:
    out: list[str] = []
    lines = ax.get_lines()
    if lines:
        points = sum(len(line.get_xdata()) for line in lines)  # pyright: ignore[reportArgumentType]
        out.append(f"{_plural(len(lines), 'line')} ({points} points)")
    bars = [cast("list[object]", c) for c in ax.containers if type(c).__name__ == "BarContainer"]
    in_bars = {id(p) for c in bars for p in c}
    if bars:
        out.append(f"{_plural(len(bars), 'bar series')} ({sum(len(c) for c in bars)} bars)")
    scatter = other = 0
    for coll in ax.collections:
        if type(coll).__name__ == "PathCollection":
            scatter += 1
        else:
            other += 1
    if scatter:
        out.append(_plural(scatter, "scatter series"))
    images = ax.get_images()
    for image in images[:3]:
        shape = getattr(image.get_array(), "shape", None)
        out.append(f"an image {'x'.join(str(s) for s in shape[:2])}" if shape else "an image")
    if other:
        out.append(_plural(other, "other collection"))
    patches = [p for p in ax.patches if id(p) not in in_bars]
    if patches:
        out.append(_plural(len(patches), "patch") if len(patches) != 1 else "1 patch")
    texts = len(ax.texts)
    if texts:
        out.append(_plural(texts, "text annotation"))
    return out


# -- bytes --------------------------------------------------------------------------------------------


def figure_png(fig: Figure) -> bytes:
    """The figure as a PNG, as the inline backend draws it (tight bounding box)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")  # pyright: ignore[reportUnknownMemberType]
    return buf.getvalue()


def image_payload(obj: object) -> tuple[bytes, str] | None:
    """``(bytes, media type)`` of a figure, PIL image or ``IPython.display.Image``; ``None`` for
    anything else, or an ``IPython.display.Image`` that holds no bytes (a URL). Raises what the
    object raises when drawn."""
    figure = _figure_class()
    if figure is not None and isinstance(obj, figure):
        return figure_png(obj), "image/png"
    if _is_pil_image(obj):
        from PIL.Image import Image

        assert isinstance(obj, Image)
        buf = io.BytesIO()
        obj.save(buf, format="PNG")
        return buf.getvalue(), "image/png"
    if _is_ipython_image(obj):
        data = getattr(obj, "data", None)
        if isinstance(data, str):  # an embedded image read as base64 text
            with contextlib.suppress(ValueError):
                data = base64.b64decode(data, validate=True)
        if not isinstance(data, bytes) or not data:
            return None
        fmt = str(getattr(obj, "format", "") or "png").lower()
        return data, f"image/{'jpeg' if fmt in ('jpg', 'jpeg') else fmt}"
    return None


# -- a run's figures ----------------------------------------------------------------------------------


def open_figures() -> list[Figure]:
    """The figures pyplot holds open (none when pyplot was never imported)."""
    if "matplotlib.pyplot" not in sys.modules:
        return []
    from matplotlib._pylab_helpers import Gcf

    return [m.canvas.figure for m in Gcf.get_all_fig_managers()]


Publish = Callable[[JsonObject, JsonObject], None]


class FigureTracker:
    """One run's figures: see the module docstring. Create it before the code runs."""

    def __init__(self) -> None:
        self._before = {id(f) for f in open_figures()}
        self._shown: set[int] = set()

    def annotate(self, obj: object, data: JsonObject, metadata: JsonObject) -> JsonObject:
        """``metadata`` with the description of ``obj`` when it is an image object whose bundle
        holds an image (and a note that a figure was shown as one)."""
        if not any(str(m).startswith("image/") for m in data) or DESCRIPTION_KEY in metadata:
            return metadata
        description = describe_image_object(obj)
        if description is None:
            return metadata
        if is_figure(obj):
            self._shown.add(id(obj))
        return {**metadata, DESCRIPTION_KEY: description}

    def sweep(self, publish: Publish) -> list[str]:
        """Show the figures the run left open and did not show, then close all it opened. Returns
        a note per figure that could not be drawn."""
        notes: list[str] = []
        opened = [f for f in open_figures() if id(f) not in self._before]
        if not opened:
            return notes
        import matplotlib.pyplot as plt

        unshown = [f for f in opened if id(f) not in self._shown]
        for fig in unshown[:MAX_SWEPT_FIGURES]:
            try:
                png = figure_png(fig)
            except Exception as exc:
                notes.append(f"a figure could not be drawn: {type(exc).__name__}: {exc}")
                continue
            data: JsonObject = {
                "image/png": base64.b64encode(png).decode("ascii"),
                "text/plain": repr(fig),
            }
            publish(data, self.annotate(fig, data, {}))
        if len(unshown) > MAX_SWEPT_FIGURES:
            n = len(unshown) - MAX_SWEPT_FIGURES
            notes.append(
                f"{n} more open figure{'s' if n != 1 else ''} closed without being drawn: the end "
                f"of a run draws at most {MAX_SWEPT_FIGURES} (show them with plt.show() or "
                "display(fig))"
            )
        for fig in opened:
            plt.close(fig)
        return notes
