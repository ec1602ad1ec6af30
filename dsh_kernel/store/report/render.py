"""A ``CourseReport`` as Markdown or as one self-contained HTML page.

Everything a student typed or named — user names, notebook paths, tool names, error codes — is
untrusted text. In HTML every value is escaped and the page's body passes the one sanitiser
(``markup.safe_html``): no script, no markup, no attribute escapes; the page has no external
resources and no script of its own, only its constant ``<style>``. In Markdown a value's
characters that Markdown or a notebook's renderer would read as syntax (emphasis, links, table
pipes, raw HTML, ``$`` math) are backslash-escaped and its whitespace is collapsed to one line, so a
value cannot break out of its table cell. The output holds no time of its own (no "generated at"):
the same exports give the same bytes.

A report that read submitted notebooks (their capsules) has a ``source`` column in its per-student
and per-notebook tables — ``export``, ``notebook capsules (self-reported)``, or both — a note saying
what self-reported means, and a section naming each notebook not counted (or counted with capsules
left out). A report of exports only is as it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Literal

from dsh_kernel.markup.safe_html import NO_MATH, escape, sanitize
from dsh_kernel.store.report import CourseReport, Totals

Format = Literal["md", "html"]

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|&~$#])")

TOTAL_HEADERS = (
    "sessions",
    "turns",
    "tokens",
    "cost",
    "tool calls",
    "tool errors",
    "errors",
    "policy hits",
    "budget hits",
    "AI policy",
    "last active",
)

NOTES = (
    "A student is the user on the session header; where it is missing, the name of the export "
    "folder the session came from.",
    "A session found in several exports is counted once (from its most recent export); a fork's "
    "copied turns are its parent's.",
    "Tokens and cost are the sessions' own requests; ≥ marks a cost some requests of which had "
    "no price, unknown one none of which had.",
    "Errors count every failure (turns, model requests, tool calls); budget hits are the turns "
    "that ended BUDGET_EXCEEDED.",
    "Policy hits are what the log holds of the AI policy: errors coded AI_POLICY_…, and tool calls "
    "refused (DENIED, UNKNOWN_TOOL) under explain or off. A chat cell refused under off starts no "
    "turn and is not logged.",
)


SELF_REPORTED = "notebook capsules (self-reported)"
SELF_REPORTED_NOTE = (
    "Rows whose source is notebook capsules are self-reported: they are counted from the "
    "capsules the submitted notebooks carry (turns, tool calls and usage as each chat cell saved "
    "them), and anyone can edit a notebook and hash its capsules again. The shared store, and its "
    "exports, are the graded source; a session found in both is counted from the export. A "
    "notebook's student is its session's user, else the folder it was found in, else its file "
    "name; a notebook holds the conversation of the cells present (a re-run's superseded turns "
    "are not in it)."
)
NOTEBOOK_NOTES_TITLE = "Notebooks not counted, or not wholly"


def render(report: CourseReport, fmt: Format) -> str:
    """The report as ``fmt`` (``md`` or ``html``)."""
    return markdown(report) if fmt == "md" else html_page(report)


def _cost(t: Totals) -> str:
    if t.cost is None:
        return "$0.0000" if t.cost_complete else "unknown"  # complete: no request at all
    return ("" if t.cost_complete else "≥ ") + f"${t.cost:,.4f}"


def _day(d: datetime | None) -> str:
    return "" if d is None else d.strftime("%Y-%m-%d %H:%M")


def _count(n: int) -> str:
    return f"{n:,}"


def _total_cells(t: Totals) -> list[str]:
    return [
        _count(t.sessions),
        _count(t.turns),
        _count(t.tokens),
        _cost(t),
        _count(t.tool_calls),
        _count(t.tool_errors),
        _count(t.errors),
        _count(t.policy_hits),
        _count(t.budget_hits),
        ", ".join(t.policies),
        _day(t.last_active),
    ]


def _n(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def _source(t: Totals) -> str:
    if t.self_reported == 0:
        return "export"
    return SELF_REPORTED if t.self_reported == t.sessions else f"export, {SELF_REPORTED}"


def _with_notebooks(report: CourseReport) -> bool:
    return bool(report.notebooks_read or report.notes) or any(
        e.self_reported for e in report.exports
    )


def _summary(report: CourseReport) -> str:
    c = report.course
    read = _n(len(report.store_exports), "export")
    if _with_notebooks(report):
        read += f" and {_n(len(report.notebooks_read), 'submitted notebook')} (self-reported)"
    line = (
        f"{_n(len(report.students), 'student')}, {_n(c.sessions, 'session')}, "
        f"{_n(c.turns, 'turn')}, {_n(c.tokens, 'token')}, cost {_cost(c)} — read from {read}"
    )
    if c.first_active is not None:
        line += f"; active {_day(c.first_active)} to {_day(c.last_active)} (UTC)"
    if report.duplicates:
        line += f"; {_n(report.duplicates, 'session')} found in more than one export (counted once)"
    return line + "."


def _tables(report: CourseReport) -> list[tuple[str, Sequence[str], list[list[str]]]]:
    marked = _with_notebooks(report)
    extra: tuple[str, ...] = ("source",) if marked else ()

    def cells(t: Totals) -> list[str]:
        return [*_total_cells(t), _source(t)] if marked else _total_cells(t)

    return [
        (
            "Per student",
            ("student", "notebooks", *TOTAL_HEADERS, *extra),
            [[r.student, _count(r.notebooks), *cells(r.totals)] for r in report.students],
        ),
        (
            "Per student and notebook",
            ("student", "notebook", *TOTAL_HEADERS, *extra),
            [[r.student, r.notebook, *cells(r.totals)] for r in report.notebooks],
        ),
        (
            "Tool use",
            ("student", "tool", "calls", "failed"),
            [[r.student, r.tool, _count(r.calls), _count(r.failed)] for r in report.tools],
        ),
        (
            "Errors by code",
            ("student", "code", "count"),
            [[r.student, r.code, _count(r.count)] for r in report.errors],
        ),
    ]


# --- Markdown -----------------------------------------------------------------------------------


def md_cell(value: str) -> str:
    """``value`` safe in a Markdown table cell: one line, its syntax characters escaped."""
    return _MD_SPECIAL.sub(r"\\\1", " ".join(value.split()))


def markdown(report: CourseReport) -> str:
    """The report as GitHub-flavoured Markdown (tables)."""
    out = ["# Course report", "", md_cell(_summary(report)), ""]
    for title, headers, rows in _tables(report):
        out += [f"## {title}", ""]
        if not rows:
            out += ["None.", ""]
            continue
        out.append("| " + " | ".join(headers) + " |")
        out.append("|" + "|".join("---" for _ in headers) + "|")
        out += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
        out.append("")
    if report.notes:
        out += [f"## {NOTEBOOK_NOTES_TITLE}", ""]
        out += [f"- {md_cell(n)}" for n in report.notes]
        out.append("")
    out += ["## How these are counted", ""]
    out += [f"- {md_cell(n)}" for n in _notes(report)]
    return "\n".join(out) + "\n"


def _notes(report: CourseReport) -> tuple[str, ...]:
    return (*NOTES, SELF_REPORTED_NOTE) if _with_notebooks(report) else NOTES


# --- HTML ---------------------------------------------------------------------------------------

_STYLE = """
.dsh-report { font-family: system-ui, sans-serif; font-size: 14px; color: #222; }
.dsh-report table { border-collapse: collapse; margin: 0 0 1.5em; }
.dsh-report th, .dsh-report td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; }
.dsh-report td.n { text-align: right; font-variant-numeric: tabular-nums; }
.dsh-report th { background: #f3f3f3; }
"""

_TEXT_COLUMNS = frozenset(
    {"student", "notebook", "tool", "code", "AI policy", "last active", "source"}
)


def html_page(report: CourseReport) -> str:
    """The report as one HTML page: inline style, no script, every value escaped."""
    e = escape
    body = [f"<h1>Course report</h1>\n<p>{e(_summary(report))}</p>"]
    for title, headers, rows in _tables(report):
        body.append(f"<h2>{e(title)}</h2>")
        if not rows:
            body.append("<p>None.</p>")
            continue
        numeric = [h not in _TEXT_COLUMNS for h in headers]
        head = "".join(f"<th>{e(h)}</th>" for h in headers)
        lines = [
            "<tr>"
            + "".join(
                f'<td class="n">{e(c)}</td>' if num else f"<td>{e(c)}</td>"
                for c, num in zip(row, numeric, strict=True)
            )
            + "</tr>"
            for row in rows
        ]
        body.append(f"<table>\n<tr>{head}</tr>\n" + "\n".join(lines) + "\n</table>")
    if report.notes:
        body.append(f"<h2>{e(NOTEBOOK_NOTES_TITLE)}</h2>\n<ul>")
        body += [f"<li>{e(n)}</li>" for n in report.notes]
        body.append("</ul>")
    body.append("<h2>How these are counted</h2>\n<ul>")
    body += [f"<li>{e(n)}</li>" for n in _notes(report)]
    body.append("</ul>")
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>Course report</title>\n<style>{_STYLE}</style>\n</head>\n"
        "<body>\n"
        + sanitize(f'<div class="dsh-report {NO_MATH}">\n' + "\n".join(body) + "\n</div>")
        + "\n</body>\n</html>\n"
    )
