"""``capsule.strip``: the capsules found and removed, everything else left as it was, the notebook
written as nbformat writes one, and each way a file can be wrong named in one line."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from dsh_kernel.capsule import CAPSULE_KEY
from dsh_kernel.capsule.strip import (
    count_capsules,
    dumps,
    parse_notebook,
    strip_capsules,
    strip_file,
)
from dsh_kernel.errors import UsageError

CAPSULE = {"version": 1, "session": "s-1", "turn": 1, "header": {}, "events": [], "sha256": "00"}


def turn_output(text: str, capsule: bool) -> nbformat.NotebookNode:
    meta = {CAPSULE_KEY: {**CAPSULE, "turn": 1}, "other/key": {"kept": True}} if capsule else {}
    return new_output(
        "display_data", {"text/plain": text, "text/markdown": f"**{text}**"}, metadata=meta
    )


def notebook(capsules: int) -> nbformat.NotebookNode:
    """A notebook with ``capsules`` chat outputs carrying a capsule, a plain output and a note."""
    nb = new_notebook(metadata={"kernelspec": {"name": "dsh", "display_name": "DSH Agent"}})
    nb.cells.append(new_markdown_cell("# Notes — ünïcode ✓", metadata={CAPSULE_KEY: "not ours"}))
    for i in range(capsules):
        nb.cells.append(
            new_code_cell(f"question {i}\nline two", outputs=[turn_output(f"a{i}", True)])
        )
    nb.cells.append(new_code_cell("%%python\n1 + 1", outputs=[turn_output("2", False)]))
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"cell-{i}"
    return nb


def as_json(nb: nbformat.NotebookNode) -> Any:  # the JSON object, indexed freely by the tests
    return json.loads(nbformat.writes(nb))


def write(path: Path, nb: nbformat.NotebookNode) -> Path:
    nbformat.write(nb, path)
    return path


def test_counting_and_stripping_touch_only_the_capsule_key_of_code_outputs() -> None:
    nb = as_json(notebook(2))
    before = json.loads(json.dumps(nb))
    assert count_capsules(nb) == 2
    assert strip_capsules(nb) == 2
    assert count_capsules(nb) == 0 and strip_capsules(nb) == 0
    # the same notebook with the key taken out by hand: nothing else moved
    for cell in before["cells"]:
        for output in cell.get("outputs", []):
            output["metadata"].pop(CAPSULE_KEY, None)
    assert nb == before
    assert nb["cells"][0]["metadata"] == {CAPSULE_KEY: "not ours"}  # a markdown cell's own
    assert nb["cells"][1]["outputs"][0]["metadata"] == {"other/key": {"kept": True}}


def test_dumps_is_what_nbformat_writes() -> None:
    nb = notebook(0)
    assert dumps(as_json(nb)) == nbformat.writes(nb) + "\n"
    stripped = as_json(notebook(2))
    strip_capsules(stripped)
    assert dumps(stripped) == nbformat.writes(nbformat.from_dict(stripped)) + "\n"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff\xfe{}", "not a notebook: not UTF-8 text"),
        (b'{"cells": [', "not a notebook: not JSON (line 1 column 12"),
        (b"[1, 2]", "not a notebook: its JSON is a list, not an object"),
        (b'{"name": "package.json"}', "not a notebook: its JSON has no cells"),
        (b'{"nbformat": 3, "worksheets": []}', "not a version 4 notebook (nbformat 3)"),
        (b'{"cells": {}}', "not a version 4 notebook (no nbformat version)"),
    ],
)
def test_a_file_that_is_no_notebook_is_named_with_what_is_wrong(data: bytes, says: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_notebook(data, Path("hw/a.ipynb"))
    assert info.value.message.startswith(f"hw/a.ipynb: {says}")
    assert "\n" not in info.value.message


def test_in_place_keeps_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = write(tmp_path / "a.ipynb", notebook(2))
    path.chmod(0o640)
    done = strip_file(path)
    assert done.capsules == 2 and done.written == path.resolve()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.ipynb"]
    again = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    nbformat.validate(again)
    assert count_capsules(as_json(again)) == 0


def test_a_notebook_without_capsules_is_not_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "plain.ipynb"
    odd = json.dumps(as_json(notebook(0)), indent=4)  # not nbformat's layout: stays as it is
    path.write_text(odd, encoding="utf-8")
    os.utime(path, (1_000_000_000, 1_000_000_000))
    assert strip_file(path).capsules == 0
    assert path.read_text(encoding="utf-8") == odd
    assert path.stat().st_mtime == 1_000_000_000


def test_check_counts_and_writes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path / "a.ipynb", notebook(3))
    data = path.read_bytes()
    assert strip_file(path, check=True).capsules == 3
    assert path.read_bytes() == data


def test_output_elsewhere_keeps_the_source_and_needs_force_to_replace(tmp_path: Path) -> None:
    src = write(tmp_path / "a.ipynb", notebook(1))
    data = src.read_bytes()
    out = tmp_path / "shared" / "a.ipynb"
    out.parent.mkdir()
    assert strip_file(src, output=out).written == out
    assert src.read_bytes() == data and count_capsules(json.loads(out.read_bytes())) == 0
    with pytest.raises(UsageError, match="already exists; give --force"):
        strip_file(src, output=out)
    assert strip_file(src, output=out, force=True).capsules == 1
    plain = write(tmp_path / "plain.ipynb", notebook(0))
    copy = tmp_path / "copy.ipynb"
    assert strip_file(plain, output=copy).capsules == 0
    assert copy.read_bytes() == plain.read_bytes()  # -o always writes FILE, here as it was


def test_a_result_nbformat_refuses_is_not_written(tmp_path: Path) -> None:
    nb = as_json(notebook(1))
    nb["cells"][1]["outputs"].append({"output_type": "bogus", "metadata": {}})
    path = tmp_path / "bad.ipynb"
    path.write_text(dumps(nb), encoding="utf-8")
    data = path.read_bytes()
    with pytest.raises(UsageError) as info:
        strip_file(path)
    assert info.value.message.startswith(f"{path}: not a valid notebook (")
    assert info.value.message.endswith("; left as it was")
    assert path.read_bytes() == data and sorted(tmp_path.iterdir()) == [path]


def test_a_symlinked_notebook_is_stripped_where_it_lives(tmp_path: Path) -> None:
    real = write(tmp_path / "real.ipynb", notebook(1))
    link = tmp_path / "link.ipynb"
    link.symlink_to(real)
    assert strip_file(link).capsules == 1
    assert link.is_symlink() and count_capsules(json.loads(real.read_bytes())) == 0
