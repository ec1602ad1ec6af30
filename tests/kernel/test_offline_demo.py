"""The offline demo model, in a real kernel with no key: what it says is true for the approval mode
in force, and it is free — in ``%agent cost``, the footer and SQL's ``usage.cost``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.frontend import markdown_body, markdown_footer
from tests.support.kernel import start_kernel


def test_the_demo_says_what_auto_approval_does_and_costs_nothing(tmp_path: Path) -> None:
    with start_kernel(tmp_path, "dsh") as k:
        assert k.execute("%agent approve auto").status == "ok"
        k.python("sales = [3, 1, 2]")
        ex = k.execute("What is in sales?")
        assert ex.status == "ok", ex.content
        final = ex.data("text/markdown")[-1]
        body = markdown_body(final)
        assert "approval is set to auto, so it runs without asking" in body, body
        assert "asks for your approval" not in body
        assert "$0.0000" in markdown_footer(final)
        cost = k.execute("%agent cost").stdout.strip()
        assert cost.startswith("this session: 2 requests") and cost.endswith(", free"), cost
        k.python("get_ipython().kernel.host.flush()")
        ex = k.execute("%%sql _rows <<\nSELECT provider, model, cost FROM usage")
        assert ex.status == "ok", ex.content
        rows = json.loads(k.python("print(_rows.to_json(orient='records'))"))
    assert rows == [{"provider": "offline", "model": "offline-demo", "cost": 0.0}] * 2
