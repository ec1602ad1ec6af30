"""Capture what running code writes and displays, under a byte budget.

``OutputCapture(caps, shell=…)`` is a context manager. While it is active:

- ``sys.stdout`` / ``sys.stderr`` are replaced by write-only text streams feeding one ``OutputSink``;
- with an IPython shell, ``shell.display_pub`` and ``sys.displayhook`` are swapped for capturing
  ones (the way ``IPython.utils.capture.capture_output`` does), so ``display()``, ``update_display``
  and ``clear_output`` land in the sink instead of the frontend. Without a shell, ``display()``
  prints its objects' text, which the stream capture keeps.

The sink keeps nbformat-style outputs in emission order (consecutive writes to one stream are merged)
and counts every byte against ``caps.stored_bytes`` (UTF-8 text; display payloads by their JSON text;
64 bytes per new output entry, so many tiny outputs cannot grow memory without bound). Beyond the
budget nothing more is stored, only counted: memory stays bounded whatever the code prints, and
each truncated stream ends with ``truncation_marker(dropped)``. A display output that does not fit
keeps the MIME types that do (``text/plain`` first); once the budget is spent, later ones are
counted and summarised by one placeholder output. When ``caps.stop_after_bytes`` of output have
been written in total, writes from the running thread raise ``OutputLimitExceeded`` (a
``BaseException``, so ``except Exception`` in user code does not swallow it).

Images keep the live object's description: with a shell, ``shell.display_formatter.format`` is
wrapped for the capture (an instance attribute over the method, removed on exit) so that each
bundle made from a matplotlib figure, a PIL image or an ``IPython.display.Image`` gets its
description in its metadata (``runtime.figures.FigureTracker.annotate``). ``sweep()`` (the runner
calls it once the code has run) shows and closes the figures the run left open (see there).

Not captured: writes to file descriptors 1/2 from C code or subprocesses, and handlers (e.g.
``logging.StreamHandler``) that kept a reference to the original stream.

Published bundles are made lossless JSON by ``runtime.mime.json_bundle``.

**Live output.** ``OutputCapture(…, tap=…)`` also hands every write, display and clear to an
``OutputTap`` as it happens, on the thread that made it (in the kernel the main thread, where the
agent's code runs), before the budget is applied: a live view can show the tail of a long run while
the sink keeps its head. The tap must be quick (it is on the code's write path) and must not print.
A tap that raises an ``Exception`` is dropped for the rest of the run (logged once); the code and the
capture go on. A ``BaseException`` from it (the user's interrupt arriving meanwhile) reaches the code.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Protocol, cast

from dsh_kernel.jsonvalue import JsonObject
from dsh_kernel.runtime.figures import FigureTracker
from dsh_kernel.runtime.mime import format_value, json_bundle, payload_size, to_json_value
from dsh_kernel.runtime.text import (
    clean_text,
    format_size,
    truncation_marker,
    utf8_len,
    utf8_prefix,
)
from dsh_kernel.runtime.types import OutputCaps

_log = logging.getLogger(__name__)
_UNSET: Final = object()

ENTRY_OVERHEAD: Final = 64
"""Bytes charged for every new output entry, on top of its content."""


class OutputLimitExceeded(BaseException):
    """Raised into the running code once it has written ``stop_after_bytes`` of output."""


class OutputTap(Protocol):
    """Hears a run's outputs as they are made (see "Live output" in the module docstring)."""

    def stream(self, name: str, text: str) -> None:
        """``text`` written to ``name`` (``stdout`` or ``stderr``)."""
        ...

    def display(
        self,
        data: JsonObject,
        metadata: JsonObject,
        *,
        display_id: str | None,
        update: bool,
        output_type: str,
    ) -> None:
        """A display (``update``: a new version of the display ``display_id``)."""
        ...

    def clear(self, *, wait: bool) -> None:
        """``clear_output`` (``wait``: at the next output)."""
        ...


# -- the sink ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Captured:
    """What a capture kept: ``outputs`` in order, each stream's text, and the bytes dropped."""

    outputs: tuple[JsonObject, ...]
    stdout: str
    stderr: str
    dropped_bytes: int


