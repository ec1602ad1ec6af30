"""How large a turn's capsule is beside the rendered output of the same turn (issue 34: ≤ 1.5×).

A real ``dsh`` kernel on a loopback model server (``tests/support/sse_server.py``) runs ``--turns``
chat cells (default 50), each sent as JupyterLab sends it (its cell id); every ``--plot-every``-th
(default 5) has the agent's ``python`` tool draw a matplotlib plot before it answers, the others
answer ~``--words`` words (default 120) of Markdown. For each turn the saved output is read as a
frontend keeps it (the display, replaced by its update): the rendered bundle (``text/plain``,
``text/markdown``, ``text/html``, as JSON) and the capsule in its metadata (as JSON).

Reported: the capsule/rendered ratio per turn — median, 90th percentile, largest, the first turn
(which carries the request header: the system prompt and the tool schemas), a plot turn — and of
the whole notebook. Run: ``python benchmarks/capsule.py [--turns 50]`` (about a minute; ``--quick``:
3 turns).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dsh_kernel.capsule import CAPSULE_KEY  # noqa: E402
from tests.support import scenarios as sc  # noqa: E402
from tests.support.frontend import Frontend  # noqa: E402
from tests.support.kernel import start_kernel  # noqa: E402
from tests.support.notebook_frontend import CellWithId  # noqa: E402
from tests.support.sse_server import SseServer  # noqa: E402

PLOT = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots(figsize=(5, 3))\nax.plot([x * x for x in range({n})])\n"
    "ax.set_title('squares {n}')\nplt.show()"
)


def final_output(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The chat cell's saved display (its last update), as a frontend keeps it."""
    shown: dict[str, dict[str, Any]] = {}
    for m in messages:
        content = m["content"]
        did = content.get("transient", {}).get("display_id")
        if m["msg_type"] in ("display_data", "update_display_data") and did:
            shown[did] = {"data": content["data"], "metadata": content.get("metadata", {})}
    return next((o for o in shown.values() if CAPSULE_KEY in o["metadata"]), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=50)
    ap.add_argument("--plot-every", type=int, default=5)
    ap.add_argument("--words", type=int, default=120)
    ap.add_argument("--quick", action="store_true", help="3 turns: only proves it runs")
    a = ap.parse_args()
    if a.quick:
        a.turns, a.plot_every = 3, 2
    prose = " ".join(f"word{i}" + (".\n\n" if i % 20 == 19 else "") for i in range(a.words))
    rows: list[tuple[int, bool, int, int]] = []
    with tempfile.TemporaryDirectory() as tmp, SseServer() as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_APPROVAL": "auto",
            "IPYTHONDIR": str(Path(tmp) / "ipython"),
        }
        with start_kernel(Path(tmp), "dsh", env=env) as kernel:
            fe = Frontend(kernel)
            for n in range(1, a.turns + 1):
                plot = n % a.plot_every == 0
                if plot:
                    server.script(sc.python_call(PLOT.format(n=n)), sc.text(f"Plotted. {prose}"))
                else:
                    server.script(sc.text(f"## Answer {n}\n\n{prose}"))
                ex = CellWithId(fe, f"Question {n}: go on.", f"cell-{n}").finish(timeout=120)
                assert ex.status == "ok", ex.content
                out = final_output(ex.messages)
                assert out is not None, f"turn {n}: no capsule in the saved output"
                rendered = len(json.dumps(out["data"]))
                capsule = len(json.dumps(out["metadata"][CAPSULE_KEY]))
                rows.append((n, plot, rendered, capsule))
    ratios = [c / r for _, _, r, c in rows]
    plots = [c / r for _, p, r, c in rows if p]
    total = sum(c for *_, c in rows) / sum(r for _, _, r, _ in rows)
    print(f"{len(rows)} turns ({sum(p for _, p, _, _ in rows)} with a plot); capsule / rendered:")
    print(
        f"  median {statistics.median(ratios):.2f}×, 90th percentile "
        f"{sorted(ratios)[int(0.9 * (len(ratios) - 1))]:.2f}×, largest {max(ratios):.2f}×"
    )
    print(f"  first turn {ratios[0]:.2f}× ({rows[0][3]:,} against {rows[0][2]:,} characters)")
    if plots:
        print(f"  a plot turn {statistics.median(plots):.2f}× (median)")
    print(
        f"  the whole notebook {total:.2f}× ({sum(c for *_, c in rows):,} against "
        f"{sum(r for _, _, r, _ in rows):,} characters)"
    )


if __name__ == "__main__":
    main()
