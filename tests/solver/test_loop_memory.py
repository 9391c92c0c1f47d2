"""The README's headline question remembers its replicas search across processes.

Counts, not timings: the integer searches (``integers.smallest`` calls) of a solve. A new process
is simulated by forgetting everything this process compiled (``concur.compiled.forget``); the
disk entry (HMAC-authenticated, keyed by the packs' content, the question, the loop's input
values and concur's own source) answers byte for byte what the search answers, and a forged or
stale entry is a miss.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

import concur.solver.blocks as blocks
import concur.solver.integers as integers
import concur.solver.loopmemo as loopmemo
from concur import cache as cachefiles
from concur import compiled
from concur.cli import cli

HEADLINE = ["solve", "--find", "replicas,fleet_gpus,cost_per_month", "--json"]


@pytest.fixture
def searches(tmp_path, monkeypatch, own_cache_key):
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    compiled.forget()
    monkeypatch.setattr(loopmemo, "_WRITES", 0)  # a fresh process: earlier tests used up its writes
    seen = {"searches": 0}
    smallest = integers.smallest

    def counted(*args, **kwargs):
        seen["searches"] += 1
        return smallest(*args, **kwargs)

    monkeypatch.setattr(integers, "smallest", counted)
    return seen


def solve_in_a_new_process(*extra: str) -> str:
    compiled.forget()
    forget_answers()
    out = CliRunner().invoke(cli, [*HEADLINE, *extra])
    assert out.exit_code == 0, out.output
    return out.output


def forget_answers() -> None:
    """The printed answer is remembered too (``concur.cli.answers``) and would be printed without
    solving; these tests count the loop memory's own work, so every solve here really solves."""
    shutil.rmtree(Path(os.environ["CONCUR_CACHE_DIR"]) / "answers", ignore_errors=True)


def test_a_warm_headline_question_does_not_search_again_and_answers_the_same(searches):
    first = solve_in_a_new_process()
    assert searches["searches"] >= 1
    searches["searches"] = 0
    assert solve_in_a_new_process() == first and searches["searches"] == 0
    other = solve_in_a_new_process("--scenario", "default", "--set", "utilization=0.5")  # searched, not recalled
    assert other != first and searches["searches"] >= 1


def test_a_forged_or_stale_entry_costs_a_search_never_another_answer(searches, tmp_path, monkeypatch):
    first = solve_in_a_new_process()
    (entry,) = [p for p in (tmp_path / "cache" / "loops").iterdir() if b'"replicas",7.0' in p.read_bytes()]
    head, _, body = entry.read_bytes().partition(b"\n")
    entry.write_bytes(head + b"\n" + body.replace(b'"replicas",7.0', b'"replicas",3.0'))  # MAC now fails
    searches["searches"] = 0
    assert solve_in_a_new_process() == first and searches["searches"] >= 1
    monkeypatch.setattr(cachefiles, "_SOURCE_DIGEST", "0" * 64)  # an edited concur: another key
    searches["searches"] = 0
    assert solve_in_a_new_process() == first and searches["searches"] >= 1


def test_a_torn_loop_without_a_root_is_refused_the_same_from_memory(searches, tmp_path, monkeypatch):
    """A goal seek probes fleets where one replica cannot keep up: the inner torn loop has no root.
    That refusal is remembered with its text; the warm solve refuses with the same line, re-solving
    (almost) no inner trial."""
    trials = {"n": 0}
    trial = blocks._Run.trial

    def counted(self, *args, **kwargs):
        trials["n"] += 1
        return trial(self, *args, **kwargs)

    monkeypatch.setattr(blocks._Run, "trial", counted)
    args = ["solve", "--find", "replicas,fleet_gpus,cost_per_month", "--scenario", "default", "--set", "ttft_slo=1 ms"]
    runs = []
    for _ in range(2):
        compiled.forget()
        forget_answers()
        trials["n"] = 0
        out = CliRunner().invoke(cli, args)
        runs.append((out.exit_code, str(out.exception), trials["n"]))
    assert runs[0][:2] == runs[1][:2] and "out of reach" in runs[0][1], runs
    assert any(b'"no_root"' in p.read_bytes() for p in (tmp_path / "cache" / "loops").iterdir())
    assert runs[0][2] >= 100 and runs[1][2] * 10 <= runs[0][2], runs


def test_a_loop_without_a_root_is_scanned_once_not_once_per_tear(searches, monkeypatch):
    """Where a fleet of n replicas saturates, the served-step loop has no fixed point: its first
    tear's residual is defined and of one sign across its whole range. Its other tears (the same
    equations) are not scanned again: the headline question's search costs about 1,000 inner
    solves, where scanning each of the four tears cost about 3,000."""
    tried = {"n": 0, "tears": []}
    trial, tear = blocks._Run.trial, blocks._Run.tear

    def counted(self, *args, **kwargs):
        tried["n"] += 1
        return trial(self, *args, **kwargs)

    def torn(self, step):
        tried["tears"].append(len(step.tears))
        return tear(self, step)

    monkeypatch.setattr(blocks._Run, "trial", counted)
    monkeypatch.setattr(blocks._Run, "tear", torn)
    solve_in_a_new_process()
    assert max(tried["tears"]) >= 4  # the loop does have other tears to fall back on
    assert 500 <= tried["n"] <= 1200, tried["n"]
