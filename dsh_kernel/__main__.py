"""``dsh-kernel`` (and ``python -m dsh_kernel``): one argparse parser, a subcommand each.

* ``kernel [-f CONNECTION_FILE] [--DshKernel.<setting>=…]`` starts the kernel, as the kernelspecs do
  (``kernel.kernelspec.ARGV``); every option it does not know goes to ipykernel's application.
* ``install`` writes the kernelspecs (``kernel.kernelspec``); ``export`` and ``report`` work on
  session stores and their Parquet exports with no kernel, ``ship`` and ``mirror`` move sessions to
  and from the shared store (``store.cli``); ``strip`` removes the session capsules from notebooks
  (``capsule.strip``).
* ``help [COMMAND]`` prints the help, or a command's.

With no arguments the help is printed and nothing starts (exit status 0). An argument list that
starts with ``-f`` is what kernelspecs written before the ``kernel`` subcommand run (``python -m
dsh_kernel -f {connection_file} …``): it is read as ``kernel -f …``, so they keep working. A wrong
command line (an unknown command, a missing argument) prints the usage and the problem on stderr,
exit status 2, and nothing starts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

Command = Callable[[argparse.Namespace], int]

PROG = "dsh-kernel"


def _kernel(args: argparse.Namespace) -> int:
    from ipykernel.kernelapp import IPKernelApp

    from dsh_kernel.kernel.kernel import DshKernel

    argv: list[str] = [] if args.connection_file is None else ["-f", args.connection_file]
    IPKernelApp.launch_instance(argv=[*argv, *args.kernel_options], kernel_class=DshKernel)
    return 0


def parser(prog: str = PROG) -> argparse.ArgumentParser:
    """The command line: the top parser and one subparser per command, in the order shown."""
    # Each command's module is cheap to import (what it needs loads when it runs), so the kernel's
    # start and --help do not wait for DuckDB or the agent.
    from dsh_kernel import __version__
    from dsh_kernel.capsule.strip import strip_arguments, strip_command
    from dsh_kernel.kernel.kernelspec import install_arguments, install_command
    from dsh_kernel.store.cli import (
        export_arguments,
        export_command,
        mirror_arguments,
        mirror_command,
        report_arguments,
        report_command,
        ship_arguments,
        ship_command,
    )

    top = argparse.ArgumentParser(
        prog=prog,
        description="A Jupyter kernel that hosts an LLM agent, and the commands that work on its "
        "session stores with no kernel running.",
        epilog=f"'{prog} help COMMAND' (or '{prog} COMMAND --help') shows a command's options.",
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(title="commands", metavar="COMMAND", dest="command")

    def add(name: str, run: Command, summary: str, description: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=summary, description=description, allow_abbrev=False)
        sub.set_defaults(run=run, parser=sub)
        return sub

    kernel = add(
        "kernel",
        _kernel,
        "start the kernel (what the kernelspecs run)",
        "Start the kernel. Any other option (--DshKernel.<setting>=…, ipykernel's own) goes to "
        "the kernel application as it is.",
    )
    kernel.add_argument(
        "-f",
        dest="connection_file",
        metavar="CONNECTION_FILE",
        help="the connection file Jupyter gives (default: the kernel writes its own)",
    )
    install_arguments(
        add(
            "install",
            install_command,
            "install the dsh and dsh-python kernelspecs for this Python",
            "Install the DSH Agent and DSH Python kernelspecs, run by this interpreter.",
        )
    )
    export_arguments(
        add(
            "export",
            export_command,
            "export a whole session store as Parquet",
            "Export a whole session store as Parquet (no kernel needed).",
        )
    )
    report_arguments(
        add(
            "report",
            report_command,
            "summarise Parquet exports or submitted notebooks per student and notebook",
            "Summarise Parquet exports (a folder per student) or submitted notebooks (their "
            "capsules, self-reported) per student and notebook.",
        )
    )
    ship_arguments(
        add(
            "ship",
            ship_command,
            "ship a store's journals the shared store lacks",
            "Ship a store's journals the shared store lacks (a kernel that was offline).",
        )
    )
    mirror_arguments(
        add(
            "mirror",
            mirror_command,
            "pull the shared store's sessions into a local store",
            "Pull the shared store's sessions into a local store, then ingest it.",
        )
    )
    strip_arguments(
        add(
            "strip",
            strip_command,
            "remove the session capsules from notebooks",
            "Remove the session capsules (each chat turn's conversation) from the outputs of "
            "notebooks, for sharing them without the conversation, like nbstripout.",
        )
    )
    helper = add("help", _help, "show this help, or a command's", "Show the help, or a command's.")
    helper.add_argument("topic", metavar="COMMAND", nargs="?", choices=sorted(commands.choices))
    helper.set_defaults(top=top, commands=commands.choices)
    return top


def _help(args: argparse.Namespace) -> int:
    chosen: argparse.ArgumentParser = args.commands[args.topic] if args.topic else args.top
    chosen.print_help()
    return 0


def _is_legacy_kernel_line(args: list[str]) -> bool:
    """Kernelspecs from before the ``kernel`` subcommand: ``-f {connection_file} …``."""
    return bool(args) and (args[0] == "-f" or args[0].startswith(("-f=", "--f=")))


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Parse the command line and run its command (module docstring); returns the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if prog is None:
        invoked = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else PROG
        prog = "python -m dsh_kernel" if invoked == "__main__.py" else invoked
    top = parser(prog)
    if not args:
        top.print_help()
        return 0
    if _is_legacy_kernel_line(args):
        args = ["kernel", *args]
    parsed, rest = top.parse_known_args(args)
    if parsed.command is None:
        top.error(f"give a command{f' before {rest[0]}' if rest else ''}")
    sub: argparse.ArgumentParser = parsed.parser
    if parsed.command == "kernel":
        parsed.kernel_options = rest
    elif rest:
        sub.error(f"unrecognized arguments: {' '.join(rest)}")
    run: Command = parsed.run
    try:
        return run(parsed)
    except argparse.ArgumentError as exc:
        sub.error(str(exc))


if __name__ == "__main__":
    sys.exit(main())
