"""Whether a compaction's summary kept the substance of what it replaces: the check a model's
summary must pass before it replaces anything (``agent.compaction.summary``).

A small model asked for a checkpoint may answer with the instruction's own headings and nothing
under them, a line of filler, or a summary of something else. Each is shorter than the range and
ends normally, so nothing else would stop it, and the session's early facts would be gone. What the
kernel can check without a model, it checks here — pure functions, no I/O:

1. **Content beyond the scaffolding.** The lines of the instruction (its headings, its notes), a
   checkpoint's framing and filler lines ("(none)", "N/A", "nothing yet") are struck out, as are the
   list and heading marks. What remains must be at least ``min_words(tokens)`` words: a fiftieth of
   the range's tokens, at least 12 and at most 40 (a run of CJK characters counts a word per two).
   That floor is far below what any real summary of a range worth compacting (200 tokens or more)
   writes, and above an echo of the headings, a heading with filler, or a one-line gist.
2. **The facts the kernel can read off the range** (``Digest``), by kind:

   * ``numbers`` — numbers the user gave: two characters or more (``4096``, ``1,200``, ``0.5``; a
     single digit is too often a list number, and too easily matched by chance, to prove anything);
   * ``names`` — names the user gave: quoted text, a capitalised word inside a sentence (not the
     sentence's first word), and words shaped like identifiers or files (letters with digits, an
     underscore, a capital inside the word, ``sales.csv``);
   * ``defined`` — names the turns defined: what the ``python`` tool's code assigned at the top
     level (variables, columns set by ``df["col"] = …``, functions, classes) and the files and
     tables it named (``"data/sales.csv"`` as ``sales.csv``, ``CREATE TABLE t``).

   Only the user's own words count for the first two (their text as typed, before a ``$`x```
   reference inserted anything); an earlier checkpoint in the range stands for the facts of the
   messages it replaced that it still carries, so a fact kept once must be kept again. A fact that
   occurs in the scaffolding itself is not counted (an echo would keep it). Each kind that has facts
   must keep at least ``needed(n)`` of its ``n``: a third, at least one, at most three. Why that
   share: a summary has a budget (at most 15 % of the window, often a small part of what the range
   holds), so requiring every fact would reject honest summaries of fact-heavy ranges — pasted
   tables of numbers, long code — and send them to the cruder reduction; but what the check must
   catch keeps *none* of a kind (an echo, a gist, a summary of something else, one that dropped the
   user's numbers), and one model that summarises at all, told to "keep exact names, numbers",
   keeps far more than a third. Matching is case-insensitive, names on word boundaries, numbers by
   value (``1,200`` is ``1200``, ``3.50`` is ``3.5``).
3. **About this conversation.** When the summary has at least 8 Latin words of four letters or
   more, at least one of them must be one of the range's 20 main words (its most frequent words of
   four letters or more, outside common and summary vocabulary and the instruction's words; compared
   on their first five letters, so "computed" finds "computing"). A summary of another
   conversation names none of what this one was about; a real one, even when it paraphrases, names
   its topic. (A share of the summary's words found in the range was tried first: an honest summary
   of a repetitive range describes it in words the range never uses, and failed it.)

``unfit(text, digest, scaffold=…)`` returns why a summary fails (``Unfit``: the check and a line for
people), or ``None``; ``digest(messages, tokens)`` reads a range's facts; ``range_digest(session,
seqs, tokens)`` reads them off a session's surface nodes, earlier checkpoints included.
"""

from __future__ import annotations

import ast
import json
import math
import re
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from dsh_kernel.agent.compaction.range import PLUGIN, summary_inner
from dsh_kernel.jsonvalue import JsonValue
from dsh_kernel.llm.types import (
    Message,
    PluginSource,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserSource,
)
from dsh_kernel.session.log import Session

Kind: TypeAlias = Literal["numbers", "names", "defined"]
Check: TypeAlias = Literal["content", "facts", "topic"]

