"""Calibrated token counts: the one estimate (``llm.estimate``, ``chars / 4``) scaled to what a
route's server really counts.

The estimate runs low against real tokenizers and chat templates — 16–19 % under llama.cpp's prompt
counts on ordinary sessions (the template wraps every message and adds a tool preamble), ~31 % under
on code — so a warning, a compaction or a budget measured by it comes late. A ``Calibration`` turns
the *raw* estimate of a request into the count the server would give::

    tokens(raw) = ceil(raw × ratio) + allowance        (a whole request, estimated from scratch)
    delta(raw)  = ceil(raw × ratio)                    (history added after a measured anchor)

``ratio`` and ``allowance`` are learned per route (provider id, endpoint, model) by ``Calibrations``,
from the best source there is:

1. **usage** — the prompt counts the server reported (input + cache reads + cache writes) against the
   raw estimate of the same requests (``fit``): with requests of enough different sizes, a robust line
   (Theil–Sen: the median of the pairwise slopes, then the median intercept) whose intercept is the
   template's fixed part — its tool preamble, its wrapping of the system prompt — the *allowance*;
   until then (or when the line is implausible) the median ratio alone, the allowance ``0``.
2. **tokenizer** — a local server that can count (llama.cpp's ``/tokenize``, llama-cpp-python's
   ``/extras/tokenize``; ``llm.providers.tokenizer``), for a server that reports no usage (llama-cpp-python
   never does on a stream): the request's own text counted by the server's tokenizer, plus the
   template's share, which no tokenizer endpoint tells. That share is *learned* once per server
   and model (``llm.providers.tokenizer.probe_template``): the same two short messages answered
   with one token, not streamed (the server then reports its prompt count), without and with one
   small tool — the difference, less the tool's own text, is the template's tool preamble (the
   *allowance*), or shows that the template leaves the tools out (SmolLM2's does: its tools' text
   is then not counted at all). ``TEMPLATE_MESSAGE_TOKENS`` a message is a measured constant
   (ChatML's wrapping); when the probe cannot be made, the preamble and the per-request share are
   the constants measured against llama-cpp-python with Qwen2.5's template.
3. **none** — the estimate as it is (``IDENTITY``).

**Proxy-made usage.** A proxy may make a usage up when the server behind it sent none: LiteLLM
counts the prompt itself (about half of llama.cpp's real count was seen). Such a usage cannot be told
apart on the wire from one it passed through; what can be told is that it came through a proxy
(``TokenUsage.via``, from the proxy's response headers) and whether it is plausible: a prompt count
below ``PROXY_FLOOR`` × the raw estimate through a proxy is taken as the proxy's own
(``made_up``) — logged as such on its ``assistant/message`` (``usageOrigin: "proxy"``), never an
anchor of the meter, never a sample. A made-up count at or above the floor passes for the server's
(nothing on the wire tells otherwise), and a real count below it through a proxy (a template that
drops most of the request) is wrongly doubted: the rule errs towards the estimate.

**In the log.** The calibration a request was measured with is written on its ``request/context``
(``tokenRatio``, ``tokenAllowance``, ``tokenCalibration``: the source), logged
whenever it changes (``agent.request.envelope``), so every estimated count is explained from the log
alone — the raw estimate is the log's (the estimate rule over the surface and the header), the factors
are the event's — and the store's views compute the same figure in SQL (``requests.input_tokens`` of
an estimated request). Pure functions and plain state; nothing here does I/O.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

from dsh_kernel.jsonvalue import JsonObject

CalibrationSource: TypeAlias = Literal["usage", "tokenizer", "none"]

MAX_SAMPLES: Final = 24
"""Reported requests a route's fit reads (the latest)."""
SPREAD: Final = 0.25
"""A line is fitted once the raw sizes span this fraction of the largest (else the ratio alone),
and only pairs that far apart give a slope."""
RATIO_BOUNDS: Final = (0.05, 20.0)
"""A sample whose ratio lies outside is not a count of this request (ignored)."""
SLOPE_BOUNDS: Final = (0.25, 4.0)
"""A fitted slope outside is implausible: the ratio alone is used."""
PROXY_FLOOR: Final = 0.8
"""Through a proxy, a prompt count under this fraction of the raw estimate is the proxy's own."""
TEMPLATE_MESSAGE_TOKENS: Final = 5
"""What a llama.cpp-family chat template adds per message (ChatML: ``<|im_start|>``, the role, a
newline, ``<|im_end|>``, a newline), plus the generation prompt once (``TEMPLATE_PROMPT_TOKENS``)."""
TEMPLATE_PROMPT_TOKENS: Final = 3
TEMPLATE_TOOL_TOKENS: Final = 100
"""The tool preamble of a llama.cpp-family template (Qwen2.5's "# Tools … <tools></tools> … For each
function call …" around the tool list), measured against llama-cpp-python."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Calibration:
    """``tokens(raw) = ceil(raw × ratio) + allowance`` (module docstring)."""

    ratio: float = 1.0
    allowance: int = 0
    source: CalibrationSource = "none"
    samples: int = field(default=0, compare=False)
    """Requests (usage) or counts (tokenizer) it was learned from (not logged, not compared)."""

    def tokens(self, raw: int) -> int:
        """A whole request whose raw estimate is ``raw``."""
        return max(0, math.ceil(raw * self.ratio) + self.allowance)

    def delta(self, raw: int) -> int:
        """History of raw estimate ``raw`` added after a measured anchor (no allowance: the anchor
        holds the template's fixed part)."""
        return math.ceil(raw * self.ratio)

    @property
    def calibrated(self) -> bool:
        return self.source != "none"

    @staticmethod
    def from_context(data: JsonObject) -> Calibration:
        """The calibration a ``request/context`` event records (``IDENTITY`` when it has none or a
        field is malformed)."""
        ratio, allowance = data.get("tokenRatio"), data.get("tokenAllowance")
        source = data.get("tokenCalibration")
        if (
            not isinstance(ratio, int | float)
            or isinstance(ratio, bool)
            or not isinstance(allowance, int)
            or isinstance(allowance, bool)
            or source not in ("usage", "tokenizer")
            or ratio <= 0
        ):
            return IDENTITY
        return Calibration(
            ratio=float(ratio),
            allowance=allowance,
            source="usage" if source == "usage" else "tokenizer",
        )

    def describe(self) -> str:
        """``"×1.17 +96, from 3 reported requests"`` (``%agent status``); ``""`` for none."""
        if not self.calibrated:
            return ""
        extra = f" {self.allowance:+,}" if self.allowance else ""  # negative: tools left out
        if self.source == "usage":
            n = self.samples
            origin = f"from {n} request{'s' if n != 1 else ''} the server counted"
        else:
            origin = "from the server's tokenizer"
        return f"×{self.ratio:g}{extra}, {origin}"


IDENTITY: Final = Calibration()


def _plausible(raw: int, reported: int) -> bool:
    low, high = RATIO_BOUNDS
    return raw > 0 and reported > 0 and low <= reported / raw <= high


def fit(samples: Sequence[tuple[int, int]]) -> Calibration:
    """The calibration of ``(raw estimate, reported prompt tokens)`` samples (module docstring)."""
    pts = [(r, t) for r, t in samples if _plausible(r, t)]
    if not pts:
        return IDENTITY
    n = len(pts)
    ratio = round(statistics.median(t / r for r, t in pts), 4)
    raws = [r for r, _ in pts]
    largest = max(raws)
    if n >= 3 and largest - min(raws) >= SPREAD * largest:
        slopes = [
            (t2 - t1) / (r2 - r1)
            for i, (r1, t1) in enumerate(pts)
            for r2, t2 in pts[i + 1 :]
            if abs(r2 - r1) >= SPREAD * max(r1, r2)
        ]
        if slopes:
            slope = round(statistics.median(slopes), 4)
            low, high = SLOPE_BOUNDS
            if low <= slope <= high:
                intercept = round(statistics.median(t - slope * r for r, t in pts))
                if 0 <= intercept <= statistics.median(t for _, t in pts) / 2:
                    return Calibration(ratio=slope, allowance=intercept, source="usage", samples=n)
    return Calibration(ratio=ratio, allowance=0, source="usage", samples=n)


def reported_prompt(usage: JsonObject) -> int:
    """The prompt tokens a logged usage reports: input, cache reads and cache writes."""
    total = 0
    for key in ("inputTokens", "cacheReadTokens", "cacheWriteTokens"):
        value = usage.get(key)
        total += value if isinstance(value, int) and not isinstance(value, bool) else 0
    return total


def made_up(usage: JsonObject, raw: int) -> bool:
    """Whether a usage that came through a proxy (``via``) is the proxy's own count (module
    docstring): its prompt under ``PROXY_FLOOR`` × the raw estimate ``raw``."""
    via = usage.get("via")
    return isinstance(via, str) and bool(via) and reported_prompt(usage) < PROXY_FLOOR * raw


def tokenizer_calibration(
    *,
    raw: int,
    raw_tools: int = 0,
    text_tokens: int,
    tool_tokens: int,
    messages: int,
    prompt: int = TEMPLATE_PROMPT_TOKENS,
    tools_rendered: bool = True,
    tool_preamble: int = TEMPLATE_TOOL_TOKENS,
    samples: int = 1,
) -> Calibration:
    """The calibration of a request of raw estimate ``raw`` (``raw_tools`` of it the tool list's)
    whose messages' text the server's tokenizer counted as ``text_tokens`` over ``messages``
    messages (the system prompt among them) and its tools' text as ``tool_tokens`` (``0``: none
    offered). The ratio is the messages' — their text, the template's share per message
    (``TEMPLATE_MESSAGE_TOKENS``) and per request (``prompt``) against their raw estimate — since
    it is the messages that grow; the tool list is fixed, so its difference from what the ratio
    makes of it is the allowance: the tools' text and the template's ``tool_preamble`` when the
    template renders them, nothing when it leaves them out (``tools_rendered=False``: the
    allowance is then negative). The template's figures are what
    ``llm.providers.tokenizer.probe_template`` measured, else the constants (module docstring)."""
    content = raw - raw_tools
    if content <= 0 or text_tokens <= 0:
        return IDENTITY
    ratio = round((text_tokens + TEMPLATE_MESSAGE_TOKENS * messages + prompt) / content, 4)
    tools = tool_tokens + tool_preamble if tool_tokens and tools_rendered else 0
    return Calibration(
        ratio=ratio,
        allowance=tools - math.ceil(raw_tools * ratio),
        source="tokenizer",
        samples=samples,
    )


Route: TypeAlias = tuple[str, str, str]
"""``(provider id, endpoint, model)``."""


class Calibrations:
    """What the routes an agent (or a kernel's agents) talk to count, learned as they answer
    (module docstring). Kept across sessions by the kernel, like the context windows: a new
    session starts from what the last one learned, and its log says so."""

    def __init__(self) -> None:
        self._samples: dict[Route, deque[tuple[int, int]]] = {}
        self._usage: dict[Route, Calibration] = {}
        self._tokenizer: dict[Route, Calibration] = {}

    def current(self, route: Route) -> Calibration:
        """The calibration of ``route`` now: from usage when the server has reported any, else from
        its tokenizer, else ``IDENTITY``."""
        return self._usage.get(route) or self._tokenizer.get(route) or IDENTITY

    def observe(self, route: Route, raw: int, usage: JsonObject) -> bool:
        """Learn from a request of raw estimate ``raw`` answered with ``usage``; whether it was
        taken (a proxy-made or implausible usage is not)."""
        reported = reported_prompt(usage)
        if made_up(usage, raw) or not _plausible(raw, reported):
            return False
        samples = self._samples.setdefault(route, deque(maxlen=MAX_SAMPLES))
        samples.append((raw, reported))
        self._usage[route] = fit(list(samples))
        return True

    def counted(self, route: Route, calibration: Calibration) -> None:
        """Keep a tokenizer's calibration of ``route`` (the latest request it counted)."""
        if calibration.calibrated:
            self._tokenizer[route] = calibration

    def learned_from_usage(self, route: Route) -> bool:
        return route in self._usage

    def forget(self, routes: Iterable[Route] | None = None) -> None:
        """Forget what was learned (all routes by default)."""
        for r in list(routes) if routes is not None else list(self._usage) + list(self._tokenizer):
            self._samples.pop(r, None)
            self._usage.pop(r, None)
            self._tokenizer.pop(r, None)
