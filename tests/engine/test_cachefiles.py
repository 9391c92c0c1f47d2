"""Cache files never fail the caller: corrupt or missing files read as absent, unwritable folders are skipped."""

from __future__ import annotations

import os

from concur import cache as cachefiles


def test_round_trip_and_corruption(tmp_path):
    path = tmp_path / "sub" / "c.pkl"
    assert cachefiles.read_pickle(path, default="none") == "none"
    assert cachefiles.write_pickle(path, {"a": 1})
    assert cachefiles.read_pickle(path) == {"a": 1}
    path.write_bytes(b"not a pickle")
    assert cachefiles.read_pickle(path, default="none") == "none"
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_unwritable_folder_is_not_an_error(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("x")  # a file where the folder should be
    assert cachefiles.write_bytes(blocked / "c.json", b"{}") is False
    assert os.listdir(tmp_path) == ["file"]
