"""A narrow typed facade over the untyped parts of IPython/ipykernel this package touches."""

from __future__ import annotations

from typing import Any, cast


def user_namespace(shell: object) -> dict[str, object]:
    """The shell's ``user_ns`` (the notebook namespace)."""
    return cast("dict[str, object]", cast(Any, shell).user_ns)


def _display_module() -> Any:
    import IPython.display

    return IPython.display


def display_raw(bundle: dict[str, Any], *, display_id: str) -> None:
    _display_module().display(bundle, raw=True, display_id=display_id)


def update_raw(
    bundle: dict[str, Any], *, display_id: str, metadata: dict[str, Any] | None = None
) -> None:
    _display_module().update_display(
        bundle, raw=True, display_id=display_id, metadata=metadata or {}
    )


def display_object(value: object) -> None:
    _display_module().display(value)
