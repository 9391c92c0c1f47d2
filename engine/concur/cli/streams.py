"""Files the CLI reads and writes, where ``-`` means stdin or stdout, and nothing is half-written.

* **Writing a file** goes through :mod:`concur.writefile`: a regular file (or a new path) is
  written atomically (a temporary beside it, renamed over it when everything was written), a
  FIFO or a device is written in place, a symlink is followed, never replaced.
* **``-`` as an output** is stdout. Text goes as it is produced (a million-row CSV streams).
  Binary output (a PNG, a workbook) goes to stdout only when stdout is not a terminal: bytes
  of a ``.xlsx`` would only garble the screen, so that is a usage error naming the fix.
* **``-`` as an input** is stdin, read with the same size limit as a pack file; its label in
  messages is ``<stdin>``.

Every failure to open or write is a :class:`concur.errors.UsageError` (exit 2) naming the path;
a closed pipe on stdout is not a failure and is left to ``concur.cli.main`` (exit 0).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from ..errors import UsageError
from ..writefile import open_output, output_path

__all__ = ["STDIN_LABEL", "STDIO", "binary_output", "is_stdio", "read_input", "text_output", "write_text"]

STDIO = "-"
STDIN_LABEL = "<stdin>"


def is_stdio(path: str | os.PathLike[str] | None) -> bool:
    return path is not None and str(path) == STDIO


def read_input(path: str) -> tuple[bytes | None, str]:
    """(bytes read from stdin, ``<stdin>``) for ``-``; (None, path) otherwise (the caller reads the
    file itself, with its own checks). Stdin is read up to the pack size limit plus one byte, so a
    larger input is refused by the loader without reading all of it."""
    if not is_stdio(path):
        return None, path
    from ..lang.yamlsafe import MAX_BYTES

    return sys.stdin.buffer.read(MAX_BYTES + 1), STDIN_LABEL


@contextmanager
def text_output(path: str) -> Iterator[IO[str]]:
    """A text stream for ``path``: stdout for ``-`` (flushed, not closed), else :func:`concur.writefile.open_output`."""
    if is_stdio(path):
        yield sys.stdout
        sys.stdout.flush()
        return
    with open_output(path) as fh:
        yield fh


def write_text(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (``-``: stdout)."""
    with text_output(path) as fh:
        fh.write(text)


@contextmanager
def binary_output(path: str, suffix: str) -> Iterator[Path]:
    """A temporary file to write binary output into, delivered to ``path`` when the block succeeds.

    For a path, :func:`concur.writefile.output_path` delivers it (atomically to a regular file, in
    place to a FIFO or device); for ``-`` it lies in a
    private temporary folder and its bytes are copied to stdout, which must not be a terminal.
    ``suffix`` keeps writers that choose a format by extension (``.png``, ``.xlsx``) happy.
    """
    if is_stdio(path):
        if sys.stdout.isatty():
            raise UsageError(
                f"refusing to write binary {suffix} data to a terminal",
                hint=f"redirect it (> out{suffix}) or pipe it, or give a file name",
            )
        with tempfile.TemporaryDirectory(prefix="concur-") as folder:
            tmp = Path(folder) / f"out{suffix}"
            yield tmp
            sys.stdout.flush()
            with tmp.open("rb") as produced:
                shutil.copyfileobj(produced, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        return
    with output_path(path, suffix) as staged:
        yield staged
