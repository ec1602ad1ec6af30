"""``jupyter nbconvert --to markdown`` of a notebook with a finished chat turn uses the turn's
escaped Markdown alternative once ``dsh-kernel install`` has run, not its inline-styled HTML; other
exports and other outputs are unchanged, and a priority the user set is kept.

The saved output is the renderer's own (the snapshot of a turn ``tests/unit/views`` keeps current);
nbconvert's exporters are the real ones, configured from the file the real ``dsh-kernel install`` wrote
(into a temporary prefix).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbconvert import HTMLExporter, MarkdownExporter
from traitlets.config import Config
from traitlets.config.loader import JSONFileConfigLoader

from dsh_kernel.kernel.kernelspec import (
    MARKDOWN_EXPORT_PRIORITY,
    NBCONVERT_CONFIG,
    prefer_markdown_alternative,
)

SNAPSHOTS = Path(__file__).resolve().parents[1] / "unit" / "views" / "snapshots"


def _notebook(path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    chat = nbformat.v4.new_code_cell("Check x<y and plot it.")
    md = (SNAPSHOTS / "turn.md").read_text(encoding="utf-8")
    chat.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": (SNAPSHOTS / "turn.html").read_text(encoding="utf-8"),
                "text/markdown": md,
                "text/plain": md,
            },
        )
    ]
    table = nbformat.v4.new_code_cell("%%python\ndf")
    table.outputs = [
        nbformat.v4.new_output(
            "display_data",
            data={"text/html": "<table><tr><td>1</td></tr></table>", "text/plain": "1"},
        )
    ]
    nb.cells = [chat, table]
    nbformat.write(nb, path)


def _export(exporter: type[Any], notebook: Path, config_file: Path | None = None) -> str:
    """The real exporter, configured as ``jupyter nbconvert`` loads a JSON config file."""
    config = Config()
    if config_file is not None:
        config = JSONFileConfigLoader(config_file.name, str(config_file.parent)).load_config()
    body, _ = exporter(config=config).from_filename(str(notebook))
    return str(body)


def test_markdown_export_uses_the_markdown_alternative_after_install(tmp_path: Path) -> None:
    notebook = tmp_path / "chat.ipynb"
    _notebook(notebook)
    assert "style=" in _export(MarkdownExporter, notebook)  # nbconvert's own order: the HTML

    prefix = tmp_path / "prefix"
    done = subprocess.run(
        [sys.executable, "-m", "dsh_kernel", "install", "--prefix", str(prefix)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    config_file = prefix / "etc" / "jupyter" / NBCONVERT_CONFIG
    assert f"now uses a chat cell's Markdown ({config_file})" in done.stdout

    after = _export(MarkdownExporter, notebook, config_file)
    assert "style=" not in after
    assert "| a | b |" in after and "<b>python</b> — done" in after
    assert "<table><tr><td>1</td></tr></table>" in after  # an HTML-only output is unchanged
    # The HTML export keeps the styled rendering.
    assert "style=" in _export(HTMLExporter, notebook, config_file)


def test_the_merge_keeps_what_the_file_has_and_a_priority_the_user_set(tmp_path: Path) -> None:
    path = tmp_path / NBCONVERT_CONFIG
    path.write_text(json.dumps({"NbConvertApp": {"export_format": "html"}}), encoding="utf-8")
    assert "now uses" in prefer_markdown_alternative(tmp_path)
    merged = json.loads(path.read_text(encoding="utf-8"))
    assert merged["NbConvertApp"] == {"export_format": "html"}
    priority = merged["MarkdownExporter"]["NbConvertBase"]["display_data_priority"]
    assert priority == list(MARKDOWN_EXPORT_PRIORITY)
    assert "already uses" in prefer_markdown_alternative(tmp_path)

    mine = {"MarkdownExporter": {"NbConvertBase": {"display_data_priority": ["text/plain"]}}}
    path.write_text(json.dumps(mine), encoding="utf-8")
    assert "sets its own" in prefer_markdown_alternative(tmp_path)
    assert json.loads(path.read_text(encoding="utf-8")) == mine

    path.write_text("{not json", encoding="utf-8")
    assert "not valid JSON" in prefer_markdown_alternative(tmp_path)
    assert path.read_text(encoding="utf-8") == "{not json"
