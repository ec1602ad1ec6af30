"""``text_delta`` and ``reasoning_delta`` build the very values the chunks' constructors build."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from dsh_kernel.llm.codec import chunk_from_json, chunk_to_json
from dsh_kernel.llm.types import ReasoningDeltaChunk, TextDeltaChunk, reasoning_delta, text_delta


@pytest.mark.parametrize("text", ["", "tok ", "é 🙂\x00"])
def test_the_builders_make_the_constructors_values(text: str) -> None:
    for fast, slow in (
        (text_delta(3, text), TextDeltaChunk(index=3, text=text)),
        (reasoning_delta(3, text), ReasoningDeltaChunk(index=3, text=text)),
    ):
        assert type(fast) is type(slow)
        assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
        assert chunk_to_json(fast) == chunk_to_json(slow)
        assert chunk_from_json(chunk_to_json(fast)) == slow
        assert pickle.loads(pickle.dumps(fast)) == slow
        assert copy.copy(fast) == slow
        assert dataclasses.replace(fast, index=4) == dataclasses.replace(slow, index=4)
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.text = "changed"  # type: ignore[misc]
