"""The views' stylesheet and the one ``<style>`` widget that carries it.

The CSS lives in ``widgets/dsh.css`` at the top of the source tree; an installed wheel carries it
next to this module as ``dsh.css`` (``stylesheet_path`` looks in both places, package first). It is
sent to the frontend once per kernel, as a single ``HTML`` widget holding a ``<style>`` element that
every turn view includes as a child: one widget model, so one comm message however many turns are
shown, and each displayed view carries the rules with it (JupyterLab may detach off-screen cells,
so a stylesheet shown by the first cell only would not be enough).

Without the file the views still work, unstyled, and a warning is logged once.
"""

from __future__ import annotations

import logging
from functools import cache
from pathlib import Path

from dsh_kernel.views import _ipw

_log = logging.getLogger(__name__)

_CANDIDATES = (
    Path(__file__).with_name("dsh.css"),
    Path(__file__).resolve().parents[2] / "widgets" / "dsh.css",
)
_shared: list[_ipw.StyleHTML] = []


def stylesheet_path() -> Path | None:
    """The first ``dsh.css`` found (next to this module, then the source tree's widgets/), or ``None``."""
    for path in _CANDIDATES:
        if path.is_file():
            return path
    return None


@cache
def stylesheet() -> str:
    """The views' CSS, read once; empty (with a warning) when no ``dsh.css`` is found."""
    path = stylesheet_path()
    if path is None:
        _log.warning("dsh.css not found (looked in %s); turn views are unstyled", _CANDIDATES)
        return ""
    return path.read_text(encoding="utf-8")


def style_widget() -> _ipw.StyleHTML:
    """The kernel's shared ``<style>`` widget (made again if it was closed)."""
    if _shared and _ipw.is_open(_shared[0]):
        return _shared[0]
    css = stylesheet()
    widget = _ipw.StyleHTML(value=f"<style>{css}</style>" if css else "")
    # A <style> element applies wherever it sits, even in a hidden element; hiding the widget
    # keeps its empty line box out of the layout.
    _ipw.set_visible(widget, False)
    _shared[:] = [widget]
    return widget
