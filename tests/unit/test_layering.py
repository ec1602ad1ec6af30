"""The layering, pinned: every import in ``dsh_kernel`` points down the order docs/architecture.md draws.

Read from the source with ``ast``, so lazy imports (inside functions) and ``TYPE_CHECKING`` imports
count like any other: a type-only import is still a dependency a reader and pyright must follow, and
hiding an upward arrow behind ``TYPE_CHECKING`` is how circles start. A module may import its own
package and any lower layer; two packages of one layer never import each other. And no module
imports itself back through others (a module importing its own package's ``__init__`` aside).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "dsh_kernel"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("jsonvalue",),
    ("ids", "textcap", "markup"),
    ("errors",),
    ("abort", "failures"),
    ("llm",),
    ("session",),
    ("transcript", "capsule"),
    ("tools",),
    ("runtime", "agent"),
    ("store", "views", "mcp"),
    ("kernel",),
    ("testing", "__init__", "__main__"),
)
"""Lowest first: the root modules (``errors``, ``ids``, ``jsonvalue``, ``textcap``, ``abort``,
``failures``) and ``markup`` (outside text to inert HTML: pure functions the views, the store's
query results and the course report share), then the packages (``capsule``, the session a
notebook's outputs carry, beside the turn reader: it reads and writes logs, so the store's report and
the kernel can both use it), then
what sits on top (the public fakes, the package's lazy re-exports of the public API, ``python -m dsh_kernel``)."""

LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def _unit(module: str) -> str:
    """``dsh_kernel.llm.types`` → ``llm``; ``dsh_kernel.errors`` → ``errors``; the root → ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


MODULES = {_module(p): p for p in ROOT.rglob("*.py")}


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """``(imported dsh_kernel module, line)`` for every import in ``path``, at any depth."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "dsh_kernel" or node.module.startswith("dsh_kernel."):
                found = [f"{node.module}.{a.name}" for a in node.names]
                subs = [m for m in found if m in MODULES]
                for m in subs or [node.module]:
                    yield m, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("dsh_kernel"):
                    yield alias.name, node.lineno


def test_every_unit_has_a_layer() -> None:
    assert {_unit(m) for m in MODULES} == set(LEVEL)


def test_imports_point_down_the_layers() -> None:
    wrong: list[str] = []
    for module, path in sorted(MODULES.items()):
        src = _unit(module)
        for target, line in _imports(path):
            dst = _unit(target)
            if dst == src or (dst == "__init__" and target == "dsh_kernel" and src != "__init__"):
                # the root package only for ``__version__``; itself imports nothing at the top
                continue
            if LEVEL[dst] >= LEVEL[src]:
                wrong.append(f"{path.relative_to(ROOT.parent)}:{line} {module} -> {target}")
    assert not wrong, "imports against the layering:\n" + "\n".join(wrong)


JUPYTER_ALLOWED = {
    "ipykernel": {"kernel", "__main__"},  # __main__ starts the kernel app
    "jupyter_client": {"kernel"},
    # runtime formats a code run's values as IPython would, with a repr fallback without it
    "IPython": {"kernel", "runtime"},
    "ipywidgets": {"views", "kernel"},
}


def test_jupyter_is_imported_only_where_the_architecture_says() -> None:
    wrong: list[str] = []
    for module, path in MODULES.items():
        unit = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                allowed = JUPYTER_ALLOWED.get(name.split(".")[0])
                if allowed is not None and unit not in allowed:
                    wrong.append(f"{module} imports {name}")
    assert not wrong, wrong


def test_no_module_imports_itself_back_through_others() -> None:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, source in MODULES.items():
        for target, _line in _imports(source):
            if target in MODULES and not module.startswith(target + "."):
                graph[module].add(target)  # a module importing its own package's __init__ aside
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append([*path[path.index(t) :], t])
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import circles:\n" + "\n".join(" -> ".join(c) for c in cycles)
