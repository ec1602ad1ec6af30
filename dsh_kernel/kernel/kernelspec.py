"""Installing the two kernelspecs (``dsh`` "DSH Agent" and ``dsh-python`` "DSH Python").

``pip install`` ships them as wheel shared-data (``share/jupyter/kernels/…``, from ``jupyter-config/``
in the source tree). ``dsh-kernel install [--user | --sys-prefix | --prefix PATH]`` writes them with
the absolute path of *this* interpreter, so Jupyter started from any environment runs the kernel in
this one.

It also points nbconvert's Markdown export at a chat cell's Markdown alternative
(``prefer_markdown_alternative``): a finished turn is saved as sanitised, inline-styled HTML (for
JupyterLab, GitHub, nbviewer) and as escaped Markdown, and ``jupyter nbconvert --to markdown`` would
otherwise embed the HTML. The setting is merged into ``jupyter_nbconvert_config.json`` of the same
place (``--user``: the user's Jupyter config directory; ``--sys-prefix``/``--prefix``: its
``etc/jupyter``), scoped to the Markdown exporter (``MarkdownExporter.NbConvertBase``), and never
replaces a priority the file already sets. ``pip install`` alone cannot merge a file, so it ships no
nbconvert configuration: without ``install`` the export keeps nbconvert's own order.

A kernelspec runs ``python -m dsh_kernel kernel -f {connection_file} …`` (``ARGV``). Kernelspecs
written before the ``kernel`` subcommand run ``python -m dsh_kernel -f {connection_file} …``, which
``dsh_kernel.__main__`` still reads as ``kernel -f …``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import cast

ARGV: tuple[str, ...] = ("-m", "dsh_kernel", "kernel", "-f", "{connection_file}")
"""What follows the interpreter in a kernelspec's ``argv`` (before the kernel's own options)."""

KERNELS: dict[str, tuple[str, list[str]]] = {
    "dsh": ("DSH Agent", []),
    "dsh-python": ("DSH Python", ["--DshKernel.default_cell=python"]),
}


def spec(name: str, executable: str | None = None) -> dict[str, object]:
    """The ``kernel.json`` of kernel ``name``, started with ``executable`` (default: this Python)."""
    display, extra = KERNELS[name]
    return {
        "argv": [executable or sys.executable, *ARGV, *extra],
        "display_name": display,
        "language": "python",
        "interrupt_mode": "signal",
        "metadata": {"debugger": False},
    }


def _logos() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    pkg = resources.files("dsh_kernel.kernel") / "logos"
    for fname in ("logo-32x32.png", "logo-64x64.png"):
        res = pkg / fname
        if res.is_file():
            out.append((fname, res.read_bytes()))
    return out


def install(*, user: bool = False, prefix: str | None = None) -> list[str]:
    """Install both kernelspecs; returns the directories written."""
    from jupyter_client.kernelspec import KernelSpecManager

    manager = KernelSpecManager()
    written: list[str] = []
    for name in KERNELS:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp) / name
            d.mkdir()
            (d / "kernel.json").write_text(
                json.dumps(spec(name), indent=1) + "\n", encoding="utf-8"
            )
            for fname, data in _logos():
                (d / fname).write_bytes(data)
            written.append(
                manager.install_kernel_spec(str(d), kernel_name=name, user=user, prefix=prefix)
            )
    return written


MARKDOWN_EXPORT_PRIORITY: tuple[str, ...] = (
    "text/markdown",
    "text/html",
    "image/svg+xml",
    "text/latex",
    "image/png",
    "image/jpeg",
    "text/plain",
)
"""nbconvert's own order for its Markdown exporter, with ``text/markdown`` moved first: only an
output that has both (a chat cell's) changes."""

NBCONVERT_CONFIG = "jupyter_nbconvert_config.json"


def config_dir(*, user: bool = False, prefix: str | None = None) -> Path:
    """The Jupyter config directory that goes with ``install``'s choice of place."""
    from jupyter_core.paths import SYSTEM_CONFIG_PATH, jupyter_config_dir

    if user:
        return Path(jupyter_config_dir())
    if prefix is not None:
        return Path(prefix) / "etc" / "jupyter"
    return Path(SYSTEM_CONFIG_PATH[0])


def prefer_markdown_alternative(directory: Path) -> str:
    """Merge ``MARKDOWN_EXPORT_PRIORITY`` into ``directory``'s nbconvert config (module docstring);
    returns what was done, one line. Raises ``OSError`` when the file cannot be written."""
    path = directory / NBCONVERT_CONFIG
    config: dict[str, object] = {}
    if path.exists():
        try:
            loaded: object = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return f"left {path} as it is: it is not valid JSON ({exc})"
        if not isinstance(loaded, dict):
            return f"left {path} as it is: it is not a JSON object"
        config = cast("dict[str, object]", loaded)
    exporter = config.setdefault("MarkdownExporter", {})
    if not isinstance(exporter, dict):
        return f"left {path} as it is: its MarkdownExporter is not an object"
    base = cast("dict[str, object]", exporter).setdefault("NbConvertBase", {})
    if not isinstance(base, dict):
        return f"left {path} as it is: its MarkdownExporter.NbConvertBase is not an object"
    base = cast("dict[str, object]", base)
    if "display_data_priority" in base:
        if base["display_data_priority"] == list(MARKDOWN_EXPORT_PRIORITY):
            return f"nbconvert's Markdown export already uses a chat cell's Markdown ({path})"
        return f"left {path} as it is: it sets its own Markdown export priority"
    base["display_data_priority"] = list(MARKDOWN_EXPORT_PRIORITY)
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=directory, prefix=".nbconvert-", delete=False
    ) as tmp:
        json.dump(config, tmp, indent=2)
        tmp.write("\n")
    Path(tmp.name).replace(path)
    return f"nbconvert's Markdown export now uses a chat cell's Markdown ({path})"


def install_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``install`` subcommand's arguments: ``--user``, ``--sys-prefix`` or ``--prefix``."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="install for the current user")
    where.add_argument(
        "--sys-prefix", action="store_true", help="install into sys.prefix (this environment)"
    )
    where.add_argument("--prefix", help="install under PREFIX/share/jupyter/kernels")


def install_command(args: argparse.Namespace) -> int:
    """``install``: both kernelspecs; the exit status (1 when they cannot be written)."""
    prefix = sys.prefix if args.sys_prefix else args.prefix
    try:
        paths = install(user=args.user, prefix=prefix)
    except PermissionError as exc:
        print(f"cannot write the kernelspecs: {exc}; try --user or --sys-prefix", file=sys.stderr)
        return 1
    for p in paths:
        print(f"installed kernelspec {Path(p).name} in {p}")
    where = config_dir(user=args.user, prefix=prefix)
    try:
        print(prefer_markdown_alternative(where))
    except OSError as exc:
        print(
            f"could not set nbconvert's Markdown export in {where} ({exc}); the kernelspecs are "
            "installed, and `jupyter nbconvert --to markdown` embeds a chat cell's HTML",
            file=sys.stderr,
        )
    return 0
