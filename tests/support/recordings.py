"""Record the sessions the teaching notebooks replay (``notebooks/data/*.jsonl``).

A recording is made by running the notebook's own cells in a real ``dsh`` / ``dsh-python`` kernel
whose model is a *scripted teaching model* served over the OpenAI-compatible wire by the loopback
``SseServer`` (provider ``openai-compatible``, model ``teaching-script``): the kernel, the tools,
the approval policy and the journal are the real ones; only the model's words are written in
advance, below. Cells tagged ``dsh-replay-only`` (importing the recording, ``%agent replay``, queries
about the recording) are skipped. The session's journal is then copied next to the notebook with
its header's ``cwd`` set to ``notebooks`` (the recording machine's temporary directory means nothing
elsewhere).

Regenerate after changing a notebook's recorded cells or a script::

    .venv/bin/python -m tests.support.recordings            # every recording
    .venv/bin/python -m tests.support.recordings 03         # the notebooks whose name starts so

The notebook tests replay the committed files, so a recording that no longer matches its notebook
fails them with ``REPLAY_DIVERGED``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from tests.support.kernel import start_kernel
from tests.support.sse_server import Reply, SseServer, sse_reply
from tests.support.wire_transcripts import chat_chunk, sse

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
REPLAY_ONLY = "dsh-replay-only"
MODEL = "teaching-script"


def _usage(prompt: int, completion: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def _words(text: str) -> list[str]:
    """Stream a text in word-sized pieces, as a model would."""
    out: list[str] = []
    word = ""
    for ch in text:
        word += ch
        if ch in " \n":
            out.append(word)
            word = ""
    if word:
        out.append(word)
    return out


def answer(
    text: str,
    *,
    usage: dict[str, Any],
    reasoning: str | None = None,
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = (),
) -> Reply:
    """One model response: optional reasoning, streamed text, then tool calls ``(id, name, args)``."""
    chunks: list[object] = [chat_chunk({"role": "assistant", "content": ""})]
    if reasoning:
        chunks += [chat_chunk({"reasoning_content": p}) for p in _words(reasoning)]
    chunks += [chat_chunk({"content": p}) for p in _words(text)]
    for i, (call_id, name, args) in enumerate(calls):
        raw = json.dumps(args)
        half = len(raw) // 2
        chunks.append(
            chat_chunk(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": call_id,
                            "type": "function",
                            "function": {"name": name, "arguments": raw[:half]},
                        }
                    ]
                }
            )
        )
        chunks.append(
            chat_chunk({"tool_calls": [{"index": i, "function": {"arguments": raw[half:]}}]})
        )
    finish = "tool_calls" if calls else "stop"
    chunks.append(chat_chunk({}, finish_reason=finish))
    chunks.append({"id": "chatcmpl-X", "choices": [], "usage": usage})
    chunks.append("[DONE]")
    return sse_reply(sse(*chunks))


def python_call(call_id: str, code: str, description: str) -> tuple[str, str, dict[str, Any]]:
    return (call_id, "python", {"code": code, "description": description})


PLANETS_CODE = """\
import pandas as pd
planets = pd.DataFrame({
    "planet": ["Mercury", "Venus", "Earth", "Mars", "Jupiter", "Saturn", "Uranus", "Neptune"],
    "distance_au": [0.39, 0.72, 1.00, 1.52, 5.20, 9.54, 19.19, 30.07],
    "moons": [0, 0, 1, 2, 95, 146, 28, 16],
})
planets.shape"""

TEACHING: tuple[Reply, ...] = (
    # Turn 1: build the table.
    answer(
        "I'll build it with the `python` tool. It runs in your notebook, so `planets` stays "
        "there for you afterwards.",
        usage=_usage(912, 131),
        calls=(python_call("call_planets", PLANETS_CODE, "create planets"),),
    ),
    answer(
        "Done: `planets` has 8 rows and 3 columns — `planet`, `distance_au` (the mean distance "
        "from the Sun in astronomical units; Earth is 1) and `moons` (known moons as of 2024; the "
        "count grows as new ones are found).",
        usage=_usage(1068, 58, cached=896),
    ),
    # Turn 2: filter and sum, with visible reasoning.
    answer(
        "Let me filter the table.",
        reasoning="The giant planets start at Jupiter, 5.2 AU. Filter on distance_au > 5, list "
        "the names, and sum the moons as a plain int so the output is easy to read.",
        usage=_usage(1389, 96, cached=1024),
        calls=(
            python_call(
                "call_outer",
                "outer = planets[planets['distance_au'] > 5]\n"
                "print(outer['planet'].tolist())\n"
                "int(outer['moons'].sum())",
                "planets beyond 5 AU",
            ),
        ),
    ),
    answer(
        "The four giant planets — **Jupiter, Saturn, Uranus and Neptune** — are all farther "
        "than 5 AU, and together they have **285** known moons. The four rocky planets have "
        "3 between them.",
        usage=_usage(1521, 49, cached=1344),
    ),
    # Turn 3: a failing call, then the fix.
    answer(
        "",
        usage=_usage(1598, 41, cached=1472),
        calls=(
            # A real tool-calling slip: the argument is ``code``, not ``source``. (A failure inside
            # the code would do too, but its traceback names the run and library paths, which differ
            # from machine to machine — a replay must see the same tool results.)
            (
                "call_mean_1",
                "python",
                {"source": "planets.groupby(planets['distance_au'] > 5)['moons'].mean()"},
            ),
        ),
    ),
    answer(
        "That call failed: the `python` tool takes the code as `code`, not `source`. Again, "
        "with readable group names:",
        usage=_usage(1702, 88, cached=1536),
        calls=(
            python_call(
                "call_mean_2",
                "kind = planets['distance_au'].gt(5).map({True: 'giant', False: 'rocky'})"
                ".rename('kind')\n"
                "planets.groupby(kind)['moons'].mean()",
                "average moons by kind",
            ),
        ),
    ),
    answer(
        "On average a giant planet has **71.25** known moons and a rocky planet **0.75** "
        "(Earth's one and Mars's two, over four planets).\n\n"
        "My first attempt failed because I called the tool with a wrong argument name. The failed "
        "call is in the session log like everything else: "
        "`%%sql SELECT * FROM tool_calls WHERE status = 'failed'` finds it.",
        usage=_usage(1843, 77, cached=1664),
    ),
    # Turn 4: text only.
    answer(
        "- We built `planets`, a DataFrame of the eight planets with their distance from the "
        "Sun (AU) and their known moons.\n"
        "- We found the planets beyond 5 AU — the four giants — and their 285 moons.\n"
        "- We compared the average number of moons: 71.25 for a giant, 0.75 for a rocky "
        "planet, after fixing a wrong argument name.",
        usage=_usage(1977, 83, cached=1792),
    ),
)

BUILD_A_TOOL: tuple[Reply, ...] = (
    answer(
        "I'll use your `convert` function.",
        usage=_usage(844, 37),
        calls=(("call_convert", "convert", {"amount": 250, "rate": 1.08}),),
    ),
    answer(
        "250 EUR is **270.00 USD** at 1.08 dollars per euro — computed by your `convert` "
        "function, which ran in this notebook.",
        usage=_usage(905, 31, cached=768),
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recording:
    notebook: str
    data: str
    replies: tuple[Reply, ...]


RECORDINGS: tuple[Recording, ...] = (
    Recording(
        notebook="03-teaching-replay.ipynb", data="data/teaching-session.jsonl", replies=TEACHING
    ),
    Recording(
        notebook="05-build-a-tool.ipynb", data="data/build-a-tool.jsonl", replies=BUILD_A_TOOL
    ),
)


def recorded_cells(nb: Any) -> list[str]:
    """The code cells a recording runs: every one not tagged ``dsh-replay-only``."""
    return [
        c.source
        for c in nb.cells
        if c.cell_type == "code" and REPLAY_ONLY not in c.get("metadata", {}).get("tags", [])
    ]


def record(rec: Recording) -> Path:
    nb = nbformat.read(NOTEBOOKS / rec.notebook, as_version=4)
    kernel_name = nb.metadata["kernelspec"]["name"]
    with tempfile.TemporaryDirectory() as tmp, SseServer(rec.replies) as server:
        env = {
            "DSH_PROVIDER": "openai-compatible",
            "DSH_BASE_URL": server.url,
            "DSH_MODEL": MODEL,
        }
        with start_kernel(Path(tmp), kernel_name, env) as k:
            for source in recorded_cells(nb):
                ex = k.execute(source, timeout=120)
                if ex.status != "ok":
                    raise RuntimeError(
                        f"{rec.notebook}: cell failed: {source[:60]!r}: {ex.content}"
                    )
            sid = k.python("print(get_ipython().kernel.host.agent.session.id)").strip()
        if server.remaining:
            raise RuntimeError(f"{rec.notebook}: {server.remaining} scripted replies were not used")
        journals = list((Path(tmp) / "store" / "journals").glob(f"*/{sid}.jsonl"))
        if len(journals) != 1:
            raise RuntimeError(f"{rec.notebook}: no journal for session {sid}")
        lines = journals[0].read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["cwd"] = "notebooks"
    lines[0] = json.dumps(header, separators=(",", ":"), ensure_ascii=False) + "\n"
    out = NOTEBOOKS / rec.data
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(lines), encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    for rec in RECORDINGS:
        if argv and not any(rec.notebook.startswith(a) for a in argv):
            continue
        print(f"recorded {record(rec).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