KINDS: Final[dict[Kind, tuple[str, str]]] = {
    "numbers": ("number the user gave", "numbers the user gave"),
    "names": ("name the user gave", "names the user gave"),
    "defined": ("name the turns defined", "names the turns defined"),
}
MIN_WORDS: Final = 12
MAX_WORDS: Final = 40
TOKENS_PER_WORD: Final = 50
FACT_SHARE: Final = 1 / 3
MAX_NEEDED: Final = 3
TOPICS: Final = 20
TOPIC_MIN_WORDS: Final = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Digest:
    """What a range holds that a summary of it can be checked against (module docstring)."""

    numbers: tuple[str, ...] = ()
    """Numbers the user gave, normalised (``number_key``)."""
    names: tuple[str, ...] = ()
    """Names the user gave."""
    defined: tuple[str, ...] = ()
    """Names the turns defined (``python`` calls' code)."""
    stems: Mapping[str, int] = field(default_factory=dict[str, int])
    """How often each stem occurs in the range (``stem``: a word of four letters or more, cut to
    its first five)."""
    tokens: int = 0
    """The range's size (token meter estimate)."""

    def facts(self, kind: Kind) -> tuple[str, ...]:
        match kind:
            case "numbers":
                return self.numbers
            case "names":
                return self.names
            case "defined":
                return self.defined


@dataclass(frozen=True, slots=True, kw_only=True)
class Unfit:
    """Why a summary fails the check: which check, and a line for people."""

    check: Check
    reason: str


