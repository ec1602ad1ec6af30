"""Images travel with a session (issue 15, "Decided"): the Markdown export links them as files
beside the transcript, the Parquet export carries them by reference, and ``import_journal``, a fork,
a resume and a replay keep the bytes, so the ``images`` view shows them wherever the session goes."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from markdown_it import MarkdownIt

from dsh_kernel.errors import UsageError
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.types import ImageBlock
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.log_images import image_blocks, record_images
from dsh_kernel.store.db import open_db
from dsh_kernel.store.importing import import_journal
from dsh_kernel.store.ingest.incremental import ingest
from dsh_kernel.store.journal import read_session
from dsh_kernel.store.layout import Store
from dsh_kernel.store.replay import ReplayProvider
from dsh_kernel.store.sessions import (
    export_markdown,
    export_parquet,
    fork,
    resume,
    write_markdown,
)
from dsh_kernel.testing import text_response
from dsh_kernel.transcript.markdown import image_file_name, markdown_transcript

from .conftest import TOOLS, chat, make_agent, record_rich_session, usage
from .image_session import (
    BLUE,
    GREEN,
    PHOTO,
    PLOTS,
    PROMPT_1,
    PROMPT_2,
    PROMPT_3,
    RED,
    USER_IMAGE,
    Vision,
    b64,
    image_block,
    plot_tool,
    record_image_session,
    sha,
    user_message,
)

ALL = (PHOTO, RED, GREEN, BLUE)


def q(store: Store, sql: str, params: object = None) -> list[tuple[object, ...]]:
    ingest(store)
    with open_db(store, read_only=True) as con:
        return con.execute(sql, params).fetchall()


def view_rows(store: Store, sid: str) -> list[tuple[object, ...]]:
    return q(
        store,
        "SELECT turn, call_id, hash, width, height, bytes, description, stored FROM images "
        "WHERE session_id = ? ORDER BY seq, position",
        [sid],
    )


def name(raw: bytes) -> str:
    return image_file_name(sha(raw), "image/png")


# --- Markdown ----------------------------------------------------------------------------------------


async def test_markdown_export_links_the_images_written_beside_it(
    store: Store, tmp_path: Path
) -> None:
    agent, writer = await record_image_session(store)
    writer.close()
    events, header = list(agent.session.events), agent.session.header
    done = write_markdown(tmp_path / "my notes.md", events, header)
    folder = tmp_path / "my notes_files"
    assert (done.path, done.images_dir, done.images) == (tmp_path / "my notes.md", folder, 4)
    assert done.describe() == f"{done.path} (its 4 images in {folder})"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == {name(r): r for r in ALL}
    md = done.path.read_text(encoding="utf-8")
    links = re.findall(r"!\[([^\]]*)\]\(([^)]*)\)", md)
    assert links == [
        (USER_IMAGE.description, f"my%20notes_files/{name(PHOTO)}"),
        (r"Figure: 1 axes; title 'loss'; 1 line", f"my%20notes_files/{name(RED)}"),
        (PLOTS["green"].description, f"my%20notes_files/{name(GREEN)}"),
        (PLOTS["blue"].description, f"my%20notes_files/{name(BLUE)}"),
        (PLOTS["red"].description, f"my%20notes_files/{name(RED)}"),
    ]
    # each image sits under what carried it: the prompt, and the result of its call
    prompt_at, photo_at = md.index(PROMPT_1), md.index(name(PHOTO))
    result_at = md.index("drew red")
    assert prompt_at < photo_at < result_at < md.index(name(RED)) < md.index("drew green")
    assert "*4×3 PNG, 73 bytes; reduced: 8x6 PNG → 4x3 PNG*" in md
    assert b64(RED) not in md  # files, never data URLs

    # exports never overwrite without --force; nothing is written when the transcript is refused
    (folder / name(RED)).unlink()
    with pytest.raises(UsageError) as err:
        write_markdown(done.path, events, header)
    assert err.value.code == "EXPORT_EXISTS" and not (folder / name(RED)).exists()
    again = write_markdown(done.path, events, header, force=True)
    assert again.images == 4 and (folder / name(RED)).read_bytes() == RED


async def test_markdown_export_refuses_a_clashing_image_file_and_a_folder_that_is_a_file(
    store: Store, tmp_path: Path
) -> None:
    agent, writer = await record_image_session(store)
    writer.close()
    events = list(agent.session.events)
    folder = tmp_path / "s_files"
    folder.mkdir()
    (folder / name(GREEN)).write_bytes(b"someone else's file")
    with pytest.raises(UsageError) as err:
        write_markdown(tmp_path / "s.md", events)
    assert err.value.code == "EXPORT_EXISTS" and name(GREEN) in err.value.message
    assert not (tmp_path / "s.md").exists()
    assert write_markdown(tmp_path / "s.md", events, force=True).images == 4
    assert (folder / name(GREEN)).read_bytes() == GREEN

    (tmp_path / "t_files").write_text("a file", encoding="utf-8")
    with pytest.raises(UsageError) as err:
        write_markdown(tmp_path / "t.md", events)
    assert err.value.code == "EXPORT_BAD_PATH" and "t_files" in err.value.message


async def test_markdown_without_image_files_writes_the_descriptions(
    store: Store, tmp_path: Path
) -> None:
    agent, writer = await record_image_session(store)
    writer.close()
    events = list(agent.session.events)
    md = export_markdown(events, agent.session.header)
    assert "![" not in md
    assert "*Image (3×1 PNG, 70 bytes):* Figure: a blue strip" in md
    # a log without the bytes of an image (a journal edited by hand) still gets its description
    no_bytes = [e for e in events if not (e.type == "image/data" and e.data["sha256"] == sha(BLUE))]
    done = write_markdown(tmp_path / "partial.md", no_bytes)
    text = done.path.read_text(encoding="utf-8")
    assert done.images == 3 and "*Image (3×1 PNG, 70 bytes):* Figure: a blue strip" in text
    # a session without images writes no folder
    rich, w = await record_rich_session(store)
    w.close()
    plain = write_markdown(tmp_path / "plain.md", list(rich.session.events))
    assert plain.images_dir is None and not (tmp_path / "plain_files").exists()


def test_hostile_descriptions_are_text_not_markup() -> None:
    s = Session(header=SessionHeader(id="s-hostile", created_at=1_767_225_600_000))
    evil = image_block(RED, 4, 3, "](javascript:alert(1)) <img src=x onerror=alert(1)> **bold**")
    record_images(s, (evil,))
    s.append("user/message", message_to_json(user_message("see", evil)), surface_op="append")
    md = markdown_transcript(list(s.events), image_dir="x_files").text
    # rendered by a CommonMark parser with raw HTML on, the description stays text
    html = MarkdownIt("commonmark").render(md)
    [img] = re.findall(r"<img [^>]*>", html)
    assert img == (
        f'<img src="x_files/{name(RED)}" alt="](javascript:alert(1)) &lt;img src=x '
        'onerror=alert(1)&gt; **bold**" />'
    )
    assert html.count("<strong>") == 1 and "<a " not in html  # only our "User:"
    # written as its description (no files), the same text is as inert
    html = MarkdownIt("commonmark").render(markdown_transcript(list(s.events)).text)
    assert "<img" not in html and html.count("<strong>") == 1 and "<a " not in html
    assert "](javascript:alert(1)) &lt;img src=x onerror=alert(1)&gt; **bold**" in html


# --- Parquet -----------------------------------------------------------------------------------------


async def test_parquet_export_carries_the_images_by_reference(store: Store, tmp_path: Path) -> None:
    agent, writer = await record_image_session(store)
    writer.close()
    out = export_parquet(store, tmp_path / "export")
    con = duckdb.connect()
    images = f"'{out}/images.parquet'"
    data = f"'{out}/image_data.parquet'"
    rows = con.execute(
        f"SELECT i.call_id, i.hash, i.sent_to_model, d.data FROM {images} i "
        f"JOIN {data} d USING (hash) ORDER BY i.seq"
    ).fetchall()
    assert rows == [
        (None, sha(PHOTO), True, PHOTO),
        ("c-red", sha(RED), True, RED),
        ("c-green", sha(GREEN), False, GREEN),
        ("c-blue", sha(BLUE), False, BLUE),
        ("c-last", sha(RED), None, RED),
    ]
    assert con.execute(f"SELECT count(*) FROM {data}").fetchone() == (4,)  # once per hash
    # the events refer to the bytes by hash only
    events = f"read_parquet('{out}/events/**/*.parquet', hive_partitioning = true)"
    assert con.execute(
        f"SELECT count(*), count(data ->> '$.data') FROM {events} WHERE type = 'image/data'"
    ).fetchone() == (4, 0)
    assert con.execute(f"SELECT count(*) FROM {events}").fetchone() == (len(agent.session),)
    # an earlier export is replaced only with force
    with pytest.raises(UsageError):
        export_parquet(store, out)
    assert export_parquet(store, out, force=True) == out


# --- import, fork, resume, replay ----------------------------------------------------------------------


async def test_an_imported_journal_keeps_its_images(tmp_path: Path) -> None:
    source = Store.at(tmp_path / "a")
    _, writer = await record_image_session(source)
    writer.close()
    shipped = tmp_path / "shipped.jsonl"
    shipped.write_bytes(writer.path.read_bytes())
    target = Store.at(tmp_path / "b")
    sid = import_journal(shipped, target)
    assert view_rows(target, sid) == view_rows(source, sid) and len(view_rows(target, sid)) == 5
    want = sorted((sha(raw), raw) for raw in ALL)
    assert q(target, "SELECT hash, data FROM image_data ORDER BY hash") == want
    # resumed from the imported journal, the session knows every image's bytes
    resumed = resume(target, sid)
    assert [resumed.image_data(sha(raw)) for raw in ALL] == [b64(raw) for raw in ALL]


async def test_a_fork_keeps_the_images_of_its_seed(store: Store) -> None:
    parent, writer = await record_image_session(store)
    writer.close()
    child = fork(parent.session.header, list(parent.session.events), 1)
    assert child.image_data(sha(RED)) == b64(RED) and child.image_data(sha(GREEN)) is None
    agent, provider, w = make_agent(
        store, [text_response("the fork sees the red plot", usage=usage())], session=child
    )
    agent.hooks.request.on(Vision(on=True))
    await chat(agent, "what did the plot show?")
    w.close()
    provider.assert_consumed()
    sent = [b for m in provider.requests[0].messages for b in image_blocks(m.content)]
    assert [(b.sha256, b.data) for b in sent] == [(sha(PHOTO), b64(PHOTO)), (sha(RED), b64(RED))]
    # the child's journal holds the bytes (the seed was copied), and the store shows its images
    text = read_session(store.journal_path(child.header)).events
    assert sum(1 for e in text if e.type == "image/data") == 2
    assert q(
        store,
        "SELECT call_id, hash, seeded, stored FROM images WHERE session_id = ? ORDER BY seq",
        [child.id],
    ) == [(None, sha(PHOTO), True, True), ("c-red", sha(RED), True, True)]
    assert q(store, "SELECT count(*) FROM image_data") == [(4,)]  # the copy added no bytes


async def test_a_replay_of_an_imported_session_records_the_images_again(tmp_path: Path) -> None:
    source = Store.at(tmp_path / "a")
    recorded, writer = await record_image_session(source)
    writer.close()
    target = Store.at(tmp_path / "b")
    sid = import_journal(writer.path, target)

    replay = ReplayProvider.from_store(target, sid)
    again, _, again_writer = make_agent(target, [], tools=(*TOOLS, plot_tool))
    again.set_route(provider=replay, model="m1")
    vision = Vision()
    again.hooks.request.on(vision)
    again.followup(user_message(PROMPT_1, USER_IMAGE))
    await again.when_idle()
    vision.on = False
    await chat(again, PROMPT_2)
    vision.on = True
    await chat(again, PROMPT_3)
    again_writer.close()
    replay.assert_consumed()
    # the replayed request carried the image bytes, and the new session's log holds them
    first = replay.requests[0]
    [photo] = [b for m in first.messages for b in image_blocks(m.content)]
    assert isinstance(photo, ImageBlock) and photo.data == b64(PHOTO)
    assert view_rows(target, again.session.id) == view_rows(target, recorded.session.id)
    assert q(
        target,
        "SELECT sent_to_model FROM images WHERE session_id = ? ORDER BY seq",
        [again.session.id],
    ) == [(True,), (True,), (False,), (False,), (None,)]
