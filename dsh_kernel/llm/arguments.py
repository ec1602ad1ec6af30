"""The one parser of a tool call's argument text (the pipeline, the scheduler and the cards use it).

``parse_tool_arguments(raw)``: blank → ``{}``; NaN, Infinity and overflowing numbers are refused;
nesting deeper than ``MAX_ARGUMENT_DEPTH`` (64) arrays/objects is refused *before* ``json.loads``
sees it (``ArgumentsTooDeep``), because a model can send thousands of levels and the C decoder then
raises ``RecursionError``, which is not a ``ValueError``. Every refusal is a ``ValueError`` saying
what is wrong and where.
"""

from __future__ import annotations

import json
import math
import re
from typing import Final

from dsh_kernel.jsonvalue import JsonValue

MAX_ARGUMENT_DEPTH: Final = 64
"""How deeply a tool call's arguments may nest arrays and objects (``{"a": [1]}`` is 2 deep)."""

# A JSON string (escapes included), or one bracket. Brackets inside strings are skipped with the string.
_STRUCTURE = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class ArgumentsTooDeep(ValueError):
    """The argument text nests more than ``MAX_ARGUMENT_DEPTH`` levels."""


def nesting_exceeds(raw: str, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """Whether JSON text ``raw`` opens more than ``limit`` arrays/objects at once (a linear scan that
    stops at the first level too deep; text that is not JSON is scanned the same way)."""
    if raw.count("[") + raw.count("{") <= limit:
        return False
    depth = 0
    for m in _STRUCTURE.finditer(raw):
        c = m.group()
        if c == "[" or c == "{":
            depth += 1
            if depth > limit:
                return True
        elif c == "]" or c == "}":
            depth -= 1
    return False


def parse_tool_arguments(raw: str) -> JsonValue:
    """Parse a call's argument text (see the module docstring); raises ``ValueError``."""
    if not raw.strip():
        return {}
    if nesting_exceeds(raw):
        raise ArgumentsTooDeep(f"the arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels")

    def no_constant(name: str) -> JsonValue:
        raise ValueError(f"{name} is not valid JSON")

    def finite(text: str) -> float:
        f = float(text)
        if not math.isfinite(f):
            raise ValueError(f"number {text[:40]} is out of range")
        return f

    try:
        value: JsonValue = json.loads(raw, parse_constant=no_constant, parse_float=finite)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:  # belt and braces: the scan above should make this unreachable
        raise ArgumentsTooDeep("the arguments are nested too deeply") from exc
    return value


# --- request pieces -------------------------------------------------------------------------------
