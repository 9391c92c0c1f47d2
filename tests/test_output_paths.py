"""Output paths are written, never replaced: a FIFO stays a FIFO (its reader gets the CSV), a
device stays a device, a symlink stays a link to a regular file, a regular file is replaced
atomically and keeps its permissions; CSV text that a spreadsheet would read as a formula is
prefixed with ``'``. Devices are private ``mknod`` copies in a temp folder, never real /dev nodes.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from concur.cli.tabular import Block, spreadsheet_text, write_csv
from concur.errors import UsageError
from concur.writefile import open_output, output_path, resolve_output, write_output

BASE = "pack: base\nvariables:\n  a: {unit: s}\n  b: {unit: s}\nequations:\n  - b = 2 * a\n"
CSV = "config,a [s],b [s]\nscenario,1.0,2.0\nscenario,2.0,4.0\n"


def sweep_csv(tmp: Path, target: Path | str) -> subprocess.CompletedProcess:
    (tmp / "base.yaml").write_text(BASE)
    args = ["sweep", "base.yaml", "--find", "b", "--over", "a=1,2", "--csv", str(target)]
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, cwd=tmp, timeout=60
    )


def read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def reader() -> None:
        with open(path, "rb") as fh:  # blocks until the writer opens it
            into.append(fh.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread


def test_a_fifo_reader_receives_the_csv_and_the_fifo_stays_a_fifo(tmp_path):
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = read_fifo(fifo, got)
    out = sweep_csv(tmp_path, fifo)
    thread.join(timeout=60)
    assert out.returncode == 0, out.stderr
    assert got == [CSV.encode()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml", "out.csv"]  # no temporary left


def test_a_symlink_is_followed_and_stays_a_link(tmp_path):
    target = tmp_path / "real.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    out = sweep_csv(tmp_path, link)
    assert out.returncode == 0, out.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert stat.S_ISREG(os.lstat(target).st_mode) and target.read_text() == CSV
    dangling = tmp_path / "dangling.csv"
    dangling.symlink_to(tmp_path / "new.csv")
    assert sweep_csv(tmp_path, dangling).returncode == 0
    assert dangling.is_symlink() and (tmp_path / "new.csv").read_text() == CSV


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_a_private_null_device_stays_a_device(tmp_path):
    null = tmp_path / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    out = sweep_csv(tmp_path, null)
    assert out.returncode == 0, out.stderr
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.lstat(null).st_rdev == os.makedev(1, 3)


def test_a_regular_file_is_replaced_atomically_keeping_its_mode(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    os.chmod(target, 0o640)
    inode = target.stat().st_ino
    assert sweep_csv(tmp_path, target).returncode == 0
    assert target.read_text() == CSV and target.stat().st_mode & 0o777 == 0o640
    assert target.stat().st_ino != inode  # a new file renamed into place, not the old one truncated
    with pytest.raises(RuntimeError), open_output(target) as fh:
        fh.write("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == CSV  # the old file stays whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base.yaml", "out.csv"]


def test_folders_sockets_and_missing_folders_are_refused(tmp_path):
    import socket

    with pytest.raises(UsageError, match="it is a folder"):
        resolve_output(tmp_path)
    sock_path = tmp_path / "s"
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(sock_path))
        with pytest.raises(UsageError, match="it is a socket"):
            write_output(sock_path, "x")
    finally:
        sock.close()
    with pytest.raises(UsageError, match="does not exist"):
        write_output(tmp_path / "no" / "such.csv", "x")
    out = sweep_csv(tmp_path, tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "directory" in out.stderr


def test_binary_writers_stream_into_a_fifo(tmp_path):
    fifo = tmp_path / "out.png"
    os.mkfifo(fifo)
    got: list[bytes] = []
    thread = read_fifo(fifo, got)
    with output_path(fifo, ".png") as staged:
        staged.write_bytes(b"\x89PNG fake")
    thread.join(timeout=60)
    assert got == [b"\x89PNG fake"] and stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=HYPERLINK(1)", "'=HYPERLINK(1)"),
        ("+1+1", "'+1+1"),
        ("-cmd|x", "'-cmd|x"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-2.5", "-2.5"),
        ("+3", "+3"),
        ("gpu", "gpu"),
    ],
)
def test_formula_like_csv_text_is_prefixed(text, cell):
    assert spreadsheet_text(text) == cell


def test_write_csv_prefixes_text_cells_and_leaves_numbers(tmp_path):
    import numpy as np

    buf = io.StringIO()
    write_csv(
        buf, ["config", "x", "y"], [Block(("=cfg",), [np.array([-1.5, 2.0]), np.array(["=2+3", "@a"], dtype=object)])]
    )
    assert buf.getvalue() == "config,x,y\n'=cfg,-1.5,'=2+3\n'=cfg,2.0,'@a\n"
