"""Engine presets carry the release their constants were fitted on (concur.lang.versions).

``engine=vllm`` is the release the engines catalog names current; ``engine=vllm@X`` is accepted
for a fitted release X and gives the same constants; any other release is refused in one line
listing the known ones; every answer says which release it used (note and ``--json`` "assumed");
``concur plan --engines`` and the fleet pack take the same ids.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from concur.cli import main
from concur.errors import UnknownNameError
from concur.lang.library import get_catalog
from concur.lang.versions import fitted_versions, release, release_key, split_id

THROUGHPUT = [
    "llm_throughput", "--find", "t_step_served", "--set", "model=llama-3.1-8b", "--set", "gpu=h100-sxm-80gb",
    "--set", "concurrency=32", "--set", "input_tokens=1000", "--set", "output_tokens=200",
]  # fmt: skip
FLEET = [
    "--find", "replicas", "--set", "model=llama-3.1-8b", "--set", "gpu=h100-sxm-80gb",
    "--set", "input_tokens=2000", "--set", "output_tokens=500", "--set", "arrival_rate=30",
]  # fmt: skip


def cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("vLLM v0.10.2", "0.10"),
        ("v0.6.0 (--num-scheduler-steps 10)", "0.6"),
        ("lmsysorg/sglang:v0.5.9-rocm700-mi35x", "0.5"),
        ("nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc6.post2", "1.2"),
        ("TensorRT-LLM v1.2.0rc1", "1.2"),
        ("NIM 1.8.0 (TensorRT-LLM profile)", None),  # NIM's version, not the engine's
        ("TensorRT-LLM (NVIDIA MLPerf v4.1 submission, TensorRT 10.2 / CUDA 12.4)", None),
        ("not recorded (row has image: null)", None),
        ("vLLM-based (AMD MLPerf v4.1 submission)", None),
    ],
)
def test_release_reads_the_engines_own_version(text: str, expected: str | None) -> None:
    assert release(text) == expected


def test_every_engine_entry_names_its_current_release_among_the_fitted_ones() -> None:
    catalog = get_catalog("engines")
    for ident in ("vllm", "sglang", "trtllm"):
        entry = catalog.entries[ident]
        versions = fitted_versions([catalog], ident)
        assert versions and entry.values["version"][0] == max(versions, key=release_key), ident
    assert "version" not in catalog.entries["default"].values  # no engine, no release
    assert fitted_versions([catalog], "vllm") == ["0.6", "0.10", "0.11"]
    assert split_id("vllm@0.10") == ("vllm", "0.10") and split_id("vllm") == ("vllm", None)


def test_bare_engine_is_the_current_release_and_the_answer_says_so(capsys: Any) -> None:
    code, out, err = cli(capsys, "solve", *THROUGHPUT, "--set", "engine=vllm", "--json")
    assert code == 0, err
    assumed = json.loads(out)["assumed"]["engine"]
    assert assumed["value"] == "vllm@0.11"
    assert "releases 0.6, 0.10, 0.11" in assumed["source"]


def test_a_fitted_release_is_accepted_named_and_gives_the_same_constants(capsys: Any) -> None:
    code, bare, err = cli(capsys, "solve", *THROUGHPUT, "--set", "engine=vllm", "--json")
    assert code == 0, err
    code, typed, err = cli(capsys, "solve", *THROUGHPUT, "--set", "engine=vllm@0.10", "--json")
    assert code == 0, err
    a, b = json.loads(bare), json.loads(typed)
    assert b["assumed"]["engine"]["value"] == "vllm@0.10"
    assert b["given"]["engine"]["value"] == "vllm@0.10" and a["given"]["engine"]["value"] == "vllm"
    assert a["results"]["t_step_served"] == b["results"]["t_step_served"]  # one fit over the releases
    assert any("vllm@0.10" in n and "fitted on releases 0.6, 0.10, 0.11" in n for n in b["notes"])
    code, _, err = cli(capsys, "solve", *THROUGHPUT, "--set", "engine=vllm@v0.10.2")  # a patch release of 0.10
    assert code == 0, err


@pytest.mark.parametrize("ident", ["vllm@0.8", "vllm@1.0", "sglang@0.4", "trtllm@0.9"])
def test_an_unfitted_release_is_refused_in_one_line_listing_the_known_ones(capsys: Any, ident: str) -> None:
    code, out, err = cli(capsys, "solve", *THROUGHPUT, "--set", f"engine={ident}")
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    name = ident.split("@")[0]
    assert f"unknown engine version '{ident}'" in lines[0]
    for version in fitted_versions([get_catalog("engines")], name):
        assert f"{name}@{version}" in lines[0]


def test_an_entry_without_versions_takes_no_release(capsys: Any) -> None:
    code, _, err = cli(capsys, "solve", *THROUGHPUT, "--set", "engine=default@1.0")
    assert code == 2 and "states no versions" in err


def test_an_unknown_engine_with_a_release_is_still_an_unknown_engine(capsys: Any) -> None:
    code, _, err = cli(capsys, "solve", *THROUGHPUT, "--set", "engine=tgi@2.0")
    assert code == 2 and "unknown engine 'tgi'" in err


def test_the_fleet_takes_versioned_ids_and_names_the_release_it_assumed(capsys: Any) -> None:
    code, out, err = cli(capsys, "solve", *FLEET, "--set", "engine=sglang@0.5", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["assumed"]["engine"]["value"] == "sglang@0.5"
    code, out, err = cli(capsys, "solve", *FLEET)
    assert code == 0, err
    assert "assumed engine = vllm@0.11 (vLLM (V1 engine))" in out


def test_plan_axes_take_fitted_releases_and_refuse_others() -> None:
    from concur.cli.commands.plan import _axes

    axes = _axes((), (), (), (), ("vllm@0.10,sglang",))
    assert axes is not None and axes["engine"] == ["vllm@0.10", "sglang"]
    with pytest.raises(UnknownNameError, match="vllm@0.6, vllm@0.10, vllm@0.11"):
        _axes((), (), (), (), ("vllm@0.8",))


def test_a_plan_says_which_release_each_bare_engine_is(capsys: Any) -> None:
    from concur.analysis.fleet_plan import engine_releases_note

    assert engine_releases_note(["default", "vllm@0.10"]) == ""  # nothing bare with a release
    assert "vllm = vllm@0.11" in engine_releases_note(["default", "vllm"])
    question = ["--set", "model=llama-3.1-8b", "--set", "arrival_rate=10", "--set", "input_tokens=1000"]
    question += ["--set", "output_tokens=200", "--gpus", "h100-sxm-80gb", "--tp", "1", "--weight-dtypes", "bf16"]
    code, out, err = cli(capsys, "plan", *question, "--kv-dtypes", "bf16", "--engines", "vllm,sglang@0.5")
    assert code == 0, err
    assert "vllm = vllm@0.11" in out and "sglang = " not in out and "sglang@0.5" in out


def test_a_workbook_plan_takes_fitted_releases_and_refuses_others(tmp_path: Any) -> None:
    from concur.errors import UsageError
    from concur.excel.definition import fleet_plan_of, load_definition

    def definition(plan: str) -> Any:
        path = tmp_path / "fleet.yaml"
        path.write_text(f"title: t\npacks: [llm_fleet]\nfind: [replicas]\nplan: {plan}\n")
        return load_definition(path)

    from concur.analysis.fleet_axes import narrow_axes
    from concur.lang.model import build_model

    axes = narrow_axes(build_model(["llm_fleet"]), {"engines": ["vllm@0.10", "sglang"]})
    assert axes["engine"] == ["vllm@0.10", "sglang"]
    with pytest.raises(UsageError, match=r"fleet\.yaml: plan\.engines: unknown engine version 'vllm@0\.8'"):
        fleet_plan_of(definition("{engines: [vllm@0.8]}"))
    with pytest.raises(UsageError, match=r"plan\.gpus: unknown gpu 'h100@1'"):
        fleet_plan_of(definition("{gpus: [h100@1]}"))
