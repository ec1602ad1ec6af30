"""``python -m dsh_kernel``: launch the kernel (as the kernelspecs do), or run a subcommand.

``python -m dsh_kernel -f CONNECTION_FILE [--DshKernel.x=…]`` (what ``kernel.json`` runs; any
argument list that starts with an option, or none) starts the kernel. ``install`` installs the
kernelspecs (``kernel.kernelspec``); ``export`` and ``report`` work on session stores and their
Parquet exports with no kernel, ``ship`` and ``mirror`` move sessions to and from the shared store
(``store.cli``). ``-h``, ``--help`` or ``help`` prints the usage.
Any other first word is a mistake: the usage goes to stderr, the exit status is 2, and no kernel
starts.
"""

from __future__ import annotations

import sys

USAGE = """\
usage: python -m dsh_kernel -f CONNECTION_FILE [--DshKernel.<setting>=…]   start the kernel
       python -m dsh_kernel install [--user | --sys-prefix | --prefix PATH]
       python -m dsh_kernel export --parquet DIR [--store PATH] [--since YYYY-MM-DD] [--force]
       python -m dsh_kernel report DIR... [-o FILE] [--format md|html] [--force]
       python -m dsh_kernel ship [--store PATH]                   (to DSH_SHARED_STORE)
       python -m dsh_kernel mirror DSN [--store PATH] [--since YYYY-MM-DD]
"""


def main(argv: list[str] | None = None) -> int:
    """Dispatch on the first argument (module docstring); returns the exit status."""
    args = sys.argv[1:] if argv is None else argv
    first = args[0] if args else None
    if first in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if first == "install":
        from dsh_kernel.kernel.kernelspec import main as install_main

        return install_main(args[1:])
    if first in ("export", "report"):
        from dsh_kernel.store.cli import export_main, report_main

        return (export_main if first == "export" else report_main)(args[1:])
    if first in ("ship", "mirror"):
        from dsh_kernel.store.cli import mirror_main, ship_main

        return (ship_main if first == "ship" else mirror_main)(args[1:])
    if first is not None and not first.startswith("-"):
        sys.stderr.write(USAGE + f"python -m dsh_kernel: unknown command {first!r}\n")
        return 2
    from ipykernel.kernelapp import IPKernelApp

    from dsh_kernel.kernel.kernel import DshKernel

    IPKernelApp.launch_instance(argv=args, kernel_class=DshKernel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
