"""Cache files hold data, not code, and never fail the caller.

The cache folder is untrusted (a CI cache restored from another branch, a shared
CONCUR_CACHE_DIR): planted, stale, corrupt or oversized files are misses, a planted pickle
runs nothing, an edit that keeps size and mtime is noticed, an entry forged under the right
key (the header's MAC needs a key kept outside the folder) changes no answer, and nothing is
ever executed from the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from concur import cache as cachefiles
from concur.lang import library
from concur.lang.serial import Malformed, decode_pack, encode

PACK = "pack: tiny\nvariables:\n  a: {unit: s}\n  b: {unit: s}\nequations:\n  - b = 2 * a\n"
# a twice in its equation: inverting it needs sympy, so the closed form is cached
QUADRATIC = "pack: tiny\nvariables:\n  a: {unit: s}\n  b: {unit: s**2}\nequations:\n  - b = a * a + [1 s] * a\n"


@pytest.fixture(autouse=True)
def own_key(own_cache_key):
    """Each test (and the concur it runs) keys the cache with a key of its own, outside the cache."""


class Boom:
    """Unpickling this runs a shell command that creates ``marker``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def concur(*args: str, cache: Path, cwd: Path | None = None, config: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "CONCUR_CACHE_DIR": str(cache)}
    if config is not None:
        env["XDG_CONFIG_HOME"] = str(config)
    return subprocess.run(
        [sys.executable, "-m", "concur.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=120
    )


def test_round_trip_and_no_temporaries(tmp_path):
    path = tmp_path / "sub" / "c.json"
    assert cachefiles.read_json(path, "demo", dict) is None
    assert cachefiles.write_json(path, "demo", {"a": [1, 2.5, None, "x"]})
    assert cachefiles.read_json(path, "demo", dict) == {"a": [1, 2.5, None, "x"]}
    assert cachefiles.read_json(path, "other-kind", dict) is None
    assert [p.name for p in path.parent.iterdir()] == ["c.json"]


def _corruptions(good: bytes) -> dict[str, bytes]:
    head, _, body = good.partition(b"\n")
    flipped = bytearray(good)
    flipped[-3] ^= 0x01
    return {
        "empty": b"",
        "binary": bytes(range(256)) * 4,
        "pickle": pickle.dumps({"a": 1}),
        "truncated": good[: len(good) // 2],
        "bit flip": bytes(flipped),
        "no header": body,
        "header only": head + b"\n",
        "huge header": b"{" + b" " * 10_000 + b"}\n" + body,
        "other format": head.replace(b'"concur-cache": 2', b'"concur-cache": 99') + b"\n" + body,
        "nan mac": b'{"concur-cache": 2, "kind": "demo", "mac": NaN}\n' + body,
        "bare sha256": b'{"concur-cache": 2, "kind": "demo", "sha256": "%s"}\n'
        % hashlib.sha256(body).hexdigest().encode()
        + body,
        "header list": b"[1, 2, 3]\n" + body,
    }


def test_corrupt_files_of_many_shapes_are_misses(tmp_path):
    path = tmp_path / "c.json"
    cachefiles.write_json(path, "demo", {"a": 1})
    for name, data in _corruptions(path.read_bytes()).items():
        path.write_bytes(data)
        assert cachefiles.read_json(path, "demo", dict) is None, name


def test_data_json_cannot_hold_is_not_written(tmp_path):
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert cachefiles.write_json(tmp_path / "c.json", "demo", deep) is False
    assert cachefiles.write_json(tmp_path / "c.json", "demo", {"x": object()}) is False
    assert list(tmp_path.iterdir()) == []


def test_a_fifo_or_folder_in_the_cache_is_a_miss_not_a_hang(tmp_path):
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert cachefiles.read_json(fifo, "demo", dict) is None
    (tmp_path / "dir.json").mkdir()
    assert cachefiles.read_json(tmp_path / "dir.json", "demo", dict) is None


def test_oversized_file_is_a_miss(tmp_path, monkeypatch):
    path = tmp_path / "c.json"
    cachefiles.write_json(path, "demo", {"pad": "x" * 5000})
    monkeypatch.setattr(cachefiles, "MAX_BYTES", 1000)
    assert cachefiles.read_json(path, "demo", dict) is None


def _payloads(good: dict) -> dict[str, object]:
    """Well-formed JSON (valid header and digest) that must still be refused by the pack validator."""
    deep: object = ["Num", 1.0]
    for _ in range(600):  # deeper than any tree concur writes (serial.MAX_DEPTH)
        deep = ["Neg", deep]
    eq, first = good["equations"][0], next(iter(good["variables"]))

    def with_eq(**change: object) -> dict:
        return {**good, "equations": [{**eq, **change}]}

    return {
        "list": [1, 2],
        "number": 3,
        "missing field": {k: v for k, v in good.items() if k != "variables"},
        "extra field": {**good, "__reduce__": ["os.system", "touch pwned"]},
        "wrong type": {**good, "name": 5},
        "bool for int": with_eq(index=True),
        "unknown node": with_eq(rhs=["Import", "os"]),
        "unknown function": with_eq(rhs=["Call", "system", [["Str", "touch pwned"]]]),
        "arity": with_eq(rhs=["Call", "exp", []]),
        "operator": with_eq(rhs=["Bin", "@", ["Num", 1.0], ["Num", 2.0]]),
        "dunder name": with_eq(rhs=["Var", "__class__"]),
        "deep tree": with_eq(rhs=deep),
        "renamed key": {**good, "variables": {"zz": good["variables"][first]}},
        "py/object": {"py/object": "os.system", "args": ["touch pwned"]},
    }


def test_hostile_but_valid_json_is_a_miss_and_runs_nothing(tmp_path):
    good = encode(library.get_pack("littles_law"))
    path = tmp_path / "p.json"
    cachefiles.write_json(path, "pack", good)
    assert cachefiles.read_json(path, "pack", decode_pack) == library.get_pack("littles_law")
    for name, payload in _payloads(good).items():
        assert cachefiles.write_json(path, "pack", payload), name  # a valid header: the validator decides
        assert cachefiles.read_json(path, "pack", decode_pack) is None, name
    assert not (tmp_path / "pwned").exists() and not Path("pwned").exists()


def test_closed_form_tables_are_validated():
    from concur.solver.closed_forms import Inversion, LoopForm, _Table, _validate

    root = library.get_pack("littles_law").equations[0].rhs
    table = _Table({"k": Inversion((root,), True)}, {"l": LoopForm(("a", "b"), ((root, root),), "solved")})
    assert _validate(json.loads(json.dumps(encode(table)))) == table
    good = json.loads(json.dumps(encode(table)))
    bad_node = json.loads(json.dumps(good))
    bad_node["inversions"]["k"]["roots"] = [["Call", "eval", []]]
    ragged = json.loads(json.dumps(good))
    ragged["loops"]["l"]["branches"] = [[ragged["loops"]["l"]["branches"][0][0]]]
    status = json.loads(json.dumps(good))
    status["loops"]["l"]["status"] = "maybe"
    for bad in ({"a": 1}, [], {"inversions": {}, "loops": []}, bad_node, ragged, status):
        with pytest.raises(Malformed):
            _validate(bad)


def test_planted_files_in_the_cache_run_nothing_and_change_nothing(tmp_path):
    """Warm the cache, then replace every file concur wrote with a pickle that runs a command:
    the next solve ignores them (exit 0, same answer) and the command never runs."""
    cache, marker, pack = tmp_path / "cache", tmp_path / "pwned", tmp_path / "tiny.yaml"
    pack.write_text(
        QUADRATIC.replace("{unit: s}", "{unit: furlong}").replace("[1 s]", "[1 furlong]").replace("s**2", "furlong**2")
    )  # a unit outside the shipped table
    args = (str(pack), "--find", "a", "--set", "b=6", "--json")  # inverting b = a * a + a: a sympy closed form
    first = concur("solve", *args, cache=cache)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["results"]["a"]["value"] == 2
    written = [p for p in cache.rglob("*") if p.is_file()]
    assert {p.name.split("-")[0] for p in written if p.parent == cache} == {"units", "closed"}
    assert any(p.parent.name == "parsed" for p in written)
    bomb = pickle.dumps(Boom(marker))
    for p in written:
        p.write_bytes(bomb)
        (p.parent / (p.stem + ".pkl")).write_bytes(bomb)  # the names the pickle cache used
    again = concur("solve", *args, cache=cache)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["results"] == json.loads(first.stdout)["results"]
    assert not marker.exists()


def test_edit_keeping_size_and_mtime_is_noticed(tmp_path):
    """cp -p, rsync -a and tar keep size and mtime: the cache must key on content."""
    cache, pack = tmp_path / "cache", tmp_path / "tiny.yaml"
    pack.write_text(PACK)
    assert "b  4 s" in concur("solve", str(pack), "--find", "b", "--set", "a=2", cache=cache).stdout
    stamp = pack.stat()
    pack.write_text(PACK.replace("2 * a", "3 * a"))
    os.utime(pack, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert pack.stat().st_size == stamp.st_size and pack.stat().st_mtime_ns == stamp.st_mtime_ns
    out = concur("solve", str(pack), "--find", "b", "--set", "a=2", cache=cache)
    assert out.returncode == 0 and "b  6 s" in out.stdout, out.stdout + out.stderr


def test_corrupt_parsed_cache_is_rebuilt_silently(tmp_path):
    cache = tmp_path / "cache"
    assert concur("check", cache=cache).returncode == 0
    files = sorted((cache / "parsed").iterdir())
    for i, p in enumerate(files):
        p.write_bytes(list(_corruptions(p.read_bytes()).values())[i % 12])
    out = concur("check", cache=cache)
    assert out.returncode == 0 and out.stderr == "", out.stderr


def test_unwritable_cache_folder_is_not_an_error(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("x")  # a file where the folder should be
    assert cachefiles.write_bytes(blocked / "c.json", b"{}") is False
    assert os.listdir(tmp_path) == ["file"]
    out = concur("solve", "--find", "users", cache=blocked)
    assert out.returncode == 0 and "users" in out.stdout, out.stderr


def test_planted_unit_definitions_in_temp_are_never_read(tmp_path):
    """pint's patched definitions live in memory: a definitions file planted where older
    versions looked (a predictable per-user temp folder) changes nothing."""
    tmp = tmp_path / "tmp"
    planted = tmp / f"concur-pint-{os.getuid()}"
    planted.mkdir(parents=True)
    (planted / "default_en.txt").write_text("GiB = 1 * byte\n")
    code = "from concur.lang import units; units._load_disk = lambda: None; print(units.parse_with_pint('GiB').factor)"
    env = {**os.environ, "TMPDIR": str(tmp), "CONCUR_CACHE_DIR": str(tmp_path / "file-not-dir")}
    (tmp_path / "file-not-dir").write_text("x")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 8 * 2**30  # bits
    assert sorted(p.name for p in tmp.rglob("*")) == [planted.name, "default_en.txt"]


def test_unit_fact_cache_rows_are_validated(tmp_path, monkeypatch):
    from concur.lang import units

    path = tmp_path / "units.json"
    good = {"GiB": [8 * 2**30, [["[information]", 1.0]]]}
    for bad in (
        {"GiB": [-1, []]},
        {"GiB": [float("nan"), []]},
        {"GiB": ["x", []]},
        {"GiB": [1, [["os", 1]]]},
        {"GiB": [1]},
        ["GiB"],
    ):
        cachefiles.write_json(path, "units", bad)
        assert cachefiles.read_json(path, "units", units._rows) is None, bad
    cachefiles.write_json(path, "units", good)
    assert cachefiles.read_json(path, "units", units._rows)["GiB"].factor == 8 * 2**30


def test_a_forged_entry_under_the_right_key_changes_no_answer(tmp_path):
    """The attacker writes a well-formed parsed pack (b = 29,999 * a) under the exact file name
    the real pack's entry has, with a header digest of its own payload: the MAC, keyed by a
    secret outside the cache folder, does not match, so the pack is parsed again."""
    cache, config, pack = tmp_path / "cache", tmp_path / "config", tmp_path / "tiny.yaml"
    pack.write_text(PACK)
    args = ("solve", str(pack), "--find", "b", "--set", "a=1", "--json")
    first = concur(*args, cache=cache, config=config)
    assert first.returncode == 0 and json.loads(first.stdout)["results"]["b"]["value"] == 2, first.stderr
    key = config / "concur" / "cache-key"
    assert key.stat().st_mode & 0o777 == 0o600 and (key.parent.stat().st_mode & 0o777) == 0o700
    (entry,) = [
        p
        for p in (cache / "parsed").iterdir()
        if json.loads(p.read_bytes().partition(b"\n")[0])["kind"] == "pack" and b'"tiny"' in p.read_bytes()
    ]
    forged = json.loads(entry.read_bytes().partition(b"\n")[2])
    forged["equations"][0]["rhs"] = ["Bin", "*", ["Num", 29999.0], ["Var", "a"]]
    body = json.dumps(forged).encode()
    for header in (
        {"concur-cache": 2, "kind": "pack", "sha256": hashlib.sha256(body).hexdigest()},
        {"concur-cache": 2, "kind": "pack", "mac": hashlib.sha256(body).hexdigest()},
        {"concur-cache": 1, "kind": "pack", "sha256": hashlib.sha256(body).hexdigest()},  # the old format
    ):
        entry.write_bytes(json.dumps(header).encode() + b"\n" + body)
        again = concur(*args, cache=cache, config=config)
        assert again.returncode == 0 and json.loads(again.stdout)["results"]["b"]["value"] == 2, again.stdout


def test_a_genuine_entry_moved_under_another_key_is_a_miss(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert cachefiles.write_json(a, "demo", {"answer": 1})
    b.write_bytes(a.read_bytes())
    assert cachefiles.read_json(a, "demo", dict) == {"answer": 1}
    assert cachefiles.read_json(b, "demo", dict) is None


def test_a_key_inside_the_cache_folder_or_shared_with_others_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(cachefiles, "_KEY", None)
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cache"))  # the key would sit in the cache
    assert cachefiles._user_key() is None
    assert cachefiles.write_json(tmp_path / "cache" / "c.json", "demo", {"a": 1}) is False  # nothing written
    assert not (tmp_path / "cache" / "c.json").exists()
    monkeypatch.setattr(cachefiles, "_KEY", None)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    key = cachefiles._user_key()
    assert key is not None and len(key) == 32 and cachefiles._user_key() == key
    os.chmod(cachefiles.key_file(), 0o644)  # readable by others: anyone could forge entries
    assert cachefiles._user_key() is None
    os.chmod(cachefiles.key_file(), 0o600)
    os.chmod(cachefiles.key_file().parent, 0o777)  # others could swap the key
    assert cachefiles._user_key() is None


def _planted_native(cache: Path, marker: Path) -> None:
    """What the attack planted: a script under the name the old build cache gave counter_bench,
    and a record holding the script's own sha256 (the old "trust" check read that record)."""
    from concur import native

    cc = native.find_compiler()
    source = (Path(native.__file__).parent / "counter_bench.c").read_bytes()
    key = cachefiles.digest(source, cc, *native.FLAGS["counter_bench"])
    folder = cache / "native"
    folder.mkdir(parents=True, mode=0o700)
    exe = folder / f"counter_bench-{key[:16]}"
    script = b"#!/bin/sh\ntouch " + str(marker).encode() + b"\necho 0 0 0 0 0 1e9\n"
    exe.write_bytes(script)
    os.chmod(exe, 0o755)
    record = {"source_sha256": key, "binary_sha256": hashlib.sha256(script).hexdigest()}
    body = json.dumps(record).encode()
    header = {"concur-cache": 1, "kind": "native", "sha256": hashlib.sha256(body).hexdigest()}
    exe.with_name(exe.name + ".json").write_bytes(json.dumps(header).encode() + b"\n" + body)


def test_a_planted_native_binary_is_never_run(tmp_path):
    from concur import native

    try:
        native.find_compiler()
    except native.NativeBuildError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{exc}, and CI=true requires a C compiler", pytrace=False)
        pytest.skip(str(exc))
    cache, marker = tmp_path / "cache", tmp_path / "pwned"
    _planted_native(cache, marker)
    out = concur(
        "bench", "counter", "--runs", "1", "--ops", "1000", "--native-ms", "5", "--max-threads", "1", cache=cache
    )
    assert out.returncode == 0, out.stderr
    assert "| relaxed | padded |" in out.stdout
    assert not marker.exists()
