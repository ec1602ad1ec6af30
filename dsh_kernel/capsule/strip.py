"""``dsh-kernel strip NOTEBOOK...`` (``python -m dsh_kernel strip``): the capsules out of notebooks.

Like nbstripout, but only for capsules: the ``CAPSULE_KEY`` entry of the ``metadata`` of every output
of every code cell goes, and nothing else changes. A notebook with no capsule is never rewritten (its
bytes stay as they are); one with capsules is written back as nbformat writes a notebook (one-space
indent, sorted keys, non-ASCII as it is, a final newline), validated by ``nbformat.validate`` first,
atomically (a temporary file in the same folder, then ``os.replace``) and with the file's permissions.

One line per notebook on stdout: ``PATH: removed N capsules`` or ``PATH: no capsules``. ``--check``
(or ``--dry-run``) writes nothing, says ``PATH: would remove N capsules``, and exits 1 if any
notebook holds one (a pre-commit hook, a CI step). ``-o/--output FILE`` writes the one notebook given
elsewhere (an existing FILE only with ``--force``).

Exit status: 0 done; 1 a notebook could not be read or written (one line on stderr naming it and
what is wrong: not found, not UTF-8, not JSON, not a notebook), the other notebooks processed all the
same — or, with ``--check``, some notebook holds capsules; 2 the command line is wrong (usage on
stderr, as argparse does).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from dsh_kernel.capsule import CAPSULE_KEY
from dsh_kernel.errors import UsageError
from dsh_kernel.jsonvalue import JsonObject, JsonValue

# nbformat loads when a notebook is rewritten, not when the command line is built.


def _outputs_metadata(nb: JsonObject) -> list[dict[str, JsonValue]]:
    """The ``metadata`` objects of every output of every code cell, in order."""
    found: list[dict[str, JsonValue]] = []
    cells = nb.get("cells")
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        outputs = cell.get("outputs")
        for output in outputs if isinstance(outputs, list) else []:
            if isinstance(output, dict):
                meta = output.get("metadata")
                if isinstance(meta, dict):
                    found.append(meta)
    return found


def count_capsules(nb: JsonObject) -> int:
    """How many outputs of the notebook's code cells carry a capsule."""
    return sum(CAPSULE_KEY in meta for meta in _outputs_metadata(nb))


def strip_capsules(nb: JsonObject) -> int:
    """Remove every capsule from the notebook, in place; returns how many there were."""
    removed = 0
    for meta in _outputs_metadata(nb):
        if CAPSULE_KEY in meta:
            del meta[CAPSULE_KEY]
            removed += 1
    return removed


def dumps(nb: JsonObject) -> str:
    """The notebook as ``nbformat.write`` lays it out (the lines as they are: nothing is split)."""
    return (
        json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False, separators=(",", ": ")) + "\n"
    )


def parse_notebook(data: bytes, path: Path) -> JsonObject:
    """A notebook file's bytes as its JSON object; ``UsageError`` names ``path`` and what is wrong."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not a notebook: not UTF-8 text (byte {exc.start})") from None
    try:
        value: JsonValue = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{path}: not a notebook: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"{path}: not a notebook: JSON it cannot be read ({exc})") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: not a notebook: its JSON is a {_kind(value)}, not an object")
    version = value.get("nbformat")
    if "cells" not in value and "worksheets" not in value:
        raise UsageError(f"{path}: not a notebook: its JSON has no cells")
    if version != 4 or not isinstance(value.get("cells"), list):
        shown = f"nbformat {version}" if isinstance(version, int) else "no nbformat version"
        raise UsageError(
            f"{path}: not a version 4 notebook ({shown}): open it in Jupyter and save it to "
            "convert it"
        )
    return value


def _kind(value: JsonValue) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


def read_notebook(path: Path) -> tuple[bytes, JsonObject]:
    """The file's bytes and its notebook; ``UsageError`` says which file and what is wrong."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: a folder, not a notebook") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return data, parse_notebook(data, path)