class _Stream:
    __slots__ = ("buf", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.buf = io.StringIO()


class OutputSink:
    """Ordered, budgeted storage for one run's outputs. Thread-safe."""

    def __init__(
        self, caps: OutputCaps, *, run_thread: int | None = None, tap: OutputTap | None = None
    ) -> None:
        self._caps = caps
        self._tap = tap
        self._run_thread = run_thread if run_thread is not None else threading.get_ident()
        self._lock = threading.Lock()
        self._entries: list[_Stream | JsonObject] = []
        self._by_display_id: dict[str, JsonObject] = {}
        self._used = 0
        self._written = 0
        self._dropped_stream = {"stdout": 0, "stderr": 0}
        self._dropped_display_bytes = 0
        self._dropped_displays = 0
        self._clear_pending = False

    def _room(self) -> int:
        return self._caps.stored_bytes - self._used

    def _count_written(self, n: int) -> None:
        self._written += n
        limit = self._caps.stop_after_bytes
        if (
            limit is not None
            and self._written > limit
            and threading.get_ident() == self._run_thread
        ):
            raise OutputLimitExceeded(f"the code wrote more than {format_size(limit)} of output")

    def _tap_failed(self) -> None:
        self._tap = None
        _log.warning("the live output tap failed; the run goes on without it", exc_info=True)

    def write(self, name: str, text: str) -> None:
        if not text:
            return
        tap = self._tap
        if tap is not None:
            try:
                tap.stream(name, text)
            except Exception:
                self._tap_failed()
        with self._lock:
            self._apply_pending_clear()
            size = utf8_len(text)
            last = self._entries[-1] if self._entries else None
            stream = last if isinstance(last, _Stream) and last.name == name else None
            room = self._room() - (0 if stream is not None else ENTRY_OVERHEAD)
            if room > 0:
                prefix = text if size <= room else utf8_prefix(text, room)
                prefix_size = size if prefix is text else utf8_len(prefix)
                kept = clean_text(prefix)
                if stream is None:
                    stream = _Stream(name)
                    self._entries.append(stream)
                    self._used += ENTRY_OVERHEAD
                stream.buf.write(kept)
                self._used += prefix_size if kept is prefix else utf8_len(kept)
                self._dropped_stream[name] += size - prefix_size
            else:
                self._dropped_stream[name] += size
        self._count_written(size)

    def publish(
        self,
        data: JsonObject,
        metadata: JsonObject,
        *,
        display_id: str | None = None,
        update: bool = False,
        output_type: str = "display_data",
    ) -> None:
        tap = self._tap
        if tap is not None:
            try:
                tap.display(
                    data, metadata, display_id=display_id, update=update, output_type=output_type
                )
            except Exception:
                self._tap_failed()
        with self._lock:
            self._apply_pending_clear()
            size = sum(payload_size(v) for v in data.values())
            previous = self._by_display_id.get(display_id) if display_id is not None else None
            if update:
                if previous is not None:
                    self._used -= _output_size(previous)
                    kept = self._fit(data, metadata, size, charge_entry=False)
                    if kept is not None:
                        previous["data"], previous["metadata"] = kept
                    else:  # the old content stays, and so does its charge
                        self._used += _output_size(previous)
                # an update of an output we never stored (or dropped) changes nothing
            else:
                fitted = self._fit(data, metadata, size, charge_entry=True)
                if fitted is not None:
                    out: JsonObject = {
                        "output_type": output_type,
                        "data": fitted[0],
                        "metadata": fitted[1],
                    }
                    if output_type == "execute_result":
                        out["execution_count"] = None
                    self._entries.append(out)
                    if display_id is not None:
                        self._by_display_id[display_id] = out
        self._count_written(size)

    def _fit(
        self, data: JsonObject, metadata: JsonObject, size: int, *, charge_entry: bool
    ) -> tuple[JsonObject, JsonObject] | None:
        """Keep what fits; return ``None`` (and count it) when nothing does."""
        room = self._room() - (ENTRY_OVERHEAD if charge_entry else 0)
        if size <= room:
            self._used += size + (ENTRY_OVERHEAD if charge_entry else 0)
            return data, metadata
        sizes = {m: payload_size(v) for m, v in data.items()}
        order = sorted(data, key=lambda m: (m != "text/plain", sizes[m]))
        kept: JsonObject = {}
        for mime in order:
            if sizes[mime] <= room:
                kept[mime] = data[mime]
                room -= sizes[mime]
        dropped = [m for m in data if m not in kept]
        dropped_bytes = sum(sizes[m] for m in dropped)
        self._dropped_display_bytes += dropped_bytes
        if not kept:
            self._dropped_displays += 1
            return None
        self._used += sum(sizes[m] for m in kept) + (ENTRY_OVERHEAD if charge_entry else 0)
        note: JsonObject = {"droppedMimeTypes": list(dropped), "droppedBytes": dropped_bytes}
        return kept, {**metadata, "dsh": note}

    def clear(self, *, wait: bool) -> None:
        tap = self._tap
        if tap is not None:
            try:
                tap.clear(wait=wait)
            except Exception:
                self._tap_failed()
        with self._lock:
            if wait:
                self._clear_pending = True
            else:
                self._clear()

    def _apply_pending_clear(self) -> None:
        if self._clear_pending:
            self._clear_pending = False
            self._clear()

    def _clear(self) -> None:
        self._entries.clear()
        self._by_display_id.clear()
        self._used = 0

    def finish(self) -> Captured:
        """Freeze what was kept, adding the truncation markers."""
        with self._lock:
            outputs: list[JsonObject] = []
            texts = {"stdout": io.StringIO(), "stderr": io.StringIO()}
            for entry in self._entries:
                if isinstance(entry, _Stream):
                    text = entry.buf.getvalue()
                    texts[entry.name].write(text)
                    outputs.append({"output_type": "stream", "name": entry.name, "text": text})
                else:
                    outputs.append(entry)
            for name in ("stdout", "stderr"):
                dropped = self._dropped_stream[name]
                if dropped:
                    marker = ("\n" if not texts[name].getvalue().endswith("\n") else "") + (
                        truncation_marker(dropped) + "\n"
                    )
                    texts[name].write(marker)
                    outputs.append({"output_type": "stream", "name": name, "text": marker})
            if self._dropped_displays:
                n = self._dropped_displays
                text = (
                    f"[{n} display output{'s' if n != 1 else ''} dropped: the run's outputs went "
                    f"over the {format_size(self._caps.stored_bytes)} output cap]"
                )
                outputs.append(
                    {"output_type": "display_data", "data": {"text/plain": text}, "metadata": {}}
                )
            dropped_total = sum(self._dropped_stream.values()) + self._dropped_display_bytes
            return Captured(
                outputs=tuple(outputs),
                stdout=texts["stdout"].getvalue(),
                stderr=texts["stderr"].getvalue(),
                dropped_bytes=dropped_total,
            )


def _output_size(output: JsonObject) -> int:
    data = output.get("data")
    return sum(payload_size(v) for v in data.values()) if isinstance(data, dict) else 0


# -- the swapped-in objects -------------------------------------------------------------------------


class CapturingStream(io.TextIOBase):
    """A write-only text stream feeding an ``OutputSink``."""

    def __init__(self, sink: OutputSink, name: str) -> None:
        super().__init__()
        self._sink = sink
        self._name = name

    @property
    def name(self) -> str:
        return f"<{self._name}>"

    @property
    def encoding(self) -> str:  # pyright: ignore[reportIncompatibleVariableOverride]
        return "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, s: str) -> int:
        if not isinstance(s, str):  # pyright: ignore[reportUnnecessaryIsInstance] - callers lie
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self._sink.write(self._name, s)
        return len(s)


class CapturingDisplayPublisher:
    """Stands in for ``shell.display_pub``: what ``display()`` and friends call."""

    is_publishing = False

    def __init__(self, sink: OutputSink) -> None:
        self._sink = sink

    def publish(
        self,
        data: Mapping[str, object],
        metadata: Mapping[str, object] | None = None,
        source: object = None,
        *,
        transient: Mapping[str, object] | None = None,
        update: bool = False,
        **kwargs: object,
    ) -> None:
        del source, kwargs
        display_id = transient.get("display_id") if transient else None
        md = to_json_value(metadata) if metadata else {}
        self._sink.publish(
            json_bundle(data),
            md if isinstance(md, dict) else {},
            display_id=str(display_id) if display_id is not None else None,
            update=update,
        )

    def clear_output(self, wait: bool = False) -> None:
        self._sink.clear(wait=wait)


class OutputCapture:
    """The context manager described in the module docstring. ``result()`` after exit."""

    def __init__(
        self, caps: OutputCaps, *, shell: object | None = None, tap: OutputTap | None = None
    ) -> None:
        self.sink = OutputSink(caps, tap=tap)
        self.figures = FigureTracker()
        self._shell = shell
        self._saved: tuple[object, object, object, object] | None = None
        self._formatter: tuple[object, object] | None = None

    def __enter__(self) -> OutputCapture:
        shell = self._shell
        saved_pub = getattr(shell, "display_pub", None) if shell is not None else None
        self._saved = (sys.stdout, sys.stderr, sys.displayhook, saved_pub)
        sys.stdout = CapturingStream(self.sink, "stdout")
        sys.stderr = CapturingStream(self.sink, "stderr")
        if shell is not None:
            # an IPython shell: ``display()`` looks its publisher up on the shell at call time
            setattr(shell, "display_pub", CapturingDisplayPublisher(self.sink))  # noqa: B010
            sys.displayhook = self._displayhook
            self._wrap_formatter(shell)
        return self

    def _wrap_formatter(self, shell: object) -> None:
        formatter = getattr(shell, "display_formatter", None)
        original = getattr(formatter, "format", None)
        if formatter is None or not callable(original) or not hasattr(formatter, "__dict__"):
            return
        inner = original
        annotate = self.figures.annotate

        def format_with_description(obj: object, *args: object, **kwargs: object) -> object:
            pair: object = inner(obj, *args, **kwargs)
            if not isinstance(pair, tuple):
                return pair
            items = cast(tuple[object, ...], pair)
            if len(items) == 2 and isinstance(items[0], dict) and isinstance(items[1], dict):
                bundle = cast(JsonObject, items[0])
                return bundle, annotate(obj, bundle, cast(JsonObject, items[1]))
            return items

        attrs = cast(dict[str, object], vars(formatter))
        self._formatter = (formatter, attrs.get("format", _UNSET))
        setattr(formatter, "format", format_with_description)  # noqa: B010

    def _unwrap_formatter(self) -> None:
        if self._formatter is None:
            return
        formatter, previous = self._formatter
        self._formatter = None
        if previous is _UNSET:
            cast(dict[str, object], vars(formatter)).pop("format", None)
        else:
            setattr(formatter, "format", previous)  # noqa: B010

    def sweep(self) -> tuple[str, ...]:
        """Show the figures the run left open, close those it opened (``FigureTracker.sweep``);
        notes for figures that could not be drawn. Call inside the capture."""

        def publish(data: JsonObject, metadata: JsonObject) -> None:
            self.sink.publish(data, metadata)

        return tuple(self.figures.sweep(publish))

    def _displayhook(self, value: object) -> None:
        if value is None:
            return
        data, metadata = format_value(value, self._shell)
        metadata = self.figures.annotate(value, data, metadata)
        self.sink.publish(data, metadata, output_type="execute_result")

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._saved is not None
        stdout, stderr, hook, pub = self._saved
        sys.stdout = cast(io.TextIOWrapper, stdout)
        sys.stderr = cast(io.TextIOWrapper, stderr)
        sys.displayhook = cast(Callable[[object], object], hook)
        if self._shell is not None:
            setattr(self._shell, "display_pub", pub)  # noqa: B010
            self._unwrap_formatter()

    def result(self) -> Captured:
        return self.sink.finish()
