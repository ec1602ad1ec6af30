"""Installing the two kernelspecs (``dsh`` "DSH Agent" and ``dsh-python`` "DSH Python").

``pip install`` ships them as wheel shared-data (``share/jupyter/kernels/…``, from ``jupyter-config/``
in the source tree). ``dsh-kernel install [--user | --sys-prefix | --prefix PATH]`` writes them with
the absolute path of *this* interpreter, so Jupyter started from any environment runs the kernel in
this one.

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
    return 0
