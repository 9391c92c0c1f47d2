"""Sweep limits: a grid's total points are capped (the cap in the error), an interrupted or failed run
leaves no temporary file, ``sweep --scenario`` starts from a scenario, and integer axes print as integers.

Interruptions are delivered deterministically: the CSV writer is replaced by one that signals its own
process (or raises) after writing a first row, so no test waits on a clock.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from concur.cli import main

T70 = ["--set", "model=llama-3.1-70b", "--set", "gpu=h100-sxm-80gb", "--set", "context=8k"]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def test_two_axes_of_ten_thousand_are_refused_with_the_cap(capsys):
    code, _, err = cli(
        capsys, "sweep", "littles_law", "--find", "in_flight", "--set", "residence_time=1",
        "--over", "arrival_rate=1..2:10000", "--over", "residence_time=1..2:10000",
    )  # fmt: skip
    assert code == 2, err
    code, _, err = cli(
        capsys, "sweep", "littles_law", "--find", "in_flight",
        "--over", "arrival_rate=1..2:10000", "--over", "residence_time=1..2:10000",
    )  # fmt: skip
    assert code == 2
    assert "100,000,000 points (10,000 x 10,000)" in err and "the cap is 10,000,000" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_compare_values_count_towards_the_cap(capsys):
    code, _, err = cli(
        capsys, "sweep", "littles_law", "--find", "in_flight", "--over", "arrival_rate=1..2:5000000",
        "--compare", "residence_time=1,2,3",
    )  # fmt: skip
    assert code == 2 and "15,000,000 points (5,000,000 x 3)" in err


def test_a_grid_at_the_cap_is_accepted_by_the_check():
    from concur.sweep.vector import MAX_POINTS, require_points

    assert require_points([1000, 10_000]) == MAX_POINTS
    with pytest.raises(Exception, match="the cap is 10,000,000"):
        require_points([1001, 10_000])


def test_integer_axes_print_as_integers(capsys):
    code, out, err = cli(capsys, "sweep", "llm_memory", "--find", "users", "--over", "tp=1,2,4", *T70, "--csv", "-")
    assert code == 0, err
    assert out.splitlines() == ["config,tp,users [user]", "scenario,1,", "scenario,2,1", "scenario,4,56"]
    code, out, err = cli(capsys, "sweep", "llm_memory", "--find", "users", "--over", "tp=1,2,4", *T70, "--json")
    cols = json.loads(out)["runs"][0]["columns"]
    assert cols == {"tp": [1, 2, 4], "users": [None, 1, 56]}
    assert all(type(v) is int for v in cols["tp"])


def test_sweep_scenario_default_and_file(capsys, tmp_path: Path):
    code, out, err = cli(
        capsys, "sweep", "--scenario", "default", "--find", "replicas", "--over", "arrival_rate=10,100"
    )
    assert code == 0, err
    rows = [line.split() for line in out.splitlines()[1:]]
    assert rows == [["10", "2"], ["100", "14"]]  # concur solve --scenario default --set arrival_rate=100 gives 14
    scenario = tmp_path / "s.yaml"
    scenario.write_text("packs: [littles_law]\ngiven: {residence_time: 2 s, arrival_rate: 999}\n")
    code, out, err = cli(
        capsys, "sweep", "--scenario", str(scenario), "--find", "in_flight", "--over", "arrival_rate=1,3", "--csv", "-"
    )
    assert code == 0, err
    assert out.splitlines()[1:] == ["scenario,1.0,2.0", "scenario,3.0,6.0"]  # --over wins over the scenario's value


def test_an_unknown_over_name_is_named(capsys):
    code, _, err = cli(capsys, "sweep", "--find", "replicas", "--over", "arival_rate=10,100")
    assert code == 2 and "'arival_rate'" in err and "did you mean arrival_rate" in err


@pytest.mark.parametrize(
    "option, words",
    [
        (("--over", "context=1..inf"), "--over 'context=1..inf': inf is not a finite number"),
        (("--over", "context=nan..100"), "--over 'context=nan..100': nan is not a finite number"),
        (("--over", "context=5,inf,7"), "--over 'context=5,inf,7': inf is not a finite number"),
        (("--over", "context=5,1e309"), "--over 'context=5,1e309': inf is not a finite number"),
        (("--over", "context=5,7", "--compare", "mem_util=0.9,nan"), "--compare 'mem_util=0.9,nan': nan is not"),
    ],
)
def test_over_and_compare_refuse_values_that_are_not_finite(capsys, option, words):
    """--set context=inf is refused; --over context=1..inf printed numpy's RuntimeWarning and then
    blamed 'nan token/user', and context=5,inf,7 gave a silent nan row with exit 0."""
    code, _, err = cli(capsys, "sweep", "llm_memory", "--find", "users", *T70[:4], "--set", "tp=4", *option)
    assert code == 2 and err.count("\n") == 1 and words in err, err


def _interrupting_writer(action):
    from concur.cli import tabular

    real = tabular.write_csv

    def write(out, header, blocks):
        out.write(",".join(header) + "\n")
        out.flush()
        action()
        return real(out, header, blocks)

    return write


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_writing_leaves_no_temporary_file(capsys, monkeypatch, tmp_path: Path, signum, code):
    from concur.cli import tabular

    target = tmp_path / "grid.csv"
    seen: list[list[str]] = []

    def signal_self() -> None:
        seen.append(sorted(p.name for p in tmp_path.iterdir()))  # the temporary file exists here
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(tabular, "write_csv", _interrupting_writer(signal_self))
    before = signal.getsignal(signal.SIGTERM)
    got, _, _ = cli(
        capsys, "sweep", "littles_law", "--find", "in_flight", "--set", "residence_time=1",
        "--over", "arrival_rate=1..2:1000", "--csv", str(target),
    )  # fmt: skip
    assert seen == [[f".grid.csv.{os.getpid()}.tmp"]]
    assert got == code
    assert list(tmp_path.iterdir()) == []  # neither the temporary nor a half-written grid.csv
    assert signal.getsignal(signal.SIGTERM) == before  # main() put the handler back


def test_an_exception_while_writing_leaves_no_temporary_file(monkeypatch, tmp_path: Path):
    from concur.cli import tabular

    def fail() -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(tabular, "write_csv", _interrupting_writer(fail))
    with pytest.raises(RuntimeError):
        main(
            ["sweep", "littles_law", "--find", "in_flight", "--set", "residence_time=1",
             "--over", "arrival_rate=1..2:10", "--csv", str(tmp_path / "grid.csv")]
        )  # fmt: skip
    assert list(tmp_path.iterdir()) == []
