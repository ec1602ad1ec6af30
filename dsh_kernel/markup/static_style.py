"""The saved rendering's look: the live view's classes, with their rules as inline ``style``s.

``attrs("dsh-card")`` is `` class="dsh-card" style="…"``: the class the live view uses
(``widgets/dsh.css``) and the declarations of that class written on the element itself. Inline, not
a ``<style>`` element, because that is what survives where a saved notebook is shown:

* JupyterLab sanitises the HTML outputs of an untrusted notebook (every notebook it did not run or
  that was not ``jupyter trust``-ed). Measured in Lab 4.6 with Chromium: a ``<style>`` element is
  removed; ``class`` and ``style`` attributes are kept, but a declaration whose value uses
  ``var(…)`` (the theme variables) or ``currentColor`` is dropped, while hex, ``rgb()`` and
  ``rgba()`` colours, lengths and keywords stay.
* nbconvert's HTML export and a trusted Lab keep everything.

So each declaration is written twice when it has a theme variable: first with a plain value (kept
by the sanitiser, readable on light and dark backgrounds), then ``var(--jp-…, plain)`` (dropped by
the sanitiser; where it survives, the later declaration wins and the page's theme shows). Inline
styles cannot leak into the page around the output, and nothing here depends on a stylesheet that
a saved notebook no longer has.

The values mirror ``widgets/dsh.css``; what is new here styles what the live view gets from the
frontend (the ``Details`` fold, code blocks).
"""

from __future__ import annotations

from html import escape
from typing import Final, TypeAlias

Declaration: TypeAlias = tuple[str, str, str | None]
"""``(property, plain value, theme variable or None)``."""

_GREY: Final = "rgba(128, 128, 128, 0.9)"
_LINE: Final = "rgba(128, 128, 128, 0.35)"
_SOFT: Final = "rgba(128, 128, 128, 0.08)"
_FAINT: Final = "rgba(128, 128, 128, 0.14)"

