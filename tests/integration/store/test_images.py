"""Images in the store (issue 15): the ``images`` and ``image_data`` views over a session recorded by a
real ``Agent``, the base64 kept out of ``events.data``, incremental and repeated ingest, damaged image
bytes, and a store from before images rebuilt with them."""

from __future__ import annotations

import json

from dsh_kernel.ids import new_session_id
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import ImageBlock
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.session.payloads import ImageData
from dsh_kernel.store.db import open_db
from dsh_kernel.store.ingest.incremental import ingest, ingest_into
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.testing import text_response

from .conftest import as_before_projection_versions, chat
from .image_session import (
    BLUE,
    GREEN,
    PHOTO,
    PLOTS,
    RED,
    USER_IMAGE,
    b64,
    image_block,
    record_image_session,
    sha,
    user_message,
)


def q(store: Store, sql: str, params: object = None) -> list[tuple[object, ...]]:
    ingest(store)
    with open_db(store, read_only=True) as con:
        return con.execute(sql, params).fetchall()


IMAGE_ROWS = (
    "SELECT turn, step, source, call_id, position, hash, media_type, width, height, bytes, "
    "description, reduction, sent_to_model, request, stored, seeded FROM images "
    "WHERE session_id = ? ORDER BY seq, position"
)


def expected_rows() -> list[tuple[object, ...]]:
    red, green, blue = PLOTS["red"], PLOTS["green"], PLOTS["blue"]
    u = USER_IMAGE
    return [
        # turn 1 went to a route that takes images: both were sent as images
        (1, 1, "user", None, 1, sha(PHOTO), "image/png", 5, 5, len(PHOTO), u.description, None,
         True, 1, True, False),
        (1, 1, "tool", "c-red", 1, sha(RED), "image/png", 4, 3, len(RED), red.description,
         "8x6 PNG → 4x3 PNG", True, 2, True, False),
        # turn 2's route takes none: the model got the descriptions
        (2, 1, "tool", "c-green", 1, sha(GREEN), "image/png", 2, 2, len(GREEN), green.description,
         None, False, 4, True, False),
        (2, 2, "tool", "c-blue", 1, sha(BLUE), "image/png", 3, 1, len(BLUE), blue.description,
         None, False, 5, True, False),
        # the last plot concluded its turn: no request followed it yet
        (3, 1, "tool", "c-last", 1, sha(RED), "image/png", 4, 3, len(RED), red.description,
         "8x6 PNG → 4x3 PNG", None, None, True, False),
    ]  # fmt: skip


async def test_the_images_view_has_a_row_per_image_and_says_whether_it_was_sent(
    store: Store,
) -> None:
    agent, writer = await record_image_session(store)
    sid = agent.session.id
    assert q(store, IMAGE_ROWS, [sid]) == expected_rows()
    # the bytes are stored once per hash: the red plot shown twice is one row
    assert q(store, "SELECT hash, media_type, bytes, data FROM image_data ORDER BY hash") == sorted(
        (sha(raw), "image/png", len(raw), raw) for raw in (RED, GREEN, BLUE, PHOTO)
    )
    assert q(
        store,
        "SELECT count(*) FROM images i JOIN image_data d USING (hash) WHERE d.bytes = i.bytes",
    ) == [(5,)]

    # a request after the last plot, to a route that takes images, sends it
    agent.provider.push(text_response("seen"))  # type: ignore[attr-defined]
    await chat(agent, "and now?")
    writer.flush()
    last = q(store, IMAGE_ROWS, [sid])[-1]
    assert (last[3], last[12], last[13]) == ("c-last", True, 7)
    writer.close()


async def test_events_keep_the_hash_and_never_the_base64(store: Store) -> None:
    agent, writer = await record_image_session(store)
    writer.close()
    assert q(store, "SELECT data FROM events WHERE type = 'image/data' ORDER BY seq") == [
        (json.dumps({"sha256": sha(raw), "mediaType": "image/png"}, separators=(",", ":")),)
        for raw in (PHOTO, RED, GREEN, BLUE)
    ]
    for raw in (PHOTO, RED, GREEN, BLUE):  # nowhere in the events table, whatever the event
        hits = q(
            store,
            "SELECT count(*) FROM t_events WHERE contains(CAST(data AS VARCHAR), ?)",
            [b64(raw)],
        )
        assert hits == [(0,)]
    # the journal is untouched: the bytes are still there, once each
    text = writer.path.read_text(encoding="utf-8")
    assert [text.count(b64(raw)) for raw in (PHOTO, RED, GREEN, BLUE)] == [1, 1, 1, 1]
    assert q(store, "SELECT count(*) FROM events") == [(len(agent.session),)]


