"""Where the engine simulator's requests come from: a Poisson or bursty stream, or a trace file.

How is this designed, and why?
==============================

A stream hands out requests one at a time, ``(arrival time, input tokens, output tokens)``, so
the simulator can keep arrivals coming for as long as it still measures (an open loop must not
run dry while the last recorded requests are in flight, or their latencies are measured on an
emptying server).

* :class:`Synthetic` -- inter-arrival gaps drawn from a Gamma distribution with shape
  ``burstiness`` and mean ``1/rate``: ``burstiness = 1`` is a Poisson process; below 1 the gaps'
  coefficient of variation ``1/sqrt(burstiness)`` exceeds 1 and requests come in clumps (0.25:
  CV 2); above 1 they are more regular. This is the ``--burstiness`` of vLLM's serving benchmark
  (``vllm bench serve``: gamma shape = burstiness, scale = 1/(rate x burstiness)), so a
  simulated run and a benchmark run speak of the same traffic. Lengths are fixed. Gaps are
  drawn in blocks of 1,024 from a seeded ``numpy`` generator: deterministic for a seed.
* :class:`Trace` -- a file of timestamps and lengths, CSV (a header naming ``timestamp``,
  ``input_tokens``, ``output_tokens``) or JSONL (one object per line with those keys).
  Timestamps are seconds, non-decreasing; lengths whole numbers >= 1. The file is read whole
  but bounded (:data:`TRACE_MAX_BYTES`, :data:`TRACE_MAX_ROWS`); every refusal is one line
  naming ``file:line``. A trace is replayed once, as given, and runs dry at its end.

Non-goals: length distributions for the synthetic stream (give a trace), diurnal rates.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import Location, UsageError
from ..readfile import FileRefused, read_regular

__all__ = ["TRACE_MAX_BYTES", "TRACE_MAX_ROWS", "Synthetic", "Trace", "read_trace"]

TRACE_MAX_BYTES = 32 * 1024 * 1024
TRACE_MAX_ROWS = 200_000
_KEYS = ("timestamp", "input_tokens", "output_tokens")
_BLOCK = 1024


@dataclass
class Synthetic:
    """An open-loop stream: Gamma(shape = ``burstiness``) gaps of mean ``1/rate`` s; fixed lengths."""

    rate: float
    input_tokens: int
    output_tokens: int
    burstiness: float = 1.0
    seed: int = 1
    _gaps: list[float] = field(default_factory=list, repr=False)
    _now: float = 0.0
    _rng: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        for name in ("rate", "burstiness"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise UsageError(f"{name} must be a finite number > 0, got {value!r}", variable=name)
        for name in ("input_tokens", "output_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"{name} must be a whole number >= 1, got {value!r}", variable=name)
        import numpy as np

        self._rng = np.random.default_rng(self.seed)

    def next(self) -> tuple[float, int, int] | None:
        """The next request: (arrival time s, input tokens, output tokens). Never runs dry."""
        if not self._gaps:
            draw = self._rng.gamma(self.burstiness, 1.0 / (self.rate * self.burstiness), _BLOCK)
            self._gaps = draw[::-1].tolist()
        self._now += self._gaps.pop()
        return self._now, self.input_tokens, self.output_tokens


@dataclass
class Trace:
    """A recorded stream, replayed once: parallel lists of arrival times and lengths."""

    path: str
    times: list[float]
    inputs: list[int]
    outputs: list[int]
    _next: int = 0

    def __len__(self) -> int:
        return len(self.times)

    def next(self) -> tuple[float, int, int] | None:
        if self._next >= len(self.times):
            return None
        i = self._next
        self._next += 1
        return self.times[i], self.inputs[i], self.outputs[i]


def _error(path: str, line: int, message: str, hint: str | None = None) -> UsageError:
    return UsageError(message, where=Location(path, line), hint=hint)


def _number(path: str, line: int, key: str, raw: Any, whole: bool) -> float:
    if isinstance(raw, bool):
        raise _error(path, line, f"{key} must be a number, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise _error(path, line, f"{key} must be a number, got {str(raw)[:40]!r}") from None
    if not math.isfinite(value) or value < (1 if whole else 0):
        raise _error(
            path,
            line,
            f"{key} must be {'a whole number >= 1' if whole else 'a finite number >= 0'}, got {str(raw)[:40]}",
        )
    if whole and value != int(value):
        raise _error(path, line, f"{key} must be a whole number of tokens, got {str(raw)[:40]}")
    return value


def read_trace(path: str | Path) -> Trace:
    """Read a CSV or JSONL trace (see the module essay). Raises :class:`UsageError` naming file:line."""
    name = str(path)
    try:
        data = read_regular(path, TRACE_MAX_BYTES)
    except FileRefused as exc:
        raise UsageError(f"trace file {exc}", where=Location(name), hint="give a CSV or JSONL file") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise _error(name, 1, "the trace is not UTF-8 text", "give a CSV or JSONL file") from None
    rows = _jsonl_rows(name, text) if text.lstrip()[:1] == "{" else _csv_rows(name, text)
    if not rows:
        raise _error(name, 1, "the trace holds no request", f"one row per request with {', '.join(_KEYS)}")
    return _trace(name, rows)


def _jsonl_rows(name: str, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) per non-blank line of a JSONL trace; each line must be an object."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise _error(name, n, f"not a JSON object: {msg}", "one object per line") from None
        if not isinstance(obj, dict):
            raise _error(name, n, "not a JSON object", "one object per line")
        rows.append((n, obj))
        if len(rows) > TRACE_MAX_ROWS:
            raise _error(name, n, f"the trace has more than {TRACE_MAX_ROWS:,} requests", "cut it")
    return rows


def _csv_rows(name: str, text: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, header -> cell) per non-blank row of a CSV trace whose header names every key."""
    rows: list[tuple[int, dict[str, Any]]] = []
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise _error(name, 1, "the trace is empty", f"a header {','.join(_KEYS)} and one row per request") from None
    except csv.Error as exc:
        raise _error(name, 1, f"not CSV: {exc}") from None
    absent = [k for k in _KEYS if k not in header]
    if absent:
        raise _error(name, 1, f"the header lacks {', '.join(absent)}", f"a header {','.join(_KEYS)}")
    try:
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            n = reader.line_num
            if len(cells) != len(header):
                raise _error(name, n, f"{len(cells)} fields where the header has {len(header)}")
            rows.append((n, dict(zip(header, cells))))
            if len(rows) > TRACE_MAX_ROWS:
                raise _error(name, n, f"the trace has more than {TRACE_MAX_ROWS:,} requests", "cut it")
    except csv.Error as exc:
        raise _error(name, reader.line_num, f"not CSV: {exc}") from None
    return rows


def _trace(name: str, rows: list[tuple[int, dict[str, Any]]]) -> Trace:
    """The trace of ``rows``: every key present, timestamps sorted, token counts whole."""
    times: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    for n, row in rows:
        absent = [k for k in _KEYS if k not in row]
        if absent:
            raise _error(name, n, f"the request lacks {', '.join(absent)}")
        t = _number(name, n, "timestamp", row["timestamp"], whole=False)
        if times and t < times[-1]:
            raise _error(
                name, n, f"timestamp {t:g} s comes before the previous {times[-1]:g} s", "sort the trace by timestamp"
            )
        times.append(t)
        inputs.append(int(_number(name, n, "input_tokens", row["input_tokens"], whole=True)))
        outputs.append(int(_number(name, n, "output_tokens", row["output_tokens"], whole=True)))
    return Trace(name, times, inputs, outputs)
