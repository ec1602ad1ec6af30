"""Which view a chat cell gets (``kernel.host.frontends``): the rule, and the sessions that opened
ipywidgets' control comm."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from dsh_kernel.kernel.host.frontends import CONTROL_TARGET, WidgetClients, wants_text


@pytest.mark.parametrize(
    ("who", "cell_id", "allow_stdin", "session", "text"),
    [
        ("JupyterLab, Notebook 7, VS Code", "c0ffee", True, "lab", False),
        ("nbclient, papermill, jupyter execute", None, False, "nbclient", False),
        ("jupyter console, qtconsole, kc.execute", None, True, "console", True),
        ("classic Notebook: opened the widget control comm", None, True, "nb6", False),
        ("a client with our dsh.notebook comm", None, True, "lab", False),
        ("no session in the header", None, True, None, True),
        ("an empty cell id is no cell id", "", True, "console", True),
    ],
)
def test_the_rule(
    who: str, cell_id: str | None, allow_stdin: bool, session: str | None, text: bool
) -> None:
    got = wants_text(
        cell_id=cell_id,
        allow_stdin=allow_stdin,
        session=session,
        widget_sessions={"nb6", "lab"},
    )
    assert got is text, who


class Manager:
    """ipykernel's ``CommManager`` as far as targets go: registering replaces."""

    def __init__(self) -> None:
        self.targets: dict[str, Callable[..., object]] = {}

    def register_target(self, target_name: str, f: Callable[..., object]) -> None:
        self.targets[target_name] = f

    def open(self, session: str) -> None:
        msg: dict[str, object] = {"header": {"session": session}, "content": {"data": {}}}
        self.targets[CONTROL_TARGET](object(), msg)


def test_sessions_that_open_the_control_comm_are_recorded_and_ipywidgets_answers() -> None:
    manager = Manager()
    answered: list[str] = []

    def ipywidgets_handler(comm: object, msg: dict[str, object]) -> None:
        header = msg["header"]
        assert isinstance(header, dict)
        answered.append(str(header.get("session")))

    def import_ipywidgets() -> Callable[[object, dict[str, object]], object]:
        manager.register_target(CONTROL_TARGET, ipywidgets_handler)  # what its import does
        return ipywidgets_handler

    clients = WidgetClients(import_ipywidgets)
    clients.ensure(manager)
    manager.open("nb6")
    assert "nb6" in clients and answered == ["nb6"]
    assert manager.targets[CONTROL_TARGET] == clients.opened  # put back after the import
    manager.open("other")
    assert clients.sessions == {"nb6", "other"} and answered == ["nb6", "other"]


def test_ensure_goes_back_in_front_of_a_handler_registered_later() -> None:
    manager = Manager()
    answered: list[object] = []
    clients = WidgetClients(lambda: pytest.fail("ipywidgets' handler is known"))
    clients.ensure(manager)
    manager.register_target(CONTROL_TARGET, lambda comm, msg: answered.append(comm))
    clients.ensure(manager)  # before a chat cell: the user's import replaced ours
    manager.open("later")
    assert "later" in clients and len(answered) == 1
    clients.ensure(manager)  # already in front: nothing changes
    manager.open("again")
    assert len(answered) == 2