async def test_ingesting_again_adds_nothing_and_a_reset_leaves_no_duplicate(store: Store) -> None:
    agent, writer = await record_image_session(store)
    writer.close()
    counts = "SELECT (SELECT count(*) FROM images), (SELECT count(*) FROM image_data), (SELECT count(*) FROM events)"
    before = q(store, counts)
    assert before == [(5, 4, len(agent.session))]
    assert ingest(store).status == "up-to-date"
    # a pass by another process (no memory of this one's) finds nothing new either
    with open_db(store, read_only=False) as con:
        assert ingest_into(con, store).events == 0
    assert q(store, counts) == before

    # the journal cut back to its first turn is ingested from scratch: its rows, once
    lines = writer.path.read_text(encoding="utf-8").splitlines(keepends=True)
    end1 = next(e.seq for e in agent.session.events if e.type == "turn/end")
    writer.path.write_text("".join(lines[: 2 + end1]), encoding="utf-8")
    assert q(store, "SELECT call_id, hash FROM images ORDER BY seq") == [
        (None, sha(PHOTO)),
        ("c-red", sha(RED)),
    ]
    # the bytes are content-addressed: a reset never deletes them (other sessions may hold them)
    assert q(store, "SELECT count(*) FROM image_data") == [(4,)]


def _session_with(store: Store, *images: tuple[ImageBlock, str], sid: str | None = None) -> Session:
    """A journaled session holding each image's ``image/data`` (with the given base64) and a user
    message showing them."""
    s = Session(header=SessionHeader(id=sid or new_session_id(), created_at=1_767_225_600_000))
    w = attach_journal(s, store)
    for block, data in images:
        s.append("image/data", ImageData(sha256=block.sha256, mediaType="image/png", data=data))
    msg = user_message("look", *(block for block, _ in images))
    s.append("user/message", message_to_json(msg), surface_op="append")
    w.close()
    return s


async def test_bytes_that_do_not_match_their_hash_are_not_stored(store: Store) -> None:
    forged = image_block(RED, 4, 3, "a forged plot")
    bad = image_block(BLUE, 3, 1, "not base64")
    s = _session_with(store, (forged, b64(GREEN)), (bad, "%%% not base64"))
    report = ingest(store)
    assert report.issues == () and report.events == len(s)
    assert q(
        store, "SELECT description, stored, sent_to_model FROM images ORDER BY seq, position"
    ) == [
        ("a forged plot", False, None),
        ("not base64", False, None),
    ]
    assert q(store, "SELECT count(*) FROM image_data") == [(0,)]
    assert q(
        store, "SELECT count(*) FROM events WHERE type = 'image/data' AND data ->> '$.data' IS NULL"
    ) == [(2,)]


async def test_a_forged_copy_in_the_same_batch_never_hides_the_true_bytes(store: Store) -> None:
    forged = image_block(RED, 4, 3, "a forged plot")
    # the batch reads the forged copies first (their sessions sort first), then the true one
    for n in range(2):
        _session_with(store, (forged, b64(GREEN)), sid=f"0000000{n}-0000-4000-8000-000000000000")
    _session_with(store, (forged, b64(RED)), sid="ffffffff-0000-4000-8000-000000000000")
    ingest(store)
    assert q(store, "SELECT hash, data FROM image_data") == [(sha(RED), RED)]
    assert q(store, "SELECT count(*), count(*) FILTER (WHERE stored) FROM images") == [(3, 3)]


async def test_a_store_from_before_images_is_rebuilt_with_them(store: Store) -> None:
    agent, writer = await record_image_session(store)
    writer.close()
    ingest(store)
    want = q(store, IMAGE_ROWS, [agent.session.id])
    # the database as a dsh-kernel without m0005 left it: no image tables, the base64 in events
    raw = {e.seq: e.data for e in agent.session.events if e.type == "image/data"}
    with open_db(store, read_only=False) as con:
        con.execute(
            "DROP VIEW images; DROP VIEW image_data; DROP TABLE t_images; DROP TABLE t_image_data"
        )
        as_before_projection_versions(con)
        for seq, data in raw.items():
            con.execute(
                "UPDATE t_events SET data = ? WHERE session_id = ? AND seq = ?",
                [json.dumps(data), agent.session.id, seq],
            )
    assert ingest(store).events == len(agent.session.events)
    assert q(store, IMAGE_ROWS, [agent.session.id]) == want == expected_rows()
    assert q(store, "SELECT count(*), sum(bytes) FROM image_data") == [
        (4, sum(len(r) for r in (RED, GREEN, BLUE, PHOTO)))
    ]
    assert q(
        store,
        "SELECT count(*) FROM events WHERE type = 'image/data' AND data ->> '$.data' IS NOT NULL",
    ) == [(0,)]


async def test_without_reported_usage_images_are_estimated_as_the_meter_does(store: Store) -> None:
    agent, writer = await record_image_session(store, reported=False)
    writer.close()
    history = q(
        store,
        "SELECT a.est_input_tokens FROM requests r JOIN t_attempts a "
        "USING (session_id, turn, step, attempt) WHERE r.estimated ORDER BY r.request",
    )
    sent = agent.provider.requests  # type: ignore[attr-defined]
    assert history == [(sum(message_tokens(m) for m in r.messages),) for r in sent]
    assert len(history) == 6