RULES: Final[dict[str, tuple[Declaration, ...]]] = {
    # Prose wraps at words, and a token wider than the page (a URL, a path) breaks rather than
    # overflow it; inherited by everything the saved turn holds (code blocks set their own).
    "dsh-turn-static": (("overflow-wrap", "break-word", None),),
    "dsh-card": (
        ("border", "1px solid", None),
        ("border-color", _LINE, "--jp-border-color2"),
        ("border-radius", "6px", None),
        ("padding", "2px 8px 4px 8px", None),
        ("margin", "4px 0", None),
        ("background", "transparent", "--jp-layout-color1"),
    ),
    "dsh-card-head": (
        ("display", "flex", None),
        ("flex-wrap", "wrap", None),
        ("gap", "8px", None),
        ("align-items", "baseline", None),
        ("font-size", "13px", "--jp-ui-font-size1"),
    ),
    "dsh-card-title": (("font-weight", "600", None),),
    "dsh-card-name": (
        ("font-family", "monospace", "--jp-code-font-family"),
        ("font-size", "0.9em", None),
        ("color", _GREY, "--jp-ui-font-color2"),
    ),
    "dsh-pill": (
        ("border", "1px solid", None),  # no colour: the border takes the text's (the status)
        ("border-radius", "9px", None),
        ("padding", "0 7px", None),
        ("font-size", "0.85em", None),
        ("white-space", "nowrap", None),
    ),
    "dsh-status-pending": (("color", "#1976d2", "--jp-brand-color1"),),
    "dsh-status-running": (("color", "#1976d2", "--jp-brand-color1"),),
    "dsh-status-waiting-approval": (("color", "#e65100", "--jp-warn-color1"),),
    "dsh-status-done": (("color", "#2e7d32", "--jp-success-color1"),),
    "dsh-status-failed": (("color", "#c62828", "--jp-error-color1"),),
    "dsh-status-denied": (("color", _GREY, "--jp-ui-font-color2"),),
    "dsh-status-aborted": (("color", _GREY, "--jp-ui-font-color2"),),
    "dsh-dur": (("color", _GREY, "--jp-ui-font-color2"), ("font-size", "11px", None)),
    "dsh-card-note": (
        ("color", _GREY, "--jp-ui-font-color2"),
        ("font-size", "11px", None),
        ("font-style", "italic", None),
    ),
    "dsh-approval-note": (("color", _GREY, "--jp-ui-font-color2"), ("font-size", "11px", None)),
    "dsh-footer": (
        ("color", _GREY, "--jp-ui-font-color2"),
        ("font-size", "11px", None),
        ("margin-top", "2px", None),
    ),
    "dsh-details": (("margin", "4px 0", None),),
    "dsh-details-title": (  # the live view's Accordion title bar
        ("cursor", "pointer", None),
        ("padding", "4px 8px", None),
        ("border", "1px solid", None),
        ("border-color", _LINE, "--jp-border-color1"),
        ("background", _FAINT, "--jp-layout-color2"),
        ("font-size", "13px", "--jp-ui-font-size1"),
        ("font-weight", "600", None),
        ("color", _GREY, "--jp-ui-font-color2"),
    ),
    "dsh-reasoning": (
        ("font-size", "0.92em", None),
        ("color", _GREY, "--jp-ui-font-color2"),
        ("margin", "4px 0", None),
    ),
    "dsh-code": (
        ("background", _SOFT, "--jp-cell-editor-background"),
        ("border", "1px solid", None),
        ("border-color", _LINE, "--jp-cell-editor-border-color"),
        ("border-radius", "4px", None),
        ("padding", "6px 8px", None),
        ("margin", "4px 0", None),
        ("overflow", "auto", None),
        # Lab's output CSS breaks a <pre> anywhere (word-break: break-all): code wraps at
        # whitespace only, and a token longer than the line scrolls inside the block.
        ("white-space", "pre-wrap", None),
        ("word-break", "normal", None),
        ("overflow-wrap", "normal", None),
        ("max-height", "32em", None),  # as the live Details box: long code scrolls, never cut
        ("font-family", "monospace", "--jp-code-font-family"),
        ("font-size", "13px", "--jp-code-font-size"),
        ("line-height", "1.4", None),
    ),
    "dsh-code-text": (("background", "transparent", None),),  # JupyterLab paints <code> white
    "dsh-images": (
        ("color", _GREY, "--jp-ui-font-color2"),
        ("font-size", "12px", None),
        ("margin", "2px 0", None),
    ),
    "dsh-image-line": (
        ("display", "flex", None),
        ("align-items", "center", None),
        ("gap", "6px", None),
        ("margin", "2px 0", None),
    ),
    "dsh-thumb": (  # the image the model got, drawn small: the card's outputs show it full size
        ("max-height", "48px", None),
        ("max-width", "96px", None),
        ("border", "1px solid", None),
        ("border-color", _LINE, "--jp-border-color2"),
        ("border-radius", "3px", None),
    ),
    "dsh-label": (("font-weight", "600", None), ("margin", "4px 0 2px 0", None)),
    "dsh-steer": (
        ("border-left", "3px solid", None),
        ("border-left-color", "#64b5f6", "--jp-brand-color2"),
        ("padding", "1px 8px", None),
        ("margin", "2px 0", None),
    ),
    "dsh-notice": (
        ("border-left", "3px solid", None),
        ("border-left-color", "#ffb74d", "--jp-warn-color2"),
        ("padding", "1px 8px", None),
        ("margin", "2px 0", None),
        ("font-size", "0.92em", None),
    ),
    "dsh-end": (
        ("border-left", "3px solid", None),
        ("border-left-color", "#0288d1", "--jp-info-color1"),
        ("padding", "2px 8px", None),
        ("margin", "4px 0", None),
    ),
    "dsh-error": (("border-left-color", "#c62828", "--jp-error-color1"),),
    "dsh-warning": (("border-left-color", "#e65100", "--jp-warn-color1"),),
    "dsh-info": (("border-left-color", "#0288d1", "--jp-info-color1"),),
    "dsh-held": (
        ("border-left-color", "#90a4ae", "--jp-border-color1"),
        ("color", "#616161", "--jp-ui-font-color2"),
    ),
}


def style(*classes: str) -> str:
    """The inline declarations of ``classes`` (later classes win, as in a stylesheet)."""
    out: list[str] = []
    for cls in classes:
        for prop, plain, var in RULES.get(cls, ()):
            out.append(f"{prop}: {plain}")
            if var is not None:
                out.append(f"{prop}: var({var}, {plain})")
    return "; ".join(out)


def attrs(*classes: str) -> str:
    """`` class="…" style="…"`` for an element of the saved rendering (escaped: a class may carry a
    status or a notice level)."""
    css = style(*classes)
    names = escape(" ".join(classes))
    return f' class="{names}"' + (f' style="{escape(css)}"' if css else "")