def validate(nb: JsonObject, path: Path) -> None:
    """``nbformat.validate`` on a copy (it may repair what it checks); ``UsageError`` if invalid."""
    import warnings

    import nbformat

    try:
        with warnings.catch_warnings():  # a missing cell id is nbformat's warning, not our line
            warnings.simplefilter("ignore")
            nbformat.validate(copy.deepcopy(nb))
    except nbformat.ValidationError as exc:
        first = (str(exc.message).splitlines() or ["invalid"])[0]
        first = first if len(first) <= 160 else first[:159] + "…"
        raise UsageError(f"{path}: not a valid notebook ({first}); left as it was") from None


def write_atomically(path: Path, data: bytes, mode: int) -> None:
    """``data`` to ``path`` through a temporary file beside it and ``os.replace``, with ``mode``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".strip")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@dataclass(frozen=True)
class Stripped:
    """What ``strip_file`` did: how many capsules, and where the notebook went (``None``: unwritten)."""

    capsules: int
    written: Path | None


def strip_file(
    path: Path, *, output: Path | None = None, check: bool = False, force: bool = False
) -> Stripped:
    """Strip one notebook file, in place or into ``output``; ``check`` only counts.

    Raises ``UsageError`` (path and problem in its message) for a file it cannot read, parse, validate
    or write; nothing is written then.
    """
    data, nb = read_notebook(path)
    removed = strip_capsules(nb)
    if check:
        return Stripped(removed, None)
    target = path.resolve() if output is None else output
    same = output is None or _same_file(path, output)
    if same and removed == 0:
        return Stripped(0, None)  # not rewritten: the bytes stay exactly as they are
    if not same and output is not None and output.exists() and not force:
        raise UsageError(f"{output}: already exists; give --force to replace it")
    if removed:
        validate(nb, path)
        try:
            data = dumps(nb).encode("utf-8")
        except UnicodeEncodeError:
            raise UsageError(
                f"{path}: holds text that is not Unicode (a lone surrogate); left as it was"
            ) from None
    try:
        mode = stat.S_IMODE((target if target.exists() else path).stat().st_mode)
    except OSError:
        mode = _new_file_mode()
    try:
        write_atomically(target, data, mode)
    except OSError as exc:
        raise UsageError(f"{target}: cannot write it ({exc.strerror or exc})") from None
    return Stripped(removed, target)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _capsules(n: int) -> str:
    return f"{n} capsule{'s' * (n != 1)}"


def strip_arguments(p: argparse.ArgumentParser) -> None:
    """The ``strip`` subcommand's arguments."""
    p.add_argument("notebooks", metavar="NOTEBOOK", nargs="+", type=Path, help="a .ipynb file")
    p.add_argument(
        "--check",
        "--dry-run",
        action="store_true",
        help="write nothing; exit 1 if any notebook holds capsules (a pre-commit hook, CI)",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        type=Path,
        help="write the stripped notebook here (one NOTEBOOK only; default: in place)",
    )
    p.add_argument("--force", action="store_true", help="replace FILE if it exists")


def strip_command(args: argparse.Namespace) -> int:
    """``strip``: the parsed arguments in, the exit status out (module docstring)."""
    notebooks: list[Path] = args.notebooks
    output: Path | None = args.output
    check: bool = args.check
    if output is not None and len(notebooks) > 1:
        raise argparse.ArgumentError(None, "-o/--output takes one NOTEBOOK, not several")
    if output is not None and check:
        raise argparse.ArgumentError(None, "--check writes nothing: give it no -o/--output")
    status = 0
    for path in notebooks:
        try:
            done = strip_file(path, output=output, check=check, force=args.force)
        except UsageError as exc:
            print(f"error: {exc.message}", file=sys.stderr, flush=True)
            status = 1
            continue
        if check:
            line = f"would remove {_capsules(done.capsules)}" if done.capsules else "no capsules"
            status = 1 if done.capsules else status
        else:
            line = f"removed {_capsules(done.capsules)}" if done.capsules else "no capsules"
            if output is not None and done.written is not None:
                line += f" (written to {output})"
        print(f"{path}: {line}", flush=True)
    return status
