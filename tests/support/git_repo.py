"""A small git repository with three known commits, for a git MCP server (``mcp-server-git``) to read.

``make_git_repo(path)`` runs the ``git`` program (which ``mcp-server-git`` needs too) with no user or
system configuration, a fixed author and fixed dates, so the log is the same on every machine but
for the commit ids: ``COMMITS`` are the messages, oldest first, each commit adding one file.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

COMMITS = (
    "Add the data loader",
    "Fix the off-by-one in the batcher",
    "Document the training loop",
)
"""The commit messages, oldest first."""

AUTHOR = ("Ada Tester", "ada@example.invalid")


@dataclass(frozen=True, slots=True, kw_only=True)
class GitRepo:
    """The repository made: its working tree and its commits, oldest first."""

    path: Path
    messages: tuple[str, ...]
    shas: tuple[str, ...]


def _git(path: Path, *args: str, date: str | None = None) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": AUTHOR[0],
        "GIT_AUTHOR_EMAIL": AUTHOR[1],
        "GIT_COMMITTER_NAME": AUTHOR[0],
        "GIT_COMMITTER_EMAIL": AUTHOR[1],
    }
    if date is not None:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    proc = subprocess.run(
        ["git", "-C", str(path), *args], env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}"
        )
    return proc.stdout.strip()


def make_git_repo(path: Path) -> GitRepo:
    """A new repository at ``path`` (made if missing) on branch ``main`` with ``COMMITS``."""
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q", "-b", "main")
    shas: list[str] = []
    for n, message in enumerate(COMMITS, start=1):
        (path / f"step{n}.txt").write_text(f"{message}\n", encoding="utf-8")
        _git(path, "add", f"step{n}.txt")
        _git(path, "commit", "-q", "-m", message, date=f"2026-01-0{n}T12:00:00+00:00")
        shas.append(_git(path, "rev-parse", "HEAD"))
    return GitRepo(path=path, messages=COMMITS, shas=tuple(shas))
