"""The README's headline question remembers its replicas search across processes.

Counts, not timings: the integer searches (``integers.smallest`` calls) of a solve. A new process
is simulated by emptying the in-process loop memo; the disk entry (HMAC-authenticated, keyed by
the packs' content, the question, the loop's input values and concur's own source) answers byte
for byte what the search answers, and a forged or stale entry is a miss.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import concur.solver.blocks as blocks
import concur.solver.integers as integers
from concur import cache as cachefiles
from concur.cli import cli

HEADLINE = ["solve", "--find", "replicas,fleet_gpus,cost_per_month", "--json"]


@pytest.fixture
def searches(tmp_path, monkeypatch):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setattr(cachefiles, "_KEY", None)
    monkeypatch.setattr(cachefiles, "_KEY_DURABLE", False)
    monkeypatch.setattr(blocks, "_LOOP_MEMO", {})
    seen = {"searches": 0}
    smallest = integers.smallest

    def counted(*args, **kwargs):
        seen["searches"] += 1
        return smallest(*args, **kwargs)

    monkeypatch.setattr(integers, "smallest", counted)
    return seen


def solve_in_a_new_process(*extra: str) -> str:
    blocks._LOOP_MEMO.clear()
    out = CliRunner().invoke(cli, [*HEADLINE, *extra])
    assert out.exit_code == 0, out.output
    return out.output


def test_a_warm_headline_question_does_not_search_again_and_answers_the_same(searches):
    first = solve_in_a_new_process()
    assert searches["searches"] >= 1
    searches["searches"] = 0
    assert solve_in_a_new_process() == first and searches["searches"] == 0
    other = solve_in_a_new_process("--scenario", "default", "--set", "utilization=0.5")  # another question: searched, not recalled
    assert other != first and searches["searches"] >= 1


def test_a_forged_or_stale_entry_costs_a_search_never_another_answer(searches, tmp_path, monkeypatch):
    first = solve_in_a_new_process()
    (entry,) = (tmp_path / "cache" / "loops").iterdir()
    head, _, body = entry.read_bytes().partition(b"\n")
    assert b'"replicas",7.0' in body
    entry.write_bytes(head + b"\n" + body.replace(b'"replicas",7.0', b'"replicas",3.0'))  # MAC now fails
    searches["searches"] = 0
    assert solve_in_a_new_process() == first and searches["searches"] >= 1
    monkeypatch.setattr(cachefiles, "_SOURCE_DIGEST", "0" * 64)  # an edited concur: another key
    searches["searches"] = 0
    assert solve_in_a_new_process() == first and searches["searches"] >= 1
