"""Three students' session stores, recorded by a real ``Agent``, and their Parquet exports: the
sample ``notebooks/06-instructor.ipynb`` queries (``notebooks/data/course/<student>/``) and the
course the CLI tests export and report on.

Each student's sessions are recorded by ``dsh_kernel.Agent`` with the scripted provider
(``dsh_kernel.testing``: the model's words are written below) and a fixed clock, journaled into the
student's own store (``attach_journal``); the log, the tools (a small ``python`` that really runs
the code in a namespace of its own, and a read-only ``inspect``), the registry's guard and the
store are the real ones. The model is priced with ``set_price`` so the costs are real sums.

* **alice** (``full``): two notebooks; a python call that fails (a ``NameError``) and is fixed.
* **bob** (``explain``, a daily budget of 3,000 tokens): the agent reads with ``inspect``; asked to
  run code, its ``python`` call is denied (``DENIED``) by a registry guard saying the course's
  policy is explain, as the kernel's policy guard denies it; the third turn's request would pass the
  budget, so the agent's ``SpendGate`` (``dsh_kernel.agent.request.spend``) sends nothing and the turn ends
  ``BUDGET_EXCEEDED``.
* **chen**: sessions from a kernel that recorded no user (the header's ``user`` is NULL), so the
  report names the student by the export folder; two days, so ``--since`` has something to cut.

Ids are UUID4s drawn at random by the agent (message ids), so after recording, every UUID in a
journal other than the session's is replaced by ``uuid5(student, n)`` in order of first appearance —
the journal is then the same bytes on every run — and only then ingested and exported (the
``python -m dsh_kernel export`` code path, in this process). Regenerate the shipped sample with::

    .venv/bin/python -m tests.support.course_sample          # writes notebooks/data/course/

``tests/integration/store/test_cli.py`` checks the shipped files hold what this makes.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sys
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from dsh_kernel import Agent, tool
from dsh_kernel.agent.request.spend import Budget, SpendGate, session_usage
from dsh_kernel.agent.retry import RetryPolicy
from dsh_kernel.errors import ToolError
from dsh_kernel.jsonvalue import JsonObject, JsonValue
from dsh_kernel.llm.types import TokenUsage
from dsh_kernel.session.events import SessionHeader
from dsh_kernel.session.log import Session
from dsh_kernel.store.ingest.incremental import set_price
from dsh_kernel.store.journal import attach_journal
from dsh_kernel.store.layout import Store
from dsh_kernel.testing import ScriptedProvider, ScriptEntry, text_response, tool_call_response
from dsh_kernel.tools.approval import ApprovalPolicy
from dsh_kernel.tools.types import ToolCall, ToolContext, ToolDefinition

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "notebooks" / "data" / "course"
MODEL = "course-model"
PROVIDER = "scripted"
PRICE = {"input_per_mtok": 0.5, "output_per_mtok": 1.5}
NS = uuid.UUID("6f1d3c3e-9a53-4b59-9d1e-5a0c0de5a3b1")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _usage(inp: int, out: int, cached: int = 0) -> TokenUsage:
    return TokenUsage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached)


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    """One session to record: its notebook, when it starts, the prompts and the model's script."""

    notebook: str
    start: str
    """UTC, ``YYYY-MM-DD HH:MM``."""
    prompts: tuple[str, ...]
    script: tuple[ScriptEntry, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Student:
    folder: str
    user: str | None
    policy: str | None
    sessions: tuple[Recorded, ...]
    budget_tokens: int | None = None
    """A daily token budget (``DSH_BUDGET_TOKENS``), held by the agent's real ``SpendGate``."""


def _py(code: str, call_id: str, inp: int, out: int) -> ScriptEntry:
    return tool_call_response("python", {"code": code}, call_id=call_id, usage=_usage(inp, out))


STUDENTS: tuple[Student, ...] = (
    Student(
        folder="alice",
        user="alice",
        policy="full",
        sessions=(
            Recorded(
                notebook="hw1-regression.ipynb",
                start="2026-11-02 09:00",
                prompts=("Fit a line to xs and ys and give me the slope.", "And the intercept?"),
                script=(
                    _py("slope = (ys[-1] - ys[0]) / (xs[-1] - xs[0])\nslope", "a-1", 410, 40),
                    text_response("The slope is **2.0**.", usage=_usage(470, 12, 400)),
                    _py("intercept = ys[0] - slope * x[0]", "a-2", 520, 30),
                    _py(
                        "intercept = ys[0] - slope * xs[0]\nintercept",
                        "a-3",
                        600,
                        30,
                    ),
                    text_response(
                        "The intercept is **1.0**: y = 2x + 1.", usage=_usage(640, 16, 560)
                    ),
                ),
            ),
            Recorded(
                notebook="hw2-clustering.ipynb",
                start="2026-11-03 14:30",
                prompts=("What does k-means minimise?",),
                script=(
                    text_response(
                        "The within-cluster sum of squared distances to each cluster's mean.",
                        usage=_usage(300, 24),
                    ),
                ),
            ),
        ),
    ),
    Student(
        folder="bob",
        user="bob",
        policy="explain",
        budget_tokens=3_000,
        sessions=(
            Recorded(
                notebook="hw1-regression.ipynb",
                start="2026-11-02 10:15",
                prompts=(
                    "Why is my slope negative?",
                    "Just fix my code for me.",
                    "One more hint, please.",
                ),
                script=(
                    tool_call_response(
                        "inspect", {"name": "ys"}, call_id="b-1", usage=_usage(380, 20)
                    ),
                    text_response(
                        "Your `ys` fall as `xs` grow, so the fitted line slopes down.",
                        usage=_usage(430, 22, 360),
                    ),
                    _py("ys = sorted(ys)", "b-2", 480, 18),
                    text_response(
                        "I can't run code in this course; try plotting `ys` against `xs` first.",
                        usage=_usage(520, 26, 440),
                    ),
                    # the third prompt's request is never sent: the budget is spent
                ),
            ),
        ),
    ),
    Student(
        folder="chen",
        user=None,
        policy=None,
        sessions=(
            Recorded(
                notebook="hw1-regression.ipynb",
                start="2026-11-01 20:00",
                prompts=("Explain R squared in one sentence.",),
                script=(
                    text_response(
                        "The share of the variance of y that the model explains.",
                        usage=_usage(250, 18),
                    ),
                ),
            ),
            Recorded(
                notebook="hw1-regression.ipynb",
                start="2026-11-04 08:45",
                prompts=("Compute the mean of ys.",),
                script=(
                    _py("sum(ys) / len(ys)", "c-1", 330, 20),
                    text_response("The mean of `ys` is **6.0**.", usage=_usage(380, 14, 300)),
                ),
            ),
        ),
    ),
)


def _tools(namespace: dict[str, object]) -> tuple[ToolDefinition, ...]:
    """``python`` runs the code in ``namespace`` (the value of a last expression line is the
    result); ``inspect`` describes a name in it. Small stand-ins for the notebook's own tools."""

    def run(args: JsonObject, ctx: ToolContext) -> JsonValue:
        del ctx
        lines = str(args.get("code", "")).strip().splitlines()
        try:
            exec("\n".join(lines[:-1]), namespace)
            last = lines[-1] if lines else ""
            try:
                value = eval(last, namespace)
            except SyntaxError:
                exec(last, namespace)
                value = None
        except Exception as exc:
            raise ToolError(f"{type(exc).__name__}: {exc}", code="CODE_FAILED") from exc
        return {"result": repr(value)}

    python = ToolDefinition(
        name="python",
        description="Run Python code in the notebook's namespace.",
        parameters={
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
        execute=run,
    )

    @tool(read_only=True)
    def inspect(name: str) -> str:
        """Describe a name in the notebook's namespace."""
        return f"{name} = {namespace.get(name)!r}"

    return (python, inspect.tool_definition)


def _clock(start: str):
    t = [int(datetime.strptime(start, "%Y-%m-%d %H:%M").replace(tzinfo=UTC).timestamp() * 1000)]

    def now() -> int:
        t[0] += 250
        return t[0]

    return now


def _explain_guard(call: ToolCall, args: JsonValue) -> str | None:
    del args
    if call.name == "inspect":
        return None
    return f"the course's AI policy is explain: the tool {call.name!r} is not allowed"


async def _record(
    store: Store, student: Student, n: int, rec: Recorded, tools: Collection[str] | None = None
) -> Path:
    clock = _clock(rec.start)
    sid = str(uuid.uuid5(NS, f"{student.folder}/session/{n}"))
    header = SessionHeader(
        id=sid,
        created_at=clock(),
        cwd=f"/home/{student.folder}",
        notebook=rec.notebook,
        user=student.user,
        ai_policy=student.policy,
    )
    namespace: dict[str, object] = {"xs": [1, 2, 3, 4, 5], "ys": [3, 5, 7, 9, 11]}
    if student.folder == "bob":
        namespace["ys"] = [11, 9, 7, 5, 3]
    provider = ScriptedProvider(rec.script, id=PROVIDER)
    agent = Agent(
        provider=provider,
        model=MODEL,
        tools=[t for t in _tools(namespace) if tools is None or t.name in tools],
        session=Session(header=header, clock=clock),
        clock=clock,
        retry_policy=RetryPolicy(mode="off"),
        approval_policy=ApprovalPolicy("auto"),
    )
    if student.budget_tokens is not None:
        agent.spend = SpendGate(
            Budget(
                tokens=student.budget_tokens,
                tokens_setting="DSH_BUDGET_TOKENS",
                owner="your course's administrator",
            ),
            usage=session_usage(agent.session, clock=clock),
        )
    if student.policy == "explain":
        agent.registry.guard(_explain_guard)
    writer = attach_journal(agent, store)
    for prompt in rec.prompts:
        agent.followup(prompt)
        await agent.when_idle()
    provider.assert_consumed()
    writer.close()
    return store.journal_path(header)


def _fix_ids(journal: Path, student: str, session_id: str) -> None:
    """Replace the random UUIDs of a journal by names drawn from the student (module docstring)."""
    text = journal.read_text(encoding="utf-8")
    names: dict[str, str] = {session_id: session_id}

    def named(m: re.Match[str]) -> str:
        found = m.group(0)
        if found not in names:
            names[found] = str(uuid.uuid5(NS, f"{student}/{session_id}/{len(names)}"))
        return names[found]

    journal.write_text(_UUID.sub(named, text), encoding="utf-8")


def record_store(student: Student, store: Store, *, tools: Collection[str] | None = None) -> Store:
    """Record ``student``'s sessions into ``store`` and price its model; ``tools``: the names of the
    tools offered (default: both), as a policy withholds the others."""
    for n, rec in enumerate(student.sessions):
        journal = asyncio.run(_record(store, student, n, rec, tools))
        _fix_ids(journal, student.folder, journal.stem)
    set_price(store, provider=PROVIDER, model=MODEL, **PRICE)
    return store


def make_course(work: Path) -> dict[str, Store]:
    """Each student's store, recorded under ``work/stores/<folder>``."""
    return {s.folder: record_store(s, Store.at(work / "stores" / s.folder)) for s in STUDENTS}


def make_sample(out: Path, work: Path) -> list[Path]:
    """Record the three stores under ``work`` and export each to ``out/<folder>`` (replacing it)."""
    from dsh_kernel.__main__ import main

    exported: list[Path] = []
    for folder, store in make_course(work).items():
        target = out / folder
        if target.exists():
            shutil.rmtree(target)
        out.mkdir(parents=True, exist_ok=True)
        status = main(["export", "--parquet", str(target), "--store", str(store.root)])
        if status != 0:
            raise RuntimeError(f"exporting {folder}'s store failed ({status})")
        exported.append(target)
    return exported


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for path in make_sample(Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE, Path(tmp)):
            print(f"wrote {path}")
