"""A warm question reuses what an earlier process decided: the goal-seek decision of its shape,
that its model passed the unit check, and concur's own source digest.

Counts, not timings. A new process is simulated by forgetting everything compiled in this one
(``concur.compiled.forget``) and the digest of concur's own code. Entries are authenticated with
a key of this test's own: a forged entry is a miss (the work is done again), never a different
answer; a unit check that fails is never remembered.
"""

from __future__ import annotations

import pytest

import concur
import concur.lang.check as lang_check
import concur.solver.seek as seek
from concur import cache as cachefiles
from concur import compiled
from concur.errors import ConcurError

GIVEN = {"servers": 2, "service_time": "0.2 s", "mean_wait": "0.01 s"}  # a goal seek over arrival_rate


@pytest.fixture
def counts(tmp_path, monkeypatch, own_cache_key):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(seek, "_WRITES", 0)
    seen = {"decisions": 0, "unit checks": 0}
    decide, check = seek._needs_search, lang_check.check_model

    def counted_decision(*args, **kwargs):
        seen["decisions"] += 1
        return decide(*args, **kwargs)

    def counted_check(*args, **kwargs):
        seen["unit checks"] += 1
        return check(*args, **kwargs)

    monkeypatch.setattr(seek, "_needs_search", counted_decision)
    monkeypatch.setattr(lang_check, "check_model", counted_check)
    return seen


def in_a_new_process(monkeypatch) -> None:
    compiled.forget()
    monkeypatch.setattr(cachefiles, "_SOURCE_DIGEST", None)


def rate(monkeypatch) -> float:
    in_a_new_process(monkeypatch)
    return concur.solve("arrival_rate", GIVEN, "queueing").value("arrival_rate")


def test_a_warm_question_decides_and_checks_nothing_again_and_answers_the_same(counts, monkeypatch):
    first = rate(monkeypatch)
    assert counts == {"decisions": 1, "unit checks": 1}
    assert rate(monkeypatch) == first
    assert counts == {"decisions": 1, "unit checks": 1}  # both read back from the cache folder
    in_a_new_process(monkeypatch)
    sol = concur.solve(
        "mean_wait", {k: v for k, v in GIVEN.items() if k != "mean_wait"} | {"arrival_rate": 1}, "queueing"
    )
    assert sol.value("mean_wait") > 0 and counts["decisions"] == 2  # another shape: decided afresh


def test_a_forged_entry_costs_the_work_never_another_answer(counts, monkeypatch, tmp_path):
    first = rate(monkeypatch)
    for folder in ("seeks", "unit-checks", "source"):
        for entry in (tmp_path / "cache" / folder).iterdir():
            head, _, body = entry.read_bytes().partition(b"\n")
            entry.write_bytes(head + b"\n" + body.replace(b"null", b"1").replace(b"true", b"false") + b" ")
    assert rate(monkeypatch) == first
    assert counts == {"decisions": 2, "unit checks": 2}


def test_the_source_digest_is_read_back_only_for_the_same_files(monkeypatch, tmp_path, own_cache_key):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(cachefiles, "_SOURCE_DIGEST", None)
    fresh = cachefiles.source_digest()
    (entry,) = (tmp_path / "cache" / "source").iterdir()
    monkeypatch.setattr(cachefiles, "_SOURCE_DIGEST", None)
    assert cachefiles.source_digest() == fresh  # read back
    monkeypatch.setattr(cachefiles, "_stamp", lambda files: "0" * 64)  # the files changed: another entry
    monkeypatch.setattr(cachefiles, "_SOURCE_DIGEST", None)
    assert cachefiles.source_digest() == fresh and len(list(entry.parent.iterdir())) == 2


def test_a_failed_unit_check_is_never_remembered(counts, monkeypatch, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("pack: bad\nvariables:\n  a: {unit: s}\n  b: {unit: GiB}\n  c: {}\nequations:\n  - c = a + b\n")
    for _ in range(2):
        in_a_new_process(monkeypatch)
        with pytest.raises(ConcurError) as err:
            concur.solve("c", {"a": "1 s", "b": "1 GiB"}, str(path))
        assert err.value.exit_code == 1
    assert counts["unit checks"] == 2
    assert not (tmp_path / "cache" / "unit-checks").exists()


def test_main_called_in_process_leaves_the_collector_alone(monkeypatch, tmp_path):
    """Only concur's own process freezes the GC's objects before it exits (so exit skips a full
    collection); ``main(argv)`` called in-process, as a test or an embedding program does, does not."""
    import gc

    from concur.cli import main

    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    before = gc.get_freeze_count()
    with pytest.raises(SystemExit) as done:
        main(["solve", "--find", "arrival_rate", "queueing", *(f"--set={k}={v}" for k, v in GIVEN.items())])
    assert done.value.code == 0 and gc.get_freeze_count() == before
