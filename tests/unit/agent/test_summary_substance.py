"""The substance check a compaction's summary must pass (``agent.compaction.substance``): pure
functions over messages and text. The range is a small data session (a code name, a year and a
threshold the user gave, a file and names the ``python`` tool defined); the summaries are what a
small model really wrote (the instruction's headings, empty), filler, a gist, a summary of another
conversation, a good summary, and good summaries that each lost one kind of fact."""

from __future__ import annotations

import json

import pytest

from dsh_kernel.agent.compaction.range import PLUGIN, checkpoint_message
from dsh_kernel.agent.compaction.substance import (
    Digest,
    content_of,
    defined_in,
    digest,
    min_words,
    names_in,
    needed,
    number_key,
    numbers_in,
    range_digest,
    topics_of,
    unfit,
    word_count,
)
from dsh_kernel.agent.compaction.summary import INSTRUCTION, SCAFFOLD
from dsh_kernel.ids import CallId, MessageId
from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.llm.codec import message_to_json
from dsh_kernel.llm.estimate import message_tokens
from dsh_kernel.llm.types import (
    Message,
    ModelSource,
    PluginSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSource,
    UserSource,
)
from dsh_kernel.session.events import ReplaceOp, SessionHeader
from dsh_kernel.session.log import Session

_n = 0


def _id() -> MessageId:
    global _n
    _n += 1
    return MessageId(f"msg_{_n}")


def user(text: str, raw: str | None = None) -> Message:
    extra: JsonObject = {"cell": {"raw": raw}} if raw is not None else {}
    return Message(
        id=_id(), role="user", content=(TextBlock(text=text),), source=UserSource(extra=extra)
    )


def assistant(text: str = "", code: str | None = None, call: str = "c1") -> Message:
    blocks: list[TextBlock | ToolCallBlock] = [TextBlock(text=text)] if text else []
    if code is not None:
        blocks.append(
            ToolCallBlock(id=CallId(call), name="python", arguments=json.dumps({"code": code}))
        )
    return Message(
        id=_id(),
        role="assistant",
        content=tuple(blocks),
        source=ModelSource(provider="p", model="m"),
    )


def result(text: str, call: str = "c1") -> Message:
    return Message(
        id=_id(),
        role="user",
        content=(ToolResultBlock(tool_call_id=CallId(call), content=(TextBlock(text=text),)),),
        source=ToolSource(call_id=CallId(call)),
    )


RANGE = [
    user("My project's code name is Zephyrine. Remember it."),
    assistant("Noted: the project is Zephyrine."),
    user("Load sales.csv and compute the total for 2024; the threshold is 1,500."),
    assistant(
        code=(
            "import pandas as pd\n"
            'df = pd.read_csv("data/sales.csv")\n'
            "total_2024 = df[df.year == 2024].amount.sum()\n"
            "total_2024"
        )
    ),
    result("183250.75"),
    assistant("The 2024 total is 183,250.75, above the 1,500 threshold."),
    user("Plot the monthly revenue as a bar chart."),
    assistant(code='monthly = df.groupby("month").amount.sum()\nmonthly.plot.bar()', call="c2"),
    result("<Axes: xlabel='month'>", call="c2"),
    assistant("Here is the bar chart of monthly revenue."),
]
TOKENS = sum(message_tokens(m) for m in RANGE)
FACTS = digest(RANGE, TOKENS)

HEADINGS = (
    "## Goal\n## Notebook state\n## Done so far\n## Errors and how they were resolved\n"
    "## Open questions and next step"
)
GOOD = """\
## Goal
- Analyse the sales data for project Zephyrine (the code name the user gave).
## Notebook state
- `df`: data/sales.csv, loaded with pandas.
- `total_2024` = 183,250.75: the 2024 total amount, above the user's threshold of 1500.
- `monthly`: monthly revenue (sum of amount by month), plotted as a bar chart.
## Done so far
- Computed the 2024 total; plotted the monthly revenue.
## Errors and how they were resolved
(none)
## Open questions and next step
- Wait for the user's next request."""


def why(text: str, facts: Digest = FACTS) -> str | None:
    verdict = unfit(text, facts, SCAFFOLD)
    return None if verdict is None else f"{verdict.check}: {verdict.reason}"


# --- what the range holds ------------------------------------------------------------------------


