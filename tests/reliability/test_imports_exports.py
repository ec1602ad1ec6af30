"""Imports, exports and what a person sees (issue 11: item 6 and the store/export/view part of item 9).

* An import never shadows a stored session, and refuses — as one ``StoreError`` line with a stable
  code naming ``file:line`` — every journal the store could not use: times out of range, wrong
  shapes, non-UTF-8 lines, absurd nesting, logs that break the invariants. Nothing reaches the store.
* ``%agent export`` never overwrites without ``--force`` and answers a bad path in one line; a
  session with images (imported, then resumed) exports them as files beside its transcript, and
  ``%%sql`` over the ``images`` view shows them.
* The saved rendering of a turn embeds a tool's image only as strict base64 of an allowed type.
* The approval card shows the whole code, however long, in a scrollable box.
* ``%agent resume`` of the kernel's own session, or of a journal nested too deeply, says so in one
  line.

Kernel rows run in one real kernel against the loopback model server; the import validator's rows
call ``import_journal`` on hostile files directly (the same function a notebook calls).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_kernel.errors import StoreError
from dsh_kernel.markup.safe_html import code_html, markdown_code
from dsh_kernel.store.importing import import_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.store.query.run import run_query
from dsh_kernel.transcript.model import ToolCardModel
from dsh_kernel.views.card_content import card_view
from tests.integration.store.image_session import BLUE, GREEN, PHOTO, RED, record_image_session
from tests.reliability.support import (
    chat,
    journal_of,
    launch,
    loopback_env,
    python_call,
    session_id,
    text_reply,
    tool_reply,
)
from tests.support.frontend import html_text, saved_bundle
from tests.support.kernel import Execution, Kernel
from tests.support.sse_server import SseServer

Rig = tuple[Kernel, SseServer, Path]

REPO = Path(__file__).resolve().parents[2]
CREATED = 1_764_500_000_000  # 2025-11-30
SID = "0b9e8a52-6c1d-4f3e-9a7b-2d5c8e1f4a60"


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("imports-exports")
    with SseServer() as srv, launch(tmp, env=loopback_env(srv)) as k:
        yield k, srv, tmp


def one_line(ex: Execution, prefix: str) -> str:
    """Exactly one line starting with ``prefix``, no traceback: a refusal (``"%agent …: "``) fails
    the cell with its code as ``ename`` and that line as ``evalue`` and traceback; anything else is
    a cell that succeeded and printed the line."""
    if prefix.startswith("%agent "):
        assert ex.status == "error", ex.content
        out = ex.content["evalue"]
        (error,) = ex.of_type("error")
        assert error["content"]["traceback"] == [f"{ex.content['ename']}: {out}"], error
    else:
        assert ex.status == "ok", ex.content
        assert not ex.of_type("error"), ex.of_type("error")
        out = ex.stdout.strip()
    assert out.startswith(prefix), out
    assert "\n" not in out and "Traceback" not in out, out
    return out


# --- journals -------------------------------------------------------------------------------------


def header(sid: str = SID, created: int = CREATED, **extra: Any) -> str:
    return json.dumps(
        {"type": "session", "version": 0, "id": sid, "createdAt": created, **extra},
        separators=(",", ":"),
    )


def event(seq: int, etype: str, data: object, *, time: int = CREATED + 1, **extra: Any) -> str:
    return json.dumps(
        {"type": etype, "seq": seq, "time": time, "data": data, **extra}, separators=(",", ":")
    )


def title(seq: int = 0, text: str = "a lesson") -> str:
    return event(seq, "session/title", {"title": text, "source": {"kind": "user"}})


def nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def user_message(seq: int, content: object, **extra: Any) -> str:
    data = {"id": "m1", "role": "user", "content": content, "source": {"kind": "user"}}
    return event(seq, "user/message", data, **extra)


# (id, the journal's bytes, the code, the line named)
HOSTILE: list[tuple[str, Callable[[], bytes], str, int]] = [
    (
        "time-2^64",
        lambda: f"{header()}\n{event(0, 'turn/start', {'turn': 1}, time=2**64)}\n".encode(),
        "JOURNAL_OUT_OF_RANGE",
        2,
    ),
    (
        "time-2^62-breaks-every-events-query",
        lambda: f"{header()}\n{event(0, 'turn/start', {'turn': 1}, time=2**62)}\n".encode(),
        "JOURNAL_OUT_OF_RANGE",
        2,
    ),
    (
        "createdAt-2^64",
        lambda: f"{header(created=2**64)}\n{title()}\n".encode(),
        "JOURNAL_OUT_OF_RANGE",
        1,
    ),
    (
        "seedLength-2^40-hides-every-session",
        lambda: f"{header(seedLength=2**40)}\n{title()}\n".encode(),
        "JOURNAL_OUT_OF_RANGE",
        1,
    ),
    (
        "a-line-that-is-a-list",
        lambda: f"{header()}\n{title()}\n[1, 2, 3]\n".encode(),
        "JOURNAL_BAD_SHAPE",
        3,
    ),
    ("a-header-that-is-a-list", lambda: b'["session", 0]\n', "JOURNAL_BAD_SHAPE", 1),
    (
        "nesting-100k-levels",
        lambda: (
            f'{header()}\n{title()}\n{{"type":"x/y","seq":1,"time":1,"data":{{"v":{nested(100_000)}}}}}\n'.encode()
        ),
        "JOURNAL_TOO_DEEP",
        3,
    ),
    (
        "nesting-300-levels",
        lambda: (
            f"{header()}\n{event(0, 'session/title', {'title': 't', 'source': {'kind': json.loads(nested(300))}})}\n".encode()
        ),
        "JOURNAL_TOO_DEEP",
        2,
    ),
    (
        "invalid-utf8",
        lambda: (
            f"{header()}\n{title()}\n".encode()
            + b'{"type":"x","seq":1,"time":1,"data":{"v":"\xff\xfe"}}\n'
        ),
        "JOURNAL_NOT_UTF8",
        3,
    ),
    (
        "message-content-not-a-list",
        lambda: f"{header()}\n{user_message(0, 'hello', surfaceOp='append')}\n".encode(),
        "JOURNAL_BAD_SHAPE",
        2,
    ),
    (
        "surface-event-without-surfaceOp",
        lambda: f"{header()}\n{user_message(0, [{'type': 'text', 'text': 'hi'}])}\n".encode(),
        "JOURNAL_BAD_SHAPE",
        2,
    ),
    (
        "turn-not-a-number",
        lambda: f"{header()}\n{event(0, 'turn/start', {'turn': 'one'})}\n".encode(),
        "JOURNAL_BAD_SHAPE",
        2,
    ),
    (
        "integer-beyond-2^53",
        lambda: f"{header()}\n{event(0, 'x/y', {'n': 2**60}, ignorable=True)}\n".encode(),
        "JOURNAL_BAD_SHAPE",
        2,
    ),
    (
        "ignorable-not-a-boolean",
        lambda: f"{header()}\n{event(0, 'x/y', {}, ignorable='yes')}\n".encode(),
        "JOURNAL_BAD_SHAPE",
        2,
    ),
    (
        "a-result-without-its-call",
        lambda: (
            "\n".join(
                [
                    header(),
                    event(0, "turn/start", {"turn": 1}),
                    event(1, "step/start", {"turn": 1, "step": 1}),
                    event(
                        2,
                        "tool/result",
                        {
                            "turn": 1,
                            "step": 1,
                            "message": {
                                "id": "r1",
                                "role": "user",
                                "content": [
                                    {"type": "tool-result", "toolCallId": "ghost", "content": []}
                                ],
                                "source": {"kind": "tool", "callId": "ghost"},
                            },
                        },
                        surfaceOp="append",
                    ),
                ]
            ).encode()
            + b"\n"
        ),
        "JOURNAL_INVALID",
        4,
    ),
]


@pytest.mark.parametrize(("name", "make", "code", "line"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_journal_is_refused_in_one_line_naming_file_and_line(
    tmp_path: Path, name: str, make: Callable[[], bytes], code: str, line: int
) -> None:
    store = Store.at(tmp_path / "store")
    good = tmp_path / "good.jsonl"
    good.write_text(f"{header(sid='good-one')}\n{title()}\n", encoding="utf-8")
    assert import_journal(good, store) == "good-one"
    hostile = tmp_path / f"{name}.jsonl"
    hostile.write_bytes(make())
    with pytest.raises(StoreError) as err:
        import_journal(hostile, store)
    message = err.value.message
    assert err.value.code == code, message
    assert message.startswith(f"{hostile}:{line}: "), message
    assert "\n" not in message and len(message) < 400, message
    assert [p.stem for p in store.iter_journals()] == ["good-one"], "something reached the store"
    # the store still answers, with the good session in it
    assert run_query(store, "SELECT session_id FROM sessions").rows == (("good-one",),)
    assert len(run_query(store, "SELECT time FROM events").rows) == 1


def test_an_import_never_shadows_a_stored_session_and_a_same_file_is_a_no_op(
    tmp_path: Path,
) -> None:
    store = Store.at(tmp_path / "store")
    original = tmp_path / "original.jsonl"
    original.write_text(f"{header()}\n{title(text='the real one')}\n", encoding="utf-8")
    assert import_journal(original, store) == SID
    stored = store.find_journal(SID)
    before = stored.stat()
    assert import_journal(original, store) == SID  # byte-identical: nothing to do
    assert stored.stat().st_mtime_ns == before.st_mtime_ns and stored.stat().st_ino == before.st_ino

    a_year_earlier = CREATED - 365 * 86_400_000
    imposter = tmp_path / "imposter.jsonl"
    imposter.write_text(
        f"{header(created=a_year_earlier)}\n{title(text='IMPOSTER')}\n", encoding="utf-8"
    )
    with pytest.raises(StoreError) as err:
        import_journal(imposter, store)
    assert err.value.code == "SESSION_EXISTS"
    assert str(imposter) in err.value.message and str(stored) in err.value.message
    assert list(store.iter_journals()) == [stored]
    assert "IMPOSTER" not in stored.read_text(encoding="utf-8")


def test_the_shipped_journals_pass_the_gate(tmp_path: Path) -> None:
    store = Store.at(tmp_path / "store")
    for path in sorted((REPO / "notebooks" / "data").glob("*.jsonl")):
        sid = import_journal(path, store)
        assert store.find_journal(sid).read_bytes() == path.read_bytes()
        assert import_journal(path, store) == sid


# --- through the kernel --------------------------------------------------------------------------


def test_an_import_in_a_kernel_cannot_make_resume_load_an_imposter(rig: Rig) -> None:
    k, srv, tmp = rig
    srv.script(text_reply("the real answer"))
    assert chat(k, "the real question").status == "ok"
    sid = session_id(k)
    real = journal_of(k)
    assert "new session" in k.execute("%agent new").stdout
    head = json.loads(real.read_text(encoding="utf-8").splitlines()[0])
    imposter = tmp / "imposter.jsonl"
    imposter.write_text(
        header(sid=sid, created=head["createdAt"] - 365 * 86_400_000)
        + "\n"
        + title(text="IMPOSTER")
        + "\n",
        encoding="utf-8",
    )
    out = k.python(
        "from dsh_kernel.store.importing import import_journal\n"
        "try:\n"
        f"    print('imported', import_journal({str(imposter)!r}))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc.code)\n"
    )
    assert out.strip() == "StoreError SESSION_EXISTS", out
    assert sorted((tmp / "store" / "journals").glob(f"*/{sid}.jsonl")) == [real]
    resumed = k.execute(f"%agent resume {sid}").stdout
    assert f"resumed session {sid}: 1 turns" in resumed, resumed
    assert "IMPOSTER" not in json.dumps(k.events())


def test_resume_of_the_current_session_says_it_is_this_kernels(rig: Rig) -> None:
    k, srv, _ = rig
    srv.script(text_reply("an answer"))
    assert chat(k, "a question").status == "ok"
    sid = session_id(k)
    out = one_line(k.execute(f"%agent resume {sid}"), "session ")
    assert "this kernel's current session" in out and "another process" not in out, out
    assert session_id(k) == sid


def test_resume_starts_from_the_kernels_policy_not_the_logged_one(rig: Rig) -> None:
    """What ``dsh_kernel.tools.approval`` documents: ``approval/policy`` is a record, never restored
    (a guard: this was already so; only the docstring said otherwise)."""
    k, srv, _ = rig
    assert "approval: auto" in k.execute("%agent approve auto").stdout
    srv.script(text_reply("under auto"))
    assert chat(k, "a turn under auto").status == "ok"
    sid = session_id(k)
    assert "new session" in k.execute("%agent new").stdout
    assert f"resumed session {sid}" in k.execute(f"%agent resume {sid}").stdout
    assert "approval: ask for tools that change things" in k.execute("%agent status").stdout
    logged = [e["data"]["policy"] for e in k.events() if e["type"] == "approval/policy"]
    assert logged and logged[-1]["default"] == "auto"


def test_resume_of_a_journal_nested_too_deeply_is_one_line(rig: Rig) -> None:
    k, _, tmp = rig
    sid = "deep-0000"
    day = tmp / "store" / "journals" / "2025-11-30"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"{sid}.jsonl"
    path.write_text(
        f'{header(sid=sid)}\n{{"type":"x/y","seq":0,"time":1,"data":{{"v":{nested(100_000)}}}}}\n',
        encoding="utf-8",
    )
    out = one_line(k.execute(f"%agent resume {sid}"), "%agent resume: ")
    assert f"{path}:2: nested too deeply" in out, out


def unwritable_dir(tmp: Path) -> Path:
    """A directory this process cannot create files in (root ignores modes: /sys refuses it)."""
    if os.geteuid() != 0:
        d = tmp / "read-only"
        d.mkdir(exist_ok=True)
        d.chmod(0o555)
        return d
    probe = Path("/sys") / "dsh-probe"
    try:
        probe.open("x").close()
    except PermissionError:
        return Path("/sys")
    except OSError:
        pass
    else:
        probe.unlink()
    pytest.skip("no directory refuses writes to root here")


def test_export_md_never_overwrites_and_answers_bad_paths_in_one_line(rig: Rig) -> None:
    k, srv, tmp = rig
    srv.script(text_reply("something to export"))
    assert chat(k, "export me").status == "ok"
    target = tmp / "transcript.md"
    one_line(k.execute(f"%agent export --md {target}"), "wrote this session's transcript")
    target.write_text("MY OWN NOTES", encoding="utf-8")
    out = one_line(k.execute(f"%agent export --md {target}"), "%agent export: ")
    assert "already exists" in out and "--force" in out, out
    assert target.read_text(encoding="utf-8") == "MY OWN NOTES"
    one_line(k.execute(f"%agent export --md --force {target}"), "wrote this session's transcript")
    assert "something to export" in target.read_text(encoding="utf-8")

    out = one_line(k.execute(f"%agent export --md {tmp}"), "%agent export: ")
    assert f"{tmp} is a directory" in out, out
    missing = tmp / "no" / "such" / "folder" / "t.md"
    out = one_line(k.execute(f"%agent export --md {missing}"), "%agent export: ")
    assert f"the folder {missing.parent} does not exist" in out, out
    assert not (tmp / "no").exists()
    locked = unwritable_dir(tmp) / "t.md"
    out = one_line(k.execute(f"%agent export --md {locked}"), "%agent export: ")
    assert f"no permission to write {locked}" in out, out


def test_export_parquet_never_overwrites_and_answers_bad_paths_in_one_line(rig: Rig) -> None:
    k, srv, tmp = rig
    srv.script(text_reply("rows to export"))
    assert chat(k, "export the store").status == "ok"
    out_dir = tmp / "parquet-export"
    one_line(k.execute(f"%agent export --parquet {out_dir}"), "exported every session")
    stray = out_dir / "events" / "my-own-file.txt"
    stray.write_text("mine", encoding="utf-8")
    out = one_line(k.execute(f"%agent export --parquet {out_dir}"), "%agent export: ")
    assert "already holds an export" in out and "--force" in out, out
    assert stray.exists()
    one_line(k.execute(f"%agent export --parquet --force {out_dir}"), "exported every session")
    assert not stray.exists() and any((out_dir / "events").rglob("*.parquet"))

    a_file = tmp / "a-file.txt"
    a_file.write_text("x", encoding="utf-8")
    out = one_line(k.execute(f"%agent export --parquet {a_file}"), "%agent export: ")
    assert f"{a_file} is a file" in out, out
    missing = tmp / "nowhere" / "export"
    out = one_line(k.execute(f"%agent export --parquet {missing}"), "%agent export: ")
    assert "does not exist" in out, out


async def test_a_resumed_session_with_images_exports_them_beside_its_transcript(rig: Rig) -> None:
    k, _, tmp = rig
    elsewhere = Store.at(tmp / "elsewhere")
    recorded, writer = await record_image_session(elsewhere)
    writer.close()
    sid = recorded.session.id
    out = k.python(
        "from dsh_kernel.store.importing import import_journal\n"
        f"print(import_journal({str(writer.path)!r}))"
    )
    assert out.strip() == sid
    assert f"resumed session {sid}: 3 turns" in k.execute(f"%agent resume {sid}").stdout
    counts = k.execute(
        "%%sql rows <<\nSELECT count(*), count(*) FILTER (WHERE sent_to_model), count(DISTINCT hash), "
        f"count(*) FILTER (WHERE stored) FROM images WHERE session_id = '{sid}'"
    )
    assert counts.status == "ok", counts.content
    assert k.python("print(*rows.iloc[0])").split() == ["5", "2", "4", "5"]
    target = tmp / "with images.md"
    line = one_line(k.execute(f'%agent export --md "{target}"'), "wrote this session's transcript")
    folder = tmp / "with images_files"
    assert line == f"wrote this session's transcript to {target} (its 4 images in {folder})"
    assert sorted(p.read_bytes() for p in folder.iterdir()) == sorted((RED, GREEN, BLUE, PHOTO))
    assert target.read_text(encoding="utf-8").count("](with%20images_files/") == 5
    out = one_line(k.execute(f'%agent export --md "{target}"'), "%agent export: ")
    assert "already exists" in out and "--force" in out, out


CRAFTED_IMAGE = (
    "from IPython.display import display\n"
    "q = chr(34)\n"
    "data = 'iVBORw0KGgo' + q + ' onerror=' + q + 'alert(1)'\n"
    "mime = 'image/png' + q + ' onerror=' + q + 'alert(2)'\n"
    "display({'image/png': data, mime: 'x', 'text/plain': 'crafted'}, raw=True)\n"
)


def test_a_saved_turn_never_puts_tool_image_data_into_a_tag_unescaped(rig: Rig) -> None:
    k, srv, _ = rig
    assert "approval: auto" in k.execute("%agent approve auto").stdout
    try:
        srv.script(tool_reply(python_call(CRAFTED_IMAGE, "c-img")), text_reply("shown"))
        ex = chat(k, "show the crafted image")
        assert ex.status == "ok", ex.content
    finally:
        k.execute("%agent approve ask")
    bundle = saved_bundle(ex)
    for mime in ("text/markdown", "text/html"):
        saved = bundle[mime]
        assert "not valid base64, not embedded" in saved, saved  # the output is named…
        for attack in ('onerror="alert(1)', 'onerror="alert(2)'):  # …never made markup
            assert attack not in saved, (mime, saved)
        assert not re.search(r"<img[^>]*onerror", saved), (mime, saved)


def long_code(chars: int) -> str:
    lines: list[str] = []
    i = 0
    while sum(len(x) + 1 for x in lines) < chars:
        lines.append(f"value_{i:05d} = {i} * 2  # step {i} of a long generated cell")
        i += 1
    lines.append("print('the last line of the long cell')")
    return "\n".join(lines)


def test_the_approval_card_shows_all_of_50000_characters_of_code(rig: Rig) -> None:
    k, srv, _ = rig
    code = long_code(50_000)
    assert len(code) >= 50_000
    srv.script(tool_reply(python_call(code, "c-long")), text_reply("not run, then"))
    ex = chat(k, "run the long cell")
    assert ex.status == "ok", ex.content
    opens = {
        m["content"]["comm_id"]: m["content"]["data"]["state"] for m in ex.of_type("comm_open")
    }
    states = list(opens.items()) + [
        (m["content"]["comm_id"], m["content"]["data"].get("state", {}))
        for m in ex.of_type("comm_msg")
    ]
    last: dict[str, dict[str, Any]] = {}  # each widget as it was left (a streaming state passes)
    for cid, state in states:
        if isinstance(state.get("value"), str):
            last[cid] = state
    shown = [
        (cid, html_text(state["value"]))
        for cid, state in last.items()
        if isinstance(state.get("value"), str)
        and "<pre" in state["value"]
        and "value_00000" in state["value"]
    ]
    assert shown, "the card never showed the code"
    for _, text in shown:
        assert code in text, f"the card showed {len(text):,} characters of {len(code):,}"
        assert "more characters not shown" not in text
    # the box scrolls instead of growing: the Details box holding it caps the height, overflow auto
    boxes = [
        state for state in opens.values() if f"IPY_MODEL_{shown[0][0]}" in state.get("children", [])
    ]
    assert boxes, "the code is not in a box"
    layout = opens[boxes[0]["layout"].removeprefix("IPY_MODEL_")]
    assert layout["overflow"] == "auto" and layout["max_height"], layout
    asked = [e for e in k.events() if e["type"] == "approval/asked"]
    assert asked and asked[-1]["data"]["toolName"] == "python"


def test_card_view_never_cuts_arguments_but_still_cuts_results() -> None:
    code = long_code(50_000)
    card = ToolCardModel(
        call_id="c1",
        name="python",
        arguments=json.dumps({"code": code}),
        status="done",
        step=1,
        result_text="r" * 50_000,
    )
    view = card_view(card)
    assert [s.text for s in view.args] == [code]
    assert len(view.result[0].text) < 25_000 and "more characters not shown" in view.result[0].text


def test_a_code_language_from_a_tool_cannot_break_out_of_the_code_block() -> None:
    hostile = 'py"><img src=x onerror=alert(3)>'
    shown = code_html("print(1)", hostile)
    assert "<img" not in shown and "onerror" not in shown
    assert 'class="language-python"' in code_html("print(1)", "python")
    assert markdown_code("<img src=x onerror=alert(3)>") == (
        "<pre><code>&lt;img src=x onerror=alert(3)&gt;</code></pre>"
    )
