"""Where the kernel's notebook file is now: ``JPY_SESSION_NAME`` at start, then where the frontend
extension says the notebook went.

jupyter-server names the notebook in ``JPY_SESSION_NAME`` when it starts the kernel — an absolute
path when it knows the file, else one relative to its root — and never again: a notebook renamed
or moved while its kernel runs (or before a restart, which reuses the kernel's environment) is no
longer where that variable says. The extension names the notebook's path, relative to the server
root, when it opens its comm and whenever the path changes (``kernel.notebook.comm``;
``docs/dev/notebook-comm.md``). ``NotebookFile`` follows those names; the AI policy reads the file
it finds (``kernel.course.policy``).

* ``notebook_file(name, cwd)`` resolves a name as jupyter-server gives it: an absolute path, else
  one relative to the kernel's working directory or to one of its parents (the server's root), else
  the file of that name in the working directory; ``None`` when no such file exists.
* ``server_root(name, hello)``: when ``JPY_SESSION_NAME`` is absolute and ends with the path a
  frontend opened its comm with, the server root is what precedes it.
* ``NotebookFile.named(path, hello)`` moves to the frontend's ``path`` (joined to the server root
  when that is known) only when it names a file that exists: a frontend of another notebook, or a
  path this kernel cannot resolve, leaves the name where it was.

The frontend's messages may arrive on another thread (a kernel subshell): ``named`` only rebinds
one attribute, which readers take whole.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

_log = logging.getLogger(__name__)


def notebook_path() -> str | None:
    """The notebook this kernel serves, as jupyter-server names it (``JPY_SESSION_NAME``); ``None``
    when the kernel was started without a server (a console, nbclient without the variable)."""
    return os.environ.get("JPY_SESSION_NAME", "").strip() or None


def notebook_file(name: str, cwd: Path) -> Path | None:
    """The file ``name`` names (module docstring), or ``None`` when none exists."""
    given = Path(name).expanduser()
    if given.is_absolute():
        return given if _is_file(given) else None
    for base in (cwd, *cwd.parents):
        if _is_file(base / given):
            return base / given
    here = cwd / given.name
    return here if _is_file(here) else None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL in it
        return False


def server_root(name: str | None, hello: str | None) -> str | None:
    """The server root ``name`` (``JPY_SESSION_NAME``) implies, ending with a separator, when it is
    absolute and ends with the server-relative ``hello`` path; else ``None``."""
    if not (name and hello and os.path.isabs(name)):
        return None
    rel = hello.lstrip("/")
    if not rel or not name.replace(os.sep, "/").endswith("/" + rel):
        return None
    return name[: len(name) - len(rel)]


class NotebookFile:
    """The name of the kernel's notebook file, as it is now (module docstring)."""

    def __init__(self, name: str | None, cwd: Path) -> None:
        self.start = name
        """``JPY_SESSION_NAME`` at start."""
        self.cwd = cwd
        self.name = name
        """The name to resolve now (``notebook_file``); ``None``: no notebook is known."""

    def named(self, path: str, hello: str | None) -> None:
        """A frontend whose comm opened with the path ``hello`` names the notebook ``path`` (both
        relative to the server root): follow it when it names a file that exists."""
        root = server_root(self.start, hello)
        candidate = root + path.lstrip("/") if root else path
        if candidate == self.name:
            return
        if notebook_file(candidate, self.cwd) is None:
            _log.info("dsh: a frontend names the notebook %s, which is not found here", path)
            return
        _log.info("dsh: the notebook is now %s (was %s)", candidate, self.name)
        self.name = candidate

    def find(self) -> Path | None:
        """The notebook file now, or ``None`` when there is none."""
        name = self.name
        return notebook_file(name, self.cwd) if name else None