def test_the_facts_of_the_range() -> None:
    assert FACTS.numbers == ("2024", "1500")
    assert FACTS.names == ("Zephyrine", "sales.csv")
    assert FACTS.defined == ("df", "total_2024", "sales.csv", "monthly")
    assert FACTS.tokens == TOKENS and {"zephy", "thres", "reven"} <= set(FACTS.stems)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("My project's code name is Zephyrine.", ["Zephyrine"]),
        ("Zephyrine is the name.", []),  # a sentence's first word proves nothing
        ("Call it 'Blue Heron' or “Red Kite”, and `df_out`.", ["Blue Heron", "Red Kite", "df_out"]),
        ("it's the project's file, isn't it", []),  # apostrophes are not quotes
        ("send the XR-17 and Q3 files, not the 2nd", ["XR-17", "Q3"]),
        ("use df_sales and myFrame from report.xlsx", ["df_sales", "myFrame", "report.xlsx"]),
        ("I think I'm right, e.g. here", []),
        ("ask Bob at Acme today", ["Bob", "Acme"]),
        ("THIS MUST work", []),  # shouting is not a name
    ],
)
def test_names_the_user_gives(text: str, names: list[str]) -> None:
    assert names_in(text) == names


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("a budget of 4,096 tokens and 3.50 dollars", ["4096", "3.5"]),
        ("steps 1, 2 and 3", []),  # single digits: list numbers, matched by chance
        ("1,2,3", []),
        ("on 2026-12-01 at 0.5", ["2026", "12", "0.5"]),
        ("007 and 1_000_000", ["1000000"]),
    ],
)
def test_numbers_the_user_gives(text: str, numbers: list[str]) -> None:
    assert numbers_in(text) == numbers


def test_number_keys_compare_by_value() -> None:
    assert number_key("1,200") == number_key("1200") == "1200"
    assert number_key("3.50") == "3.5" and number_key("3.0") == "3" and number_key("0.25") == "0.25"


def test_names_code_defines() -> None:
    code = (
        "import pandas as pd\n"
        'df = pd.read_csv("data/sales.csv")\n'
        'df["total"] = df.a + df.b\n'
        "for i in range(3):\n"
        "    best = i\n"
        "def helper(): pass\n"
        "class Model: pass\n"
        "_tmp = 1\n"
        "a2, (b2, c) = 1, (2, 3)\n"
        'con.execute("CREATE OR REPLACE TABLE main.monthly AS SELECT 1")\n'
        "%time y2 = 2\n"
    )
    assert defined_in(code) == [
        "df", "total", "best", "helper", "Model", "a2", "b2", "sales.csv", "monthly"
    ]  # fmt: skip
    # code that does not parse: assignments at the start of a line
    assert defined_in("rate = 0.5\nresult = (\n") == ["rate", "result"]


def test_what_the_user_typed_counts_not_what_a_reference_inserted() -> None:
    msg = user("Describe df_orders: [a DataFrame of 12,345 rows]", raw="Describe $`df_orders`")
    facts = digest([msg], 100)
    assert facts.numbers == () and facts.names == ("df_orders",)


def test_plugin_messages_give_no_facts() -> None:
    snapshot = Message(
        id=_id(),
        role="user",
        content=(TextBlock(text="Variables: Zephyrine_df 4096"),),
        source=PluginSource(plugin="dsh/runtime", form={"kind": "snapshot"}),
    )
    assert digest([snapshot], 100) == Digest(tokens=100)


def test_the_share_each_kind_needs() -> None:
    assert [needed(n) for n in (0, 1, 2, 3, 4, 6, 7, 30)] == [0, 1, 1, 1, 2, 2, 3, 3]
    assert [min_words(t) for t in (200, 600, 1000, 2000, 10**6)] == [12, 12, 20, 40, 40]


# --- summaries that fail -------------------------------------------------------------------------


def test_the_instructions_headings_empty_are_unfit() -> None:
    # what Qwen2.5-Coder-0.5B answered, twice, on a live server
    assert why(HEADINGS) == "content: only the instruction's headings, nothing under them"
    assert content_of(HEADINGS, SCAFFOLD) == ""


def test_the_whole_instruction_echoed_is_unfit() -> None:
    assert why(INSTRUCTION) == "content: only the instruction's headings, nothing under them"
    body = INSTRUCTION.split("\n", 1)[1]  # without its first sentence, in a code fence
    assert why(f"```markdown\n{body}\n```") == (
        "content: only the instruction's headings, nothing under them"
    )


