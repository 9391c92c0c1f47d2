"""The field's own words: rate units (rps is requests, not revolutions), misspelt names named with a
did-you-mean, and physical lower bounds on every count, length and rate of the shipped packs.

Each CLI test runs ``concur.cli.main`` in-process and checks the exit code and the one-line message.
"""

from __future__ import annotations

import json

import pytest

from concur.cli import main
from concur.errors import UnitError
from concur.lang import units

FLEET = [
    "--set",
    "model=llama-3.1-8b",
    "--set",
    "gpu=h100-sxm-80gb",
    "--set",
    "input_tokens=2000",
    "--set",
    "output_tokens=500",
]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``concur ARGS``."""
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def _in_flight(capsys, rate: str) -> float:
    code, out, err = cli(
        capsys, "solve", "littles_law", "--find", "in_flight", "--set", f"arrival_rate={rate}",
        "--set", "residence_time=1 s", "--json",
    )  # fmt: skip
    assert code == 0, err
    return float(json.loads(out)["results"]["in_flight"]["value"])


@pytest.mark.parametrize(
    "rate, per_second",
    [
        ("30 rps", 30.0),
        ("30 qps", 30.0),
        ("30 RPS", 30.0),
        ("30 rpm", 0.5),
        ("30 req/min", 0.5),
        ("30 req/s", 30.0),
        ("30 requests/s", 30.0),
        ("30 queries/s", 30.0),
        ("3600 rph", 1.0),
        ("2 krps", 2000.0),
    ],
)
def test_request_rate_words_read_as_requests(capsys, rate, per_second):
    assert _in_flight(capsys, rate) == pytest.approx(per_second, rel=1e-12)


@pytest.mark.parametrize("text", ["tps", "tok/s", "tokens/s", "token/s"])
def test_token_rate_words_read_as_tokens(text):
    info = units.unit_info(text)
    assert info.factor == 1.0 and info.dims == (("[time]", -1.0), ("[token]", 1.0))
    assert units.unit_info("tpm").factor == pytest.approx(1 / 60)


@pytest.mark.parametrize("text", ["revolution/s", "2 turn", "cycle/minute", "rad/s", "degree/s"])
def test_pint_angles_are_refused(text):
    with pytest.raises(UnitError, match="angle"):
        units.unit_info(text.split()[-1])


def test_the_fleet_reads_30_rps_as_30_requests(capsys):
    code, out, err = cli(capsys, "solve", "--find", "replicas", *FLEET, "--set", "arrival_rate=30 rps", "--json")
    assert code == 0, err
    assert json.loads(out)["given"]["arrival_rate"]["value"] == pytest.approx(30.0)


def test_a_unit_of_another_dimension_is_refused_naming_both(capsys):
    code, _, err = cli(
        capsys,
        "solve",
        "littles_law",
        "--find",
        "in_flight",
        "--set",
        "arrival_rate=30 tps",
        "--set",
        "residence_time=1",
    )
    assert code == 2
    assert "'30 tps' does not fit arrival_rate" in err
    assert "'tps' is [token] / [time]" in err and "arrival_rate is 'request/s'" in err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    "args, typo, suggestion",
    [
        (["--find", "replicas", *FLEET, "--set", "arival_rate=30"], "arival_rate", "arrival_rate"),
        (
            ["--find", "replicas", "--set", "model=llama-3.1-8b", "--set", "input_token=2000"],
            "input_token",
            "input_tokens",
        ),
        (["--find", "replica", "--set", "model=llama-3.1-8b"], "replica", "replicas"),
        (["--find", "Replicas"], "Replicas", "replicas"),
        (["--find", "users", "--set", "contxt=8192"], "contxt", "context"),
    ],
)
def test_a_misspelt_name_is_named_with_a_did_you_mean(capsys, args, typo, suggestion):
    code, _, err = cli(capsys, "solve", *args)
    assert code == 2, err
    assert f"unknown variable '{typo}'" in err and "did you mean" in err
    assert suggestion in err.split("did you mean", 1)[1].split("?")[0]
    assert "'model'" not in err  # the typo is named, never blamed on another name
    assert err.count("\n") == 1


def test_a_misspelt_name_in_a_named_pack_is_named(capsys):
    code, _, err = cli(capsys, "solve", "llm_fleet", "--find", "replicas", "--set", "arival_rate=3")
    assert code == 2 and "unknown variable 'arival_rate'" in err and "did you mean arrival_rate" in err


def test_catalog_ids_are_read_ignoring_case(capsys):
    code, out, err = cli(capsys, "solve", "--find", "replicas", *FLEET, "--set", "arrival_rate=3", "--json")
    assert code == 0, err
    lower = json.loads(out)["results"]
    upper_args = [a.replace("h100-sxm-80gb", "H100-SXM-80GB").replace("llama", "Llama") for a in FLEET]
    code, out, err = cli(capsys, "solve", "--find", "replicas", *upper_args, "--set", "arrival_rate=3", "--json")
    assert code == 0, err
    assert json.loads(out)["results"] == lower
    assert json.loads(out)["given"]["gpu"]["value"] == "h100-sxm-80gb"


def test_an_unknown_catalog_id_gets_a_did_you_mean(capsys):
    code, _, err = cli(capsys, "solve", "--find", "replicas", *FLEET[:2], "--set", "gpu=H100-SXM-80G")
    assert code == 2 and "unknown gpu 'H100-SXM-80G'; did you mean h100-sxm-80gb" in err


def _physical(var) -> bool:
    """A count, length, size, duration or rate: what cannot be negative."""
    dims = dict(var.unit.dims)
    return not var.choices and (
        var.integer or any(d in units.COUNT_DIMENSIONS or d in ("[time]", "[information]") for d in dims)
    )


def test_every_count_length_and_rate_of_the_shipped_packs_has_a_lower_bound():
    from concur.lang.library import get_pack, pack_paths

    missing = []
    checked = 0
    for name in pack_paths():
        for var in get_pack(name).variables.values():
            if _physical(var):
                checked += 1
                if var.bounds[0] is None or var.bounds[0] < 0:
                    missing.append(f"{var.where}: {var.name} [{var.unit.text}]")
    assert checked > 100  # the walk reaches the packs' variables
    assert not missing, "add bounds: [0, null] (or the physical minimum) to:\n" + "\n".join(missing)


def test_a_negative_token_count_is_refused_naming_the_variable_and_the_bound(capsys):
    code, _, err = cli(
        capsys, "solve", "--find", "replicas", "--set", "model=llama-3.1-8b", "--set", "gpu=h100-sxm-80gb",
        "--set", "input_tokens=-100", "--set", "output_tokens=500", "--set", "arrival_rate=3",
    )  # fmt: skip
    assert code == 2
    assert "input_tokens=-100 is below its lower bound 1 token/request" in err and err.count("\n") == 1
    code, _, err = cli(
        capsys, "solve", "littles_law", "--find", "in_flight", "--set", "arrival_rate=-1", "--set", "residence_time=1"
    )
    assert code == 2 and "arrival_rate=-1 is below its lower bound 0 request/s" in err
