"""A small typed facade over ipywidgets, the only untyped library the views use.

ipywidgets ships no type information for its container traits (``children``, ``outputs``,
``titles``), its layouts or its callback registration, so pyright strict sees ``Unknown`` there.
Everything the views need from those corners goes through the functions below, each with one
narrow ``cast``; the rest of ``dsh_kernel.views`` stays fully typed. Trait reads and writes that
traitlets already types (``Button.disabled``, ``Text.value``, ``Accordion.selected_index``) are used
directly.

Setting a trait to a value equal to the current one sends nothing to the frontend (traitlets drops
the change), so the views may assign freely on every flush.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import ipywidgets  # pyright: ignore[reportMissingTypeStubs]
import traitlets

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.markup.safe_html import sanitize

Widget = ipywidgets.Widget
DOMWidget = ipywidgets.DOMWidget
Box = ipywidgets.Box
VBox = ipywidgets.VBox
HBox = ipywidgets.HBox
StyleHTML = ipywidgets.HTML
"""The plain HTML widget: only ``views.style`` uses it, for the kernel's own constant ``<style>``."""
Button = ipywidgets.Button
Text = ipywidgets.Text
Output = ipywidgets.Output
Accordion = ipywidgets.Accordion
RadioButtons = ipywidgets.RadioButtons
SelectMultiple = ipywidgets.SelectMultiple
Label = ipywidgets.Label


class HTML(ipywidgets.HTML):
    """An HTML widget whose value is always sanitised (``markup.safe_html.sanitize``) before it is
    stored or sent: whatever a view assigns, the page gets only allowlisted markup. The frontend
    sets ``innerHTML`` and never typesets it."""

    @traitlets.validate("value")
    def _sanitised(self, proposal: dict[str, object]) -> str:
        value = proposal["value"]
        return sanitize(value) if isinstance(value, str) and value else ""


def set_children(box: Box, widgets: Sequence[DOMWidget]) -> None:
    new = tuple(widgets)
    if cast(tuple[DOMWidget, ...], box.children) != new:  # pyright: ignore[reportUnknownMemberType]
        box.children = new


def children(box: Box) -> tuple[DOMWidget, ...]:
    return cast(tuple[DOMWidget, ...], box.children)  # pyright: ignore[reportUnknownMemberType]


def set_outputs(out: Output, outputs: Sequence[JsonObject]) -> None:
    """Replace an ``Output`` widget's nbformat outputs (sent only when they differ)."""
    new = tuple(outputs)
    current = cast(tuple[JsonObject, ...], out.outputs)  # pyright: ignore[reportUnknownMemberType]
    if current != new:
        out.outputs = new


def outputs(out: Output) -> tuple[JsonObject, ...]:
    return cast(tuple[JsonObject, ...], out.outputs)  # pyright: ignore[reportUnknownMemberType]


def set_titles(acc: Accordion, titles: Sequence[str]) -> None:
    new = tuple(titles)
    if cast(tuple[str, ...], acc.titles) != new:  # pyright: ignore[reportUnknownMemberType]
        acc.titles = new


def titles(acc: Accordion) -> tuple[str, ...]:
    return cast(tuple[str, ...], acc.titles)  # pyright: ignore[reportUnknownMemberType]


def set_visible(widget: DOMWidget, visible: bool) -> None:
    layout = cast(ipywidgets.Layout, widget.layout)  # pyright: ignore[reportUnknownMemberType]
    want = None if visible else "none"
    if layout.display != want:
        layout.display = want


def visible(widget: DOMWidget) -> bool:
    layout = cast(ipywidgets.Layout, widget.layout)  # pyright: ignore[reportUnknownMemberType]
    return layout.display != "none"


def add_class(widget: DOMWidget, name: str) -> None:
    widget.add_class(name)  # pyright: ignore[reportUnknownMemberType]


def on_click(button: Button, callback: Callable[[], None]) -> None:
    def handler(_button: object) -> None:
        callback()

    button.on_click(handler)  # pyright: ignore[reportUnknownMemberType]


def observe(widget: Widget, name: str, callback: Callable[[], None]) -> None:
    def handler(_change: object) -> None:
        callback()

    widget.observe(handler, names=name)


def track_views(widget: Widget) -> None:
    """Ask the frontend to sync the number of views it shows of ``widget`` into ``_view_count``."""
    widget._view_count = 0  # pyright: ignore[reportPrivateUsage]


def view_count(widget: Widget) -> int:
    count = widget._view_count  # pyright: ignore[reportPrivateUsage]
    return count or 0


def radio_value(radio: RadioButtons) -> str | None:
    value = cast(object, radio.value)  # pyright: ignore[reportUnknownMemberType]
    return value if isinstance(value, str) else None


def set_radio_value(radio: RadioButtons, value: str | None) -> None:
    radio.value = value


def multi_values(select: SelectMultiple) -> tuple[str, ...]:
    values = cast(tuple[object, ...], select.value)  # pyright: ignore[reportUnknownMemberType]
    return tuple(v for v in values if isinstance(v, str))


def set_multi_values(select: SelectMultiple, values: Sequence[str]) -> None:
    select.value = tuple(values)


def close(widget: DOMWidget) -> None:
    """Close ``widget``'s comm and its layout's (``Widget.close`` leaves the layout open)."""
    layout = cast(ipywidgets.Layout, widget.layout)  # pyright: ignore[reportUnknownMemberType]
    widget.close()
    layout.close()


def is_open(widget: Widget) -> bool:
    """False once the widget's comm was closed (``Widget.close()`` / ``close_all()``)."""
    return cast(object, widget.comm) is not None