def test_headings_with_filler_are_unfit() -> None:
    filler = (
        "# Checkpoint\n## Goal\n(none)\n## Notebook state\n- None\n"
        "(variables, data, files and results that exist now, with their names and key values)\n"
        "## Done so far\n- Nothing yet.\n## Errors and how they were resolved\n- No errors.\n"
        "## Open questions and next step\n- N/A\n<compacted-summary>\n</compacted-summary>"
    )
    assert why(filler) == "content: only the instruction's headings, nothing under them"


def test_a_one_line_gist_is_unfit() -> None:
    assert why("- The user asked about the sales data.") == (
        "content: 7 words beyond the instruction's headings, fewer than the 12 a summary of "
        f"~{TOKENS:,} tokens needs"
    )
    assert why(HEADINGS.replace("## Goal", "## Goal\n- Sales data.")) == (
        "content: 2 words beyond the instruction's headings, fewer than the 12 a summary of "
        f"~{TOKENS:,} tokens needs"
    )


def test_a_summary_of_another_conversation_is_unfit() -> None:
    other = (
        "## Goal\n- Plan a wedding in Lisbon for 120 guests in June.\n## Notebook state\n"
        "- `guests`: the guest list; `venues`: three candidate venues.\n## Done so far\n"
        "- Compared catering offers and shortlisted the riverside venue.\n"
        "## Open questions and next step\n- Confirm the photographer."
    )
    reason = why(other)
    assert reason is not None and reason.startswith("facts: it lost all 2 numbers the user gave")
    assert "lost all 2 names the user gave (Zephyrine, sales.csv)" in reason
    assert "lost all 4 names the turns defined (df, total_2024, sales.csv, monthly)" in reason


def test_a_summary_that_lost_the_users_numbers_is_unfit() -> None:
    lost = GOOD.replace("the 2024 total amount, above the user's threshold of 1500", "the total")
    lost = lost.replace("Computed the 2024 total", "Computed the total")
    assert why(lost) == "facts: it lost all 2 numbers the user gave (2024, 1500)"


def test_a_summary_that_lost_the_code_name_is_unfit() -> None:
    facts = digest(
        [user("Our code name is Zephyrine."), assistant("Noted.")]
        + [m for i in range(3) for m in (user(f"Topic {i}?"), assistant("About words. " * 20))],
        300,
    )
    summary = (
        "## Goal\n- Learn about several topics, one at a time.\n## Done so far\n"
        "- Each topic was explained in plain words, at some length, with examples."
    )
    assert why(summary, facts) == "facts: it lost the name the user gave (Zephyrine)"
    assert why(summary.replace("several topics", "several topics for Zephyrine"), facts) is None


def test_a_summary_that_forgot_what_the_code_defined_is_unfit() -> None:
    forgot = GOOD.replace("`df`: data/sales.csv, loaded", "the sales file, loaded")
    forgot = forgot.replace("`total_2024` = ", "the total = ").replace("`monthly`: ", "")
    assert why(forgot) == (
        "facts: it kept 1 of the 4 names the turns defined, fewer than 2 (lost df, total_2024, "
        "sales.csv)"
    )


def test_a_summary_off_the_topic_of_a_range_without_facts_is_unfit() -> None:
    chat = [user("tell me about the weather by the sea."), assistant("The sea air is mild. " * 30)]
    facts = digest(chat, 300)
    assert facts.numbers == facts.names == facts.defined == ()
    other = (
        "## Goal\n- Refactor the billing microservice and migrate invoices to the ledger.\n"
        "## Done so far\n- Wrote adapters, deployed staging, verified reconciliation reports."
    )
    assert topics_of(facts, SCAFFOLD) == ["mild", "weath"]  # "tell", "about": common
    assert why(other, facts) == (
        "topic: not about this conversation: none of the 2 words it uses most"
    )
    on_topic = (
        "## Goal\n- Talk about the weather by the sea.\n## Done so far\n"
        "- The assistant described the mild sea air at length, several times over."
    )
    assert why(on_topic, facts) is None


# --- summaries that pass -------------------------------------------------------------------------


def test_a_good_summary_passes() -> None:
    assert why(GOOD) is None


