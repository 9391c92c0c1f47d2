"""``concur check`` remembers passes: a warm check solves no example, an edit anywhere re-checks.

Counts, not timings: every test counts the example solves (``run_example`` calls) and full unit
checks (``check_paths`` calls) of ``concur check`` runs in this process. Only passes are
remembered, each under the bytes of the pack, of every pack and catalog it read and of concur's
own code, and authenticated with the user's key kept outside the cache folder: an edited pack, an
edited used pack, an edited concur or a forged entry costs a re-check, never a hidden failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import concur.lang.check as lang_check
import concur.solver.examples as examples
from concur import cache as cachefiles
from concur.cli import cli
from concur.lang import checked

BASE = "pack: base\nvariables:\n  a: {unit: s}\n  b: {unit: s}\nequations:\n  - b = 2 * a\n"
TOP = (
    "pack: top\nuses: [base]\nvariables:\n  c: {unit: s}\nequations:\n  - c = b + a\n"
    "examples:\n  - name: three\n    given: {a: 1 s}\n    find: [c]\n    expect:\n      c: 3\n"
)
WRONG = "  - name: four\n    given: {a: 1 s}\n    find: [c]\n    expect:\n      c: 4\n"


@pytest.fixture
def counts(tmp_path, monkeypatch, own_cache_key):
    """A cache folder and key of this test's own; how often examples are solved and packs unit-checked."""
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    seen = {"solves": 0, "unit checks": 0}
    run_example, check_paths = examples.run_example, lang_check.check_paths

    def counted_example(*args, **kwargs):
        seen["solves"] += 1
        return run_example(*args, **kwargs)

    def counted_check(*args, **kwargs):
        seen["unit checks"] += 1
        return check_paths(*args, **kwargs)

    monkeypatch.setattr(examples, "run_example", counted_example)
    monkeypatch.setattr(lang_check, "check_paths", counted_check)
    return seen


def packs(tmp_path: Path) -> Path:
    folder = tmp_path / "packs"
    folder.mkdir()
    (folder / "base.yaml").write_text(BASE)
    (folder / "top.yaml").write_text(TOP)
    return folder


def check(*args: str) -> tuple[int, str]:
    out = CliRunner().invoke(cli, ["check", *args])
    return out.exit_code, out.output


def reset(counts: dict[str, int]) -> None:
    counts.update({k: 0 for k in counts})


def test_a_warm_check_solves_nothing_and_prints_the_same(tmp_path, counts):
    folder = packs(tmp_path)
    first = check(str(folder))
    assert first[0] == 0 and counts == {"solves": 1, "unit checks": 1}, first
    reset(counts)
    assert check(str(folder)) == first
    assert counts == {"solves": 0, "unit checks": 0}
    reset(counts)  # --format json: the same one list, the full check ran once for that form only
    assert check("--format", "json", str(folder))[0] == 0 and counts["solves"] == 0


def test_a_broken_example_edited_in_is_reported_after_a_warm_cache(tmp_path, counts):
    folder = packs(tmp_path)
    assert check(str(folder))[0] == 0 and check(str(folder))[0] == 0
    (folder / "top.yaml").write_text(TOP + WRONG)
    reset(counts)
    code, out = check(str(folder))
    assert code == 1 and "example 'four': c: expected 4 (rel 1e-06), got 3 s" in out, out
    assert counts == {"solves": 2, "unit checks": 1}
    reset(counts)  # the failure is never remembered
    assert check(str(folder))[0] == 1 and counts["solves"] == 2


def test_an_edited_used_pack_re_solves_the_examples_that_read_it(tmp_path, counts):
    folder = packs(tmp_path)
    assert check(str(folder))[0] == 0
    (folder / "base.yaml").write_text(BASE.replace("2 * a", "3 * a"))  # top's example now gets 4
    reset(counts)
    code, out = check(str(folder / "top.yaml"))  # only top is named: base is read as a used pack
    assert code == 1 and "example 'three': c: expected 3 (rel 1e-06), got 4 s" in out, out
    assert counts["solves"] == 1


def test_an_edited_concur_re_checks(tmp_path, counts, monkeypatch):
    folder = packs(tmp_path)
    assert check(str(folder))[0] == 0
    monkeypatch.setattr(cachefiles, "_SOURCE_DIGEST", "0" * 64)  # as if a .py file of concur changed
    reset(counts)
    assert check(str(folder))[0] == 0 and counts == {"solves": 1, "unit checks": 1}


def test_the_source_digest_covers_concur_s_code():
    assert cachefiles.source_digest() == cachefiles.digest(*_sources())


def _sources() -> list[bytes | str]:
    import os

    root = Path(cachefiles.__file__).resolve().parent
    parts: list[bytes | str] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".json", ".txt")):
                parts += [os.path.relpath(os.path.join(folder, name), root), Path(folder, name).read_bytes()]
    assert any(str(p).endswith("solver/examples.py") for p in parts)
    return parts


def test_a_forged_pass_is_ignored(tmp_path, counts, monkeypatch):
    """The attacker writes "passed" entries under the exact names a failing pack's check reads,
    MACed with a key of their own: both are misses, and the failure is reported."""
    folder = packs(tmp_path)
    (folder / "top.yaml").write_text(TOP + WRONG)
    files = checked.targets_files([str(folder)])
    assert files is not None
    monkeypatch.setattr(cachefiles, "_KEY", b"attacker's own key, not the user")
    monkeypatch.setattr(cachefiles, "_KEY_DURABLE", True)
    checked.remember_run(*files, True, [])
    checked.remember_examples(folder / "top.yaml", [])
    assert len(list((tmp_path / "cache" / "checked").iterdir())) == 2
    assert checked.run_passed(*files, True)  # genuine under the attacker's key ...
    monkeypatch.setattr(cachefiles, "_KEY", None)  # ... but not under the user's
    monkeypatch.setattr(cachefiles, "_KEY_DURABLE", False)
    assert not checked.run_passed(*files, True) and not checked.examples_passed(folder / "top.yaml")
    code, out = check(str(folder))
    assert code == 1 and "example 'four'" in out and counts == {"solves": 2, "unit checks": 1}
