"""The store's side of images through a real ``dsh`` kernel (issue 15): the plot the model's code
draws is a row of the ``images`` view (``sent_to_model`` true on a route that takes images) with its
bytes in ``image_data``; ``%agent export --md`` writes it as a PNG beside the transcript; a fork
(``%agent fork``) keeps it, marked seeded."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from PIL import Image

from tests.kernel.conftest import provider_env
from tests.kernel.test_images import PLOT
from tests.support import scenarios as sc
from tests.support.kernel import Kernel, start_kernel
from tests.support.sse_server import SseServer


def sql_rows(k: Kernel, sql: str) -> list[list[object]]:
    """The rows of a ``%%sql`` cell, through the DataFrame it assigns (BLOBs as their sha256)."""
    ex = k.execute(f"%%sql rows <<\n{sql}")
    assert ex.status == "ok", ex.content
    out = k.python(
        "import hashlib as _h, json as _j\n"
        "print(_j.dumps([[_h.sha256(v).hexdigest() if isinstance(v, (bytes, bytearray)) else v"
        " for v in r] for r in rows.astype(object).values.tolist()], default=str))"
    )
    return json.loads(out)


def test_a_plot_is_in_the_images_view_the_export_and_a_fork(tmp_path: Path) -> None:
    with (
        SseServer() as server,
        start_kernel(
            tmp_path,
            "dsh",
            env=provider_env(
                server, tmp_path, DSH_MODEL="llava", DSH_VISION="on", DSH_APPROVAL="auto"
            ),
        ) as k,
    ):
        server.script(sc.python_call(PLOT), sc.text("The curve rises."))
        ex = k.execute("Plot the squares and tell me what looks wrong.", timeout=120)
        assert ex.status == "ok", ex.content
        sid = k.python("print(get_ipython().kernel.host.agent.session.id)").strip()
        [[call, source, width, height, size, sent, stored, hash_]] = sql_rows(
            k,
            "SELECT call_id, source, width, height, bytes, sent_to_model, stored, hash FROM images "
            f"WHERE session_id = '{sid}'",
        )
        assert source == "tool" and sent is True and stored is True and call
        # the bytes in image_data are the PNG the block describes
        [[digest, media_type]] = sql_rows(
            k, f"SELECT data, media_type FROM image_data WHERE hash = '{hash_}'"
        )
        assert digest == hash_ and media_type == "image/png"

        target = tmp_path / "plot.md"
        out = k.execute(f"%agent export --md {target}")
        assert out.status == "ok", out.content
        assert f"(its 1 image in {tmp_path / 'plot_files'})" in out.stdout, out.stdout
        [png] = list((tmp_path / "plot_files").iterdir())
        raw = png.read_bytes()
        assert hashlib.sha256(raw).hexdigest() == hash_ and len(raw) == size
        assert Image.open(io.BytesIO(raw)).size == (width, height)
        assert f"](plot_files/{png.name})" in target.read_text(encoding="utf-8")

        forked = k.execute("%agent fork 1")
        assert forked.status == "ok" and "forked session" in forked.stdout, forked.content
        server.script(sc.text("Still rising."))
        assert k.execute("Anything else?", timeout=60).status == "ok"
        child = k.python("print(get_ipython().kernel.host.agent.session.id)").strip()
        assert child != sid
        assert sql_rows(
            k, f"SELECT call_id, hash, seeded, stored FROM images WHERE session_id = '{child}'"
        ) == [[call, hash_, True, True]]
        assert sql_rows(k, "SELECT count(*) FROM image_data") == [[1]]
