"""The AI policy in force (``kernel.course.policy``): the notebook's metadata, read from the file
``JPY_SESSION_NAME`` names and only when it changed; the stricter of it and the configuration; what
``explain`` and ``off`` do to a real host's agent; a fork's header."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dsh_kernel.errors import DshError, UsageError
from dsh_kernel.ids import CallId
from dsh_kernel.kernel.course.config import CourseSettings, course_settings
from dsh_kernel.kernel.course.policy import (
    EXPLAIN_GUIDE,
    NOTEBOOK_ORIGIN,
    NotebookPolicy,
    PolicyGate,
    before_chat,
    read_notebook_policy,
)
from dsh_kernel.kernel.host.agent_host import AgentHost
from dsh_kernel.kernel.host.settings import HostSettings
from dsh_kernel.kernel.notebook.comm import NotebookComms
from dsh_kernel.kernel.notebook.file import NotebookFile, notebook_file
from dsh_kernel.kernel.toolbox.notebook import NotebookDesk
from dsh_kernel.llm.config import KeyStore
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.store.sessions import fork
from dsh_kernel.tools.types import ToolCall


def nb_text(metadata: object) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": metadata, "cells": []})


# --- reading the metadata -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, None),
        ({"dsh": {}}, None),
        ({"dsh": "explain"}, None),  # not our object: nothing asked
        ({"dsh": {"ai_policy": ""}}, None),
        ({"dsh": {"ai_policy": "explain"}}, "explain"),
        ({"dsh": {"ai_policy": " OFF "}}, "off"),
        ({"dsh": {"ai_policy": "full"}, "kernelspec": {"name": "dsh"}}, "full"),
    ],
)
def test_the_metadata_names_a_policy_or_none(metadata: object, expected: str | None) -> None:
    assert read_notebook_policy(nb_text(metadata)) == expected


@pytest.mark.parametrize("value", ["strict", 3, ["off"], True])
def test_a_value_that_is_not_a_policy_is_named(value: object) -> None:
    with pytest.raises(UsageError) as err:
        read_notebook_policy(nb_text({"dsh": {"ai_policy": value}}))
    assert "metadata.dsh.ai_policy" in err.value.message
    assert json.dumps(value).strip('"') in err.value.message
    assert "use full" in err.value.message and "off" in err.value.message


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '"notebook"'])
def test_text_that_is_not_a_notebook_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        read_notebook_policy(text)


def test_the_file_is_found_as_jupyter_server_names_it(tmp_path: Path) -> None:
    root = tmp_path / "server-root"
    folder = root / "course" / "week1"
    folder.mkdir(parents=True)
    nb = folder / "lesson.ipynb"
    nb.write_text(nb_text({}), encoding="utf-8")
    assert notebook_file(str(nb), tmp_path) == nb  # absolute, as the server sets it with a name
    # Relative to the server's root while the kernel's cwd is the notebook's folder.
    assert notebook_file("course/week1/lesson.ipynb", folder) == root / "course/week1/lesson.ipynb"
    assert notebook_file("elsewhere/lesson.ipynb", folder) == folder / "lesson.ipynb"
    assert notebook_file("course/week1/missing.ipynb", folder) is None
    assert notebook_file(str(folder / "missing.ipynb"), folder) is None


def test_the_file_is_read_again_only_when_it_changed(tmp_path: Path) -> None:
    nb = tmp_path / "lab.ipynb"
    nb.write_text(nb_text({"dsh": {"ai_policy": "explain"}}), encoding="utf-8")
    reader = NotebookPolicy(NotebookFile(str(nb), tmp_path))
    first = reader.read()
    assert first.policy == "explain"
    assert reader.read() is first  # same modification time and size: not read again

    nb.write_text(nb_text({"dsh": {"ai_policy": "off"}}), encoding="utf-8")
    assert reader.read().policy == "off"

    nb.write_text("{ half a notebook", encoding="utf-8")  # caught mid-save
    kept = reader.read()
    assert kept.policy == "off" and "kept what was read before" in kept.note

    nb.unlink()
    gone = reader.read()
    assert gone.policy is None and "was not found" in gone.note
    course = course_settings(ai_policy="explain", env={})
    assert "was not found" in PolicyGate(course, NotebookFile(str(nb), tmp_path)).in_force().text()
    assert NotebookPolicy(NotebookFile(None, tmp_path)).read().policy is None


# --- the policy in force --------------------------------------------------------------------------


def gate(tmp_path: Path, configured: str, notebook: object | None) -> PolicyGate:
    nb = tmp_path / "nb.ipynb"
    meta = {} if notebook is None else {"dsh": {"ai_policy": notebook}}
    nb.write_text(nb_text(meta), encoding="utf-8")
    course = course_settings(ai_policy=configured, env={})
    return PolicyGate(course, NotebookFile(str(nb), tmp_path))


@pytest.mark.parametrize(
    ("configured", "notebook", "policy", "from_notebook"),
    [
        ("", None, "full", False),
        ("", "explain", "explain", True),
        ("", "off", "off", True),
        ("explain", "full", "explain", False),
        ("explain", "explain", "explain", False),
        ("explain", "off", "off", True),
        ("off", "full", "off", False),
        ("off", "explain", "off", False),
    ],
)
def test_the_stricter_of_configuration_and_notebook_wins(
    tmp_path: Path, configured: str, notebook: str | None, policy: str, from_notebook: bool
) -> None:
    now = gate(tmp_path, configured, notebook).in_force()
    assert now.policy == policy
    assert (now.origin == NOTEBOOK_ORIGIN) is from_notebook
    assert now.text().startswith(policy)


def test_status_text_says_where_the_policy_came_from(tmp_path: Path) -> None:
    assert gate(tmp_path, "", None).in_force().text() == "full (the default)"
    assert (
        gate(tmp_path, "explain", "full").in_force().text()
        == "explain (c.DshKernel.ai_policy; the notebook asks for full; the stricter wins)"
    )
    assert (
        gate(tmp_path, "", "off").in_force().text()
        == "off (the notebook's metadata; configured: full)"
    )
    invalid = gate(tmp_path, "", "strict").in_force()
    assert invalid.policy == "off" and invalid.invalid is not None
    assert invalid.text().startswith("off — ") and "'strict'" in invalid.text()


def write(nb: Path, policy: str | None) -> None:
    nb.write_text(nb_text({} if policy is None else {"dsh": {"ai_policy": policy}}), "utf-8")


def test_the_policy_in_force_only_tightens_while_the_kernel_runs(tmp_path: Path) -> None:
    nb = tmp_path / "nb.ipynb"
    write(nb, "explain")
    policy = PolicyGate(course_settings(ai_policy="", env={}), NotebookFile(str(nb), tmp_path))
    assert policy.in_force().policy == "explain"
    write(nb, "off")
    assert policy.in_force().policy == "off"  # tighter: at once
    write(nb, "full")  # edited back: kept
    now = policy.in_force()
    assert now.policy == "off" and now.origin == NOTEBOOK_ORIGIN and now.notebook == "full"
    assert "kept: off was in force earlier" in now.text() and "restart the kernel" in now.text()
    nb.rename(tmp_path / "renamed.ipynb")  # renamed where the kernel is not told: kept
    gone = policy.in_force()
    assert gone.policy == "off" and "was not found" in gone.text() and "kept" in gone.text()


def test_a_value_that_is_not_a_policy_is_refused_while_there_and_not_kept(
    tmp_path: Path,
) -> None:
    nb = tmp_path / "nb.ipynb"
    write(nb, "strict")
    policy = PolicyGate(course_settings(ai_policy="", env={}), NotebookFile(str(nb), tmp_path))
    assert policy.in_force().invalid is not None
    write(nb, "explain")  # fixed
    assert policy.in_force().policy == "explain"
    write(nb, "stricter")
    assert policy.in_force().invalid is not None
    write(nb, "full")  # fixed, but explain was in force
    assert policy.in_force().policy == "explain"


def test_the_notebook_file_follows_what_the_frontend_names(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "course").mkdir(parents=True)
    nb = root / "course" / "lesson.ipynb"
    write(nb, "off")
    where = NotebookFile(str(nb), root / "course")
    where.named("course/lesson.ipynb", "course/lesson.ipynb")  # the hello: the same file
    assert where.name == str(nb) and where.find() == nb
    where.named("course/nowhere.ipynb", "course/lesson.ipynb")  # names no file: not followed
    assert where.name == str(nb)
    moved = root / "week1.ipynb"
    nb.rename(moved)
    where.named("week1.ipynb", "course/lesson.ipynb")  # joined to the root the hello implied
    assert where.find() == moved and where.name == str(moved)
    # without an absolute JPY_SESSION_NAME, the path is found from the working directory up
    relative = NotebookFile("course/lesson.ipynb", root / "course")
    relative.named("week1.ipynb", "course/lesson.ipynb")
    assert relative.find() == moved


# --- what a policy does to the host's agent -------------------------------------------------------


def host(
    tmp_path: Path,
    policy: str,
    monkeypatch: pytest.MonkeyPatch,
    notebook: Path | None = None,
    *,
    desk: NotebookDesk | None = None,
) -> AgentHost:
    if notebook is None:
        monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    else:
        monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    return AgentHost(
        HostSettings(
            provider="offline",
            store=str(tmp_path / "store"),
            course=CourseSettings(
                ai_policy=policy,  # type: ignore[arg-type]
                origin={"ai_policy": "DSH_AI_POLICY"},
                user="ana",  # who started the kernel (kernel.course: read once, at start)
            ),
        ),
        namespace={},
        keys=KeyStore(),
        desk=desk,
    )


def test_full_offers_every_tool_and_no_guide(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = host(tmp_path, "full", monkeypatch)
    assert "python" in h.agent.registry.names()
    assert EXPLAIN_GUIDE not in h.agent.system_prompt.render()
    assert h.agent.session.header.ai_policy == "full"


def test_explain_offers_read_only_tools_guides_and_denies_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    h = host(tmp_path, "explain", monkeypatch)
    agent = h.agent
    names = set(agent.registry.names())
    assert "python" not in names and {"inspect", "sql", "ask_user"} <= names
    assert all(d.read_only for d in agent.registry.definitions())
    assert EXPLAIN_GUIDE in agent.system_prompt.render()
    header = agent.session.header
    assert (header.ai_policy, header.user) == ("explain", "ana")
    call = ToolCall(call_id=CallId("c1"), name="python", arguments="{}")
    denial = agent.registry.check_guards(call, {})
    assert denial is not None and "explain" in denial
    read = ToolCall(call_id=CallId("c2"), name="inspect", arguments="{}")
    assert agent.registry.check_guards(read, {}) is None
    # %agent new builds another agent: the same policy, header and tools.
    again = h.new_session()
    assert again.session.header.ai_policy == "explain"
    assert "python" not in again.registry.names()


def notebook_host(
    tmp_path: Path, policy: str, monkeypatch: pytest.MonkeyPatch, *, saved: bool
) -> AgentHost:
    """A host with the kernel's notebook tools; ``saved``: a notebook file serves ``notebook_read``
    (no extension here), else nothing does and it is not offered."""
    nb = tmp_path / "nb.ipynb"
    nb.write_text(nb_text({}), encoding="utf-8")
    desk = NotebookDesk(
        NotebookComms(),
        namespace={},
        notebook_name=str(nb) if saved else None,
        python_cells=True,
        cwd=tmp_path,
    )
    return host(tmp_path, policy, monkeypatch, nb if saved else None, desk=desk)


def prompt_tools(h: AgentHost) -> set[str]:
    """The tool names the system prompt mentions (in backticks), of the tools the host can have."""
    text = h.agent.system_prompt.render()
    known = ("python", "inspect", "sql", "ask_user", "notebook_read", "notebook_insert")
    return {name for name in known if f"`{name}`" in text}


def test_the_notebook_section_names_exactly_the_notebook_tools_offered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    full = notebook_host(tmp_path, "full", monkeypatch, saved=True)
    assert {"python", "notebook_read", "notebook_insert"} <= set(full.agent.registry.names())
    assert prompt_tools(full) == {"python", "notebook_read", "notebook_insert"}
    # %agent tools off: a tool switched off is not described either
    full.toolset.command(full.agent, ["off", "python"])
    full.toolset.command(full.agent, ["off", "notebook_insert"])
    assert prompt_tools(full) == {"notebook_read"}

    explain = notebook_host(tmp_path, "explain", monkeypatch, saved=True)
    assert "notebook_read" in explain.agent.registry.names()
    assert "notebook_insert" not in explain.agent.registry.names()
    assert prompt_tools(explain) == {"notebook_read"}  # the one it has; none it lacks
    assert "add no cells to the notebook" in explain.agent.system_prompt.render()
    explain.toolset.command(explain.agent, ["off", "inspect"])
    assert "`inspect`" not in explain.agent.system_prompt.render()

    unserved = notebook_host(tmp_path, "explain", monkeypatch, saved=False)
    assert "notebook_read" not in unserved.agent.registry.names()  # nothing serves it
    assert prompt_tools(unserved) == set()


def test_off_offers_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = host(tmp_path, "off", monkeypatch)
    assert h.agent.registry.names() == ()
    assert h.agent.session.header.ai_policy == "off"


def test_a_tool_switched_back_on_stays_withheld_when_the_policy_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = tmp_path / "nb.ipynb"
    nb.write_text(nb_text({}), encoding="utf-8")
    h = host(tmp_path, "full", monkeypatch, notebook=nb)
    agent = h.agent
    h.toolset.command(agent, ["off", "python"])
    h.toolset.command(agent, ["off", "inspect"])
    nb.write_text(nb_text({"dsh": {"ai_policy": "explain"}}), encoding="utf-8")
    line = h.toolset.command(agent, ["on", "inspect"])  # read-only: offered again
    assert line is not None and "inspect" in agent.registry.names() and "withheld" not in line
    line = h.toolset.command(agent, ["on", "python"])
    assert line is not None and "python stays withheld by the AI policy" in line
    assert "python" not in agent.registry.names()


def test_a_session_with_no_turns_takes_a_new_policy_on_its_header(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nb = tmp_path / "nb.ipynb"
    nb.write_text(nb_text({}), encoding="utf-8")
    h = host(tmp_path, "full", monkeypatch, notebook=nb)
    sid = h.agent.session.id
    assert h.agent.session.header.ai_policy == "full"
    nb.write_text(nb_text({"dsh": {"ai_policy": "explain"}}), encoding="utf-8")
    assert before_chat(h) is None  # nothing of the session is stored yet: no fork, no line
    assert (h.agent.session.id, h.agent.session.header.ai_policy) == (sid, "explain")
    assert "python" not in h.agent.registry.names()
    assert EXPLAIN_GUIDE in h.agent.system_prompt.render()
    nb.write_text(nb_text({"dsh": {"ai_policy": "off"}}), encoding="utf-8")
    with pytest.raises(DshError) as err:
        before_chat(h)
    assert err.value.code == "AI_POLICY_OFF" and "the notebook's metadata" in err.value.message


# --- a fork's header ------------------------------------------------------------------------------


def test_a_fork_keeps_the_parents_user_and_policy_unless_given() -> None:
    parent = SessionHeader(id="p", created_at=1, user="ana", ai_policy="full")
    child = fork(parent, [], 0, cwd=os.getcwd())
    assert (child.header.user, child.header.ai_policy) == ("ana", "full")
    given = fork(parent, [], 0, user="bo", ai_policy="explain")
    assert (given.header.user, given.header.ai_policy) == ("bo", "explain")
    assert given.header.parent_session == "p"