def test_a_good_summary_in_other_words_passes() -> None:
    # case, number formats and order differ; one name of each kind is missing; no headings at all
    other = (
        "PROJECT ZEPHYRINE. The user had sales.csv read into df and asked for the year 2024's "
        "total against a 1500 threshold: total_2024 came to 183,250.75, well above it. They then "
        "asked for a bar chart of revenue by month, which was drawn."
    )
    assert why(other) is None


def test_a_terse_summary_of_a_fact_heavy_range_passes_with_a_share() -> None:
    table = ", ".join(str(100 + 37 * i) for i in range(30))
    facts = digest([user(f"Here are the monthly counts: {table}."), assistant("Got them.")], 400)
    assert len(facts.numbers) == 30 and needed(30) == 3
    terse = (
        "- The user gave 30 monthly counts, from 100 to 1173 (the first three: 100, 137, 174); "
        "the assistant acknowledged them and is waiting for what to do with them."
    )
    assert why(terse, facts) is None
    fewer = terse.replace(" (the first three: 100, 137, 174)", "")
    assert why(fewer, facts) == (
        "facts: it kept 2 of the 30 numbers the user gave, fewer than 3 (lost 137, 174, 211, 248, "
        "285, 322, 359, 396, 433, 470, 507, 544, 581, 618, 655, 692…)"
    )


def test_a_summary_in_chinese_counts_its_characters() -> None:
    facts = digest([user("请记住项目代号 Zephyrine 和预算 4096。"), assistant("好的。" * 50)], 300)
    summary = "## Goal\n- 用户的项目代号是 Zephyrine，预算为 4096。助手已确认并记住了这两个信息，等待下一步的请求。"
    assert word_count(content_of(summary, SCAFFOLD)) >= 12
    assert why(summary, facts) is None


def test_facts_the_instruction_itself_holds_are_not_counted() -> None:
    facts = digest([user("Write it in Markdown with a Goal section."), assistant("Sure.")], 200)
    assert facts.names == ("Markdown", "Goal")
    summary = "- The user wants the document written in a particular format, with sections."
    summary += " They have not said what the document is about yet; nothing was run."
    assert why(summary, facts) is None  # an echo of the instruction would "keep" both


# --- earlier checkpoints -------------------------------------------------------------------------


def _session_with_a_checkpoint(summary: str) -> tuple[Session, list[int]]:
    """A session whose first two messages were replaced by a checkpoint of ``summary``; the range
    of a second compaction: that checkpoint and the next message."""
    session = Session(header=SessionHeader(id="s1", created_at=0))
    said = (RANGE[0], user("And keep it short."), user("Now the 2025 figures, please."))
    seqs = [
        session.append("user/message", message_to_json(m), surface_op="append").seq for m in said
    ]
    checkpoint = checkpoint_message(summary, "cmp_1", [1])
    assert isinstance(checkpoint.source, PluginSource) and checkpoint.source.plugin == PLUGIN
    ev = session.append(
        "user/message",
        message_to_json(checkpoint),
        surface_op=ReplaceOp(start=seqs[0], end=seqs[1]),
        source_event_seqs=seqs[:2],
    )
    assert session.surface == (ev.seq, seqs[2])
    return session, list(session.surface)


def test_an_earlier_checkpoint_stands_for_the_facts_it_still_carries() -> None:
    kept = "- The project's code name is Zephyrine; the user asked to remember it."
    session, seqs = _session_with_a_checkpoint(kept)
    facts = range_digest(session, seqs, 300)
    assert facts.names == ("Zephyrine",) and facts.numbers == ("2025",)
    assert "zephy" in facts.stems and "remem" in facts.stems and "figur" in facts.stems
    merged = "- Project Zephyrine (code name); the user now wants the 2025 figures, not yet given."
    assert why(merged, facts) is None
    dropped = "- The user now wants the 2025 figures for the project; they were not given yet."
    assert why(dropped, facts) == "facts: it lost the name the user gave (Zephyrine)"


def test_a_fact_an_earlier_checkpoint_lost_is_not_asked_for_again() -> None:
    session, seqs = _session_with_a_checkpoint(
        "- The user named the project and asked to remember it."
    )
    facts = range_digest(session, seqs, 300)
    assert facts.names == () and facts.numbers == ("2025",)
