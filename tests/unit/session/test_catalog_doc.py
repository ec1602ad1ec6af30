"""docs/session-events.md is generated from EVENT_CATALOG and must match it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dsh_kernel.session import catalog_doc
from dsh_kernel.session.events import EVENT_CATALOG

DOC = Path(__file__).resolve().parents[3] / "docs" / "session-events.md"


def test_committed_doc_is_current() -> None:
    assert DOC.read_text(encoding="utf-8") == catalog_doc.render(), (
        "docs/session-events.md is stale: run python -m dsh_kernel.session.catalog_doc"
    )


def test_every_event_type_has_a_section_with_its_fields() -> None:
    text = catalog_doc.render()
    for event_type, spec in EVENT_CATALOG.items():
        section = text.split(f"## `{event_type}`\n", 1)[1].split("\n## ", 1)[0]
        assert spec.summary in section
        for name in spec.required + spec.optional:
            assert f"`{name}`" in section, (event_type, name)


def test_check_mode_fails_on_a_stale_file_and_passes_after_writing(tmp_path: Path) -> None:
    stale = tmp_path / "events.md"
    stale.write_text("# old\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "dsh_kernel.session.catalog_doc", "--check", str(stale)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    assert "stale" in out.stderr
    assert catalog_doc.main([str(stale)]) == 0
    assert catalog_doc.main(["--check", str(stale)]) == 0
