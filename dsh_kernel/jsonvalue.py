"""The JSON vocabulary shared by every layer.

``JsonValue`` is what may appear in event data, tool arguments, tool values and presentation meta.
Lossless checking (no NaN, no infinities, no ``-0.0``, ``str`` keys only, no tuples/sets/bytes) lives in
``dsh_kernel.session.codec`` because the log is where it is enforced.
"""

from __future__ import annotations

from typing import TypeAlias

JsonScalar: TypeAlias = bool | int | float | str | None
JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