def min_words(tokens: int) -> int:
    """The words of content a summary of ``tokens`` must carry beyond the scaffolding."""
    return max(MIN_WORDS, min(MAX_WORDS, tokens // TOKENS_PER_WORD))


def needed(n: int) -> int:
    """How many of ``n`` facts of one kind a summary must keep (module docstring)."""
    return 0 if n == 0 else max(1, min(MAX_NEEDED, math.ceil(n * FACT_SHARE)))


# --- the summary's content ---------------------------------------------------------------------------

_MARKS = re.compile(r"^(?:[#>*+•·\-–—|]+|\d{1,2}[.)]|\[[ xX]?\])\s*")
_FILLER = re.compile(
    r"^[(\[]?(?:none|nothing|n/?a|not applicable|nil|null|tbd|todo|unknown|empty|no|"
    r"(?:none|nothing)(?: yet| so far| to report| noted| recorded)?|not yet|"
    r"no (?:errors?|issues?|problems?|open questions?|questions?|next steps?|variables?|"
    r"files?|results?|data)(?: yet| so far)?|-+|\.+|…)[)\]]?[.!]?$"
)
_GENERIC_TITLES = frozenset(
    {
        "checkpoint",
        "summary",
        "conversation summary",
        "conversation checkpoint",
        "checkpoint of the conversation",
        "summary of the conversation",
        "compacted summary",
        "compacted-summary",
    }
)
_TAG = re.compile(r"</?compacted-summary>|^\s*```[\w-]*\s*$", re.MULTILINE)
_WORD = re.compile(r"[^\W_]+")
_CJK_START = 0x2E80


def _norm_line(line: str) -> str:
    s = line.strip()
    while True:
        t = _MARKS.sub("", s)
        if t == s:
            break
        s = t
    s = s.strip().strip("*_`").strip().rstrip(":").strip()
    return " ".join(s.split()).lower()


def _norm_text(text: str) -> str:
    return " ".join(text.split()).lower()


@dataclass(frozen=True, slots=True)
class _Scaffold:
    lines: frozenset[str]
    text: str
    """All of it, whitespace collapsed and lowercased."""


def _scaffold(texts: Sequence[str]) -> _Scaffold:
    texts = [_TAG.sub("", t) for t in texts]
    lines = {_norm_line(ln) for t in texts for ln in t.splitlines()}
    lines.discard("")
    return _Scaffold(frozenset(lines), _norm_text("\n".join(texts)))


def content_of(text: str, scaffold: Sequence[str] = ()) -> str:
    """``text`` with the scaffolding struck out: the lines of ``scaffold`` (the instruction, the
    checkpoint framing), generic titles, filler lines, tags; list and heading marks removed."""
    sc = _scaffold(scaffold)
    kept: list[str] = []
    for line in _TAG.sub("", text).splitlines():
        norm = _norm_line(line)
        if (
            not norm
            or norm in sc.lines
            or norm in _GENERIC_TITLES
            or _FILLER.match(norm)
            or (len(norm) >= 12 and norm in sc.text)
        ):
            continue
        kept.append(norm)
    return "\n".join(kept)


def word_count(text: str) -> int:
    """Words of ``text``; a run of CJK characters counts one per two characters."""
    n = 0
    for m in _WORD.finditer(text):
        w = m.group()
        n += max(1, len(w) // 2) if ord(w[0]) >= _CJK_START else 1
    return n


# --- facts -------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\d.,_])(?:\d{1,3}(?:,\d{3})+|\d{1,3}(?:_\d{3})+|\d+)(?:\.\d+)?")
_QUOTED = re.compile(
    r"\"([^\"\n]{2,120})\"|“([^”\n]{2,120})”|‘([^’\n]{2,120})’|`([^`\n]{2,120})`|"
    r"(?<![\w'])'([^'\n]{2,120})'(?![\w'])"
)
_TOKEN = re.compile(r"[^\W\d_][\w'’.\-]*\w|[^\W\d_]")
_FILE = re.compile(r"[\w\-]{2,}(?:\.[\w\-]+)*\.[A-Za-z][A-Za-z0-9]{0,4}")
_PRONOUNS = frozenset({"i", "i'm", "i've", "i'd", "i'll", "i’m", "i’ve", "i’d", "i’ll"})
_SQL_CREATE = re.compile(
    r"\bcreate\s+(?:or\s+replace\s+)?(?:temp(?:orary)?\s+)?(?:table|view)\s+"
    r"(?:if\s+not\s+exists\s+)?[\"`]?([\w.]+)",
    re.IGNORECASE,
)


def number_key(raw: str) -> str:
    """A number as compared: separators dropped, leading zeros and a fraction's trailing zeros cut
    (``1,200`` → ``1200``, ``3.50`` → ``3.5``, ``007`` → ``7``)."""
    s = raw.replace(",", "").replace("_", "")
    whole, dot, frac = s.partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    return f"{whole}.{frac}" if dot and frac else whole


def numbers_in(text: str) -> list[str]:
    """The numbers of ``text`` worth checking (two characters or more), normalised."""
    out: list[str] = []
    for m in _NUMBER.finditer(text):
        key = number_key(m.group())
        if len(key) >= 2:
            out.append(key)
    return out


def _shaped(token: str) -> bool:
    """A word shaped like an identifier or a file: letters with digits, an underscore, a capital
    inside it, or a name with an extension."""
    has_alpha = any(c.isalpha() for c in token)
    if has_alpha and any(c.isdigit() for c in token):
        return not re.fullmatch(r"\d+(?:st|nd|rd|th|s)", token, re.IGNORECASE)
    if "_" in token.strip("_"):
        return True
    if any(c.isupper() for c in token[1:]) and any(c.islower() for c in token):
        return True
    return bool(_FILE.fullmatch(token))


def _mid_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` follows another word of its sentence on the same line."""
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    if i < 0 or i == start - 1:
        return False
    return text[i].isalnum() or text[i] in ",;)%"


def names_in(text: str) -> list[str]:
    """The names ``text`` gives (module docstring): quoted text, capitalised words inside a
    sentence, identifier- and file-shaped words."""
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    for m in _QUOTED.finditer(text):
        quoted = next(g for g in m.groups() if g is not None).strip()
        spans.append(m.span())
        if len(quoted) >= 2:
            out.append(quoted)
    for m in _TOKEN.finditer(text):
        if any(a <= m.start() < b for a, b in spans):
            continue  # a word of a quote: the quote is the fact
        token = m.group().rstrip(".-'’")
        for suffix in ("'s", "’s"):
            token = token.removesuffix(suffix)
        if len(token) < 2 or token.lower() in _PRONOUNS:
            continue
        capitalised = token[0].isupper() and any(c.islower() for c in token)
        if _shaped(token) or (capitalised and _mid_sentence(text, m.start())):
            out.append(token)
    return out


def _top_level(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements that run at the namespace's level: into ``if``/``with``/``try``/loops, never
    into a function or class body."""
    for node in body:
        yield node
        match node:
            case ast.If() | ast.For() | ast.AsyncFor() | ast.While():
                yield from _top_level(node.body)
                yield from _top_level(node.orelse)
            case ast.With() | ast.AsyncWith():
                yield from _top_level(node.body)
            case ast.Try() | ast.TryStar():
                yield from _top_level(node.body)
                for handler in node.handlers:
                    yield from _top_level(handler.body)
                yield from _top_level(node.orelse)
                yield from _top_level(node.finalbody)
            case _:
                pass


def _targets(node: ast.expr) -> Iterator[str]:
    match node:
        case ast.Name():
            yield node.id
        case ast.Tuple() | ast.List():
            for elt in node.elts:
                yield from _targets(elt)
        case ast.Starred():
            yield from _targets(node.value)
        case ast.Subscript(slice=ast.Constant(value=str() as key)):
            yield key  # df["total"] = …: a column
        case _:
            pass


def defined_in(code: str) -> list[str]:
    """The names ``code`` defines at the top level, and the files and tables it names."""
    out: list[str] = []
    source = "\n".join(
        "" if ln.lstrip().startswith(("%", "!")) else ln for ln in code.splitlines()
    )  # IPython magics and shell lines
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        for m in re.finditer(r"^([A-Za-z_]\w*)\s*=(?!=)", source, re.MULTILINE):
            out.append(m.group(1))
        strings = re.findall(r"[\"']([^\"'\n]+)[\"']", source)
    else:
        for node in _top_level(tree.body):
            match node:
                case ast.Assign():
                    for target in node.targets:
                        out.extend(_targets(target))
                case ast.AnnAssign() | ast.AugAssign():
                    out.extend(_targets(node.target))
                case ast.FunctionDef() | ast.AsyncFunctionDef() | ast.ClassDef():
                    out.append(node.name)
                case _:
                    pass
        strings = [
            n.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]
    for s in strings:
        name = s.strip().replace("\\", "/").rsplit("/", 1)[-1]
        if " " not in s.strip() and _FILE.fullmatch(name):
            out.append(name)
        out.extend(m.group(1).rsplit(".", 1)[-1] for m in _SQL_CREATE.finditer(s))
    return [n for n in out if len(n) >= 2 and not n.startswith("_")]


def _code_of(block: ToolCallBlock) -> str | None:
    """The code of a ``python`` call (its ``code`` argument), else ``None``."""
    if block.name != "python":
        return None
    try:
        args: JsonValue = json.loads(block.arguments)
    except ValueError:
        return None
    code = args.get("code") if isinstance(args, dict) else None
    return code if isinstance(code, str) else None


def _user_text(msg: Message) -> str:
    """What the user typed: the cell's raw text when a ``$`x``` reference inserted values."""
    source = msg.source
    if isinstance(source, UserSource):
        cell = source.extra.get("cell")
        raw = cell.get("raw") if isinstance(cell, dict) else None
        if isinstance(raw, str):
            return raw
    return msg.text()


def _all_text(msg: Message) -> Iterator[str]:
    for block in msg.content:
        if isinstance(block, TextBlock):
            yield block.text
        elif isinstance(block, ToolCallBlock):
            yield block.arguments
        elif isinstance(block, ToolResultBlock):
            yield from (b.text for b in block.content if isinstance(b, TextBlock))


_STEM_WORD = re.compile(r"[A-Za-z]{4,}")


def stem(word: str) -> str:
    """A word as the topic check compares it: its first five letters, lowercased."""
    return word[:5].lower()


def _stems(text: str) -> Counter[str]:
    return Counter(stem(w) for w in _STEM_WORD.findall(text))


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    seen: dict[str, str] = {}
    for item in items:
        seen.setdefault(item.lower(), item)
    return tuple(seen.values())


@dataclass(slots=True)
class _Facts:
    numbers: list[str] = field(default_factory=list[str])
    names: list[str] = field(default_factory=list[str])
    defined: list[str] = field(default_factory=list[str])
    stems: Counter[str] = field(default_factory=Counter[str])

    def add(self, other: Digest) -> None:
        self.numbers.extend(other.numbers)
        self.names.extend(other.names)
        self.defined.extend(other.defined)
        self.stems.update(other.stems)

    def digest(self, tokens: int) -> Digest:
        return Digest(
            numbers=_unique(self.numbers),
            names=_unique(self.names),
            defined=_unique(self.defined),
            stems=dict(self.stems),
            tokens=tokens,
        )


def _read(msg: Message, facts: _Facts) -> None:
    if isinstance(msg.source, UserSource):
        said = _user_text(msg)
        facts.numbers.extend(numbers_in(said))
        facts.names.extend(names_in(said))
    for block in msg.content:
        if isinstance(block, ToolCallBlock) and (code := _code_of(block)) is not None:
            facts.defined.extend(defined_in(code))
    for text in _all_text(msg):
        facts.stems.update(_stems(text))


def digest(messages: Iterable[Message], tokens: int) -> Digest:
    """The facts of ``messages`` (a range of ``tokens``), read as the module docstring says; plugin
    messages (runtime snapshots, notes, checkpoints) give none — ``range_digest`` follows a
    checkpoint back to what it replaced."""
    facts = _Facts()
    for msg in messages:
        if not isinstance(msg.source, PluginSource):
            _read(msg, facts)
    return facts.digest(tokens)


def carried(facts: Digest, text: str) -> Digest:
    """The facts of ``facts`` that ``text`` still carries (what a checkpoint kept), with its words."""
    seen = _Seen(text)
    return Digest(
        numbers=tuple(f for f in facts.numbers if seen.has("numbers", f)),
        names=tuple(f for f in facts.names if seen.has("names", f)),
        defined=tuple(f for f in facts.defined if seen.has("defined", f)),
        stems=dict(_stems(text)),
        tokens=facts.tokens,
    )


_NODES: weakref.WeakKeyDictionary[Session, dict[int, Digest]] = weakref.WeakKeyDictionary()
"""Each session's surface nodes read so far (events never change, so what was read stays true)."""


def range_digest(session: Session, seqs: Sequence[int], tokens: int) -> Digest:
    """The facts of ``session``'s surface nodes ``seqs`` (a range of ``tokens``): ``digest`` of
    each message, and for an earlier checkpoint, the facts of what it replaced that it still
    carries (followed back through every earlier compaction; read once per session)."""
    memo = _NODES.setdefault(session, {})
    events = session.events
    todo: set[int] = set()
    stack = [s for s in seqs if s not in memo]
    while stack:  # what must be read first: the nodes every checkpoint stands for, recursively
        seq = stack.pop()
        if seq in todo or seq in memo:
            continue
        todo.add(seq)
        if _is_checkpoint(session, seq):
            stack.extend(events[seq].source_event_seqs or ())
    for seq in sorted(todo):  # a checkpoint's sources are earlier events: read by now
        msg = session.projection(seq)
        if msg is None:
            memo[seq] = Digest()
        elif _is_checkpoint(session, seq):
            inner = _Facts()
            for source in events[seq].source_event_seqs or ():
                inner.add(memo[source])
            memo[seq] = carried(inner.digest(0), summary_inner(msg))
        elif isinstance(msg.source, PluginSource):
            memo[seq] = Digest()
        else:
            one = _Facts()
            _read(msg, one)
            memo[seq] = one.digest(0)
    facts = _Facts()
    for seq in seqs:
        facts.add(memo[seq])
    return facts.digest(tokens)


def _is_checkpoint(session: Session, seq: int) -> bool:
    msg = session.projection(seq)
    return msg is not None and isinstance(msg.source, PluginSource) and msg.source.plugin == PLUGIN


# --- the check ---------------------------------------------------------------------------------------


class _Seen:
    """A text, indexed for the fact matcher."""

    __slots__ = ("lower", "numbers")

    def __init__(self, text: str) -> None:
        self.lower = _norm_text(text)
        self.numbers = set(numbers_in(text))

    def has(self, kind: Kind, fact: str) -> bool:
        if kind == "numbers":
            return fact in self.numbers
        phrase = _norm_text(fact)
        if re.search(rf"(?<!\w){re.escape(phrase)}(?!\w)", self.lower):
            return True
        words = {w for w in _WORD.findall(phrase) if len(w) >= 3}
        if len(words) < 4:  # a long quote may be paraphrased: most of its words will do
            return False
        found = sum(1 for w in words if re.search(rf"(?<!\w){re.escape(w)}(?!\w)", self.lower))
        return found * 3 >= len(words) * 2


_COMMON_WORDS: Final = """
    about above across after again against all also although always among another anything
    around away back been before being below between both cannot could does doing done down
    during each either else even ever every from further given gives have having here how
    into itself just keep kept last later least less like made make many more most much must
    near need needs never next none nothing once only other others over same several should
    since some something such than that their them then there these they this those though
    through thus till under until upon very want wanted wants were what when where whether
    which while whom whose will with within without would your yours
    user users assistant asked asks asking request requested requests said says told tell
    mentioned provided gave earlier previous previously current currently still conversation
    summary summarised summarized checkpoint goal goals notebook state errors error resolved
    open questions question step steps session model message messages turn turns work working
    discussed explained answered answer answers going continue continued follow following
"""
_COMMON: Final = frozenset(_COMMON_WORDS.split())
"""Words of four letters or more that say nothing of a conversation's topic: common English, and
what any summary of a conversation says (user, asked, question, …)."""


def topics_of(facts: Digest, scaffold: Sequence[str] = ()) -> list[str]:
    """The range's main words: its ``TOPICS`` most frequent stems, common and summary vocabulary
    and the scaffolding's words left out."""
    left_out = {stem(w) for w in _COMMON} | set(_stems("\n".join(scaffold)))
    ranked = sorted(
        ((n, s) for s, n in facts.stems.items() if s not in left_out), key=lambda p: (-p[0], p[1])
    )
    return [s for _, s in ranked[:TOPICS]]


def unfit(text: str, facts: Digest, scaffold: Sequence[str] = ()) -> Unfit | None:
    """Why the summary ``text`` of a range whose facts are ``facts`` is unfit to replace it, or
    ``None`` (module docstring). ``scaffold``: the texts whose lines are not content (the
    instruction the summary answered, the checkpoint framing)."""
    content = content_of(text, scaffold)
    words = word_count(content)
    least = min_words(facts.tokens)
    if words == 0:
        return Unfit(check="content", reason="only the instruction's headings, nothing under them")
    if words < least:
        return Unfit(
            check="content",
            reason=(
                f"{words} word{'s' if words != 1 else ''} beyond the instruction's headings, fewer "
                f"than the {least} a summary of ~{facts.tokens:,} tokens needs"
            ),
        )
    echo = _Seen("\n".join(scaffold))
    seen = _Seen(content)
    lost: list[str] = []
    for kind, (one, many) in KINDS.items():
        pool = [f for f in facts.facts(kind) if not echo.has(kind, f)]
        need = needed(len(pool))
        kept = [f for f in pool if seen.has(kind, f)]
        if len(kept) >= need:
            continue
        missing = ", ".join(_show(f) for f in pool if f not in kept)
        missing = missing if len(missing) <= 80 else missing[:79].rstrip(", ") + "…"
        n = len(pool)
        if kept:
            lost.append(f"kept {len(kept)} of the {n} {many}, fewer than {need} (lost {missing})")
        else:
            lost.append(
                f"lost the {one} ({missing})" if n == 1 else f"lost all {n} {many} ({missing})"
            )
    if lost:
        return Unfit(check="facts", reason="it " + "; ".join(lost))
    topics = topics_of(facts, scaffold)
    said = _STEM_WORD.findall(content)
    if topics and len(said) >= TOPIC_MIN_WORDS and not {stem(w) for w in said} & set(topics):
        n = len(topics)
        most = f"the {n} words it uses most" if n > 1 else "the word it uses most"
        return Unfit(check="topic", reason=f"not about this conversation: none of {most}")
    return None


def _show(fact: str) -> str:
    fact = " ".join(fact.split())
    return fact if len(fact) <= 24 else fact[:23] + "…"
