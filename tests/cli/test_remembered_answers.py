"""``concur solve``'s remembered answers: the same question on unchanged files prints the same bytes
without solving; any change to what it read, or to how it was asked, is solved again.

Effort is counted (how many times the solve path runs), never timed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from concur.cli import answers, main
from concur.cli import givens as cli_givens

HEADLINE = ["solve", "--find", "replicas,fleet_gpus,cost_per_month"]
QUEUE = [
    "solve",
    "queueing",
    "--find",
    "mean_wait",
    "--set",
    "servers=1",
    "--set",
    "arrival_rate=8/s",
    "--set",
    "service_time=0.1s",
]


@pytest.fixture
def solves(tmp_path, monkeypatch, own_cache_key) -> list[tuple[str, ...]]:
    """A cache folder of this test's own, and the list of questions the solve path was asked."""
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    asked: list[tuple[str, ...]] = []
    real = cli_givens.solve_question

    def counted(*args, **kwargs):
        asked.append(tuple(args[1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(cli_givens, "solve_question", counted)
    return asked


def run(capsys, args: list[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as stop:
        main(args)
    out = capsys.readouterr()
    return int(stop.value.code or 0), out.out + out.err


def test_the_same_question_is_printed_again_without_solving(solves, capsys):
    first = run(capsys, HEADLINE)
    assert first[0] == 0 and "replicas" in first[1]
    assert run(capsys, HEADLINE) == first
    assert run(capsys, [*HEADLINE, "--json"])[0] == 0  # another way of asking: solved
    assert run(capsys, HEADLINE) == first
    assert len(solves) == 2


def test_every_word_of_the_question_counts(solves, capsys):
    run(capsys, QUEUE)
    run(capsys, [*QUEUE[:-1], "service_time=0.09s"])
    run(capsys, [*QUEUE, "--explain"])
    run(capsys, QUEUE)
    assert len(solves) == 3


def test_an_edited_pack_is_solved_again(solves, capsys, tmp_path):
    shipped = Path(__file__).resolve().parents[2] / "formulas" / "queueing.yaml"
    mine = tmp_path / "mine" / "queueing_copy.yaml"
    mine.parent.mkdir()
    mine.write_bytes(shipped.read_bytes().replace(b"pack: queueing", b"pack: queueing_copy", 1))
    args = ["solve", str(mine), *QUEUE[2:], "--json"]
    before = json.loads(run(capsys, args)[1])
    assert run(capsys, args)[1] == json.dumps(before, indent=2) + "\n"
    assert len(solves) == 1
    text = mine.read_text()
    mine.write_text(text.replace("requests arriving per second", "requests arriving each second"))  # other bytes
    assert json.loads(run(capsys, args)[1])["results"] == before["results"]
    assert len(solves) == 2


def test_a_new_user_catalog_is_solved_again(solves, capsys, tmp_path, monkeypatch):
    folder = tmp_path / "catalogs"
    folder.mkdir()
    monkeypatch.setenv("CONCUR_CATALOG_PATH", str(folder))
    cost = run(capsys, HEADLINE)[1]
    (folder / "prices.yaml").write_text("catalog: prices\ndoc: mine\nfields: {}\nentries: {}\n")
    assert run(capsys, HEADLINE)[1] == cost  # the listing changed: solved again, same answer
    assert len(solves) == 2


def test_a_forged_entry_costs_the_solve_never_another_answer(solves, capsys, tmp_path):
    first = run(capsys, QUEUE)
    (entry,) = (tmp_path / "cache" / "answers").glob("*.json")
    header, body = entry.read_bytes().split(b"\n", 1)
    entry.write_bytes(header + b"\n" + body.replace(b"mean_wait", b"MEAN_WAIT"))
    assert run(capsys, QUEUE) == first
    assert len(solves) == 2


def test_a_refusal_is_never_remembered(solves, capsys):
    refused = [arg.replace("arrival_rate=8/s", "arrival_rate=12/s") for arg in QUEUE]  # load 1.2 on one server
    first = run(capsys, refused)
    assert first[0] == 3
    assert run(capsys, refused) == first
    assert len(solves) == 2


def test_a_scenario_from_stdin_is_never_remembered():
    assert answers.question_key((), ("users",), (), "-", False, False) is None


def test_a_remembered_answer_imports_no_solver(tmp_path, own_cache_key):
    env = {**os.environ, "CONCUR_CACHE_DIR": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('solver imported:', 'concur.solver.question' in sys.modules, file=sys.stderr))\n"
        "from concur.cli import main\n"
        f"main({HEADLINE!r})\n"
    )
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True) for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0]
    assert runs[0].stdout == runs[1].stdout
    assert "solver imported: True" in runs[0].stderr
    assert "solver imported: False" in runs[1].stderr
