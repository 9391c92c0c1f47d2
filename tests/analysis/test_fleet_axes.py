"""One rule narrows the fleet plan's grid, for ``concur plan``'s options and a workbook's ``plan:``."""

from __future__ import annotations

from pathlib import Path

import pytest

from concur.analysis.fleet_axes import AXIS_KEYS, narrow_axes
from concur.analysis.fleet_plan import default_axes
from concur.errors import UnknownNameError, UsageError
from concur.excel.definition import fleet_plan_of, load_definition
from concur.lang.model import Model, build_model


@pytest.fixture(scope="module")
def fleet() -> Model:
    return build_model(["llm_fleet"])


def test_nothing_named_is_the_default_grid(fleet: Model) -> None:
    assert narrow_axes(fleet, {}) == default_axes(fleet, {})
    assert narrow_axes(fleet, {key: [] for key in AXIS_KEYS}) == default_axes(fleet, {})


def test_named_axes_replace_theirs_and_dtypes_pair_up(fleet: Model) -> None:
    axes = narrow_axes(fleet, {"tp": [4], "weight_dtypes": ["fp8"], "kv_dtypes": ["bf16", "fp8"]})
    assert axes["tp"] == [4]
    assert axes["dtypes"] == [("fp8", "bf16"), ("fp8", "fp8")]
    assert axes["gpu"] == default_axes(fleet, {})["gpu"]


def test_a_value_named_twice_is_sized_once_and_tp_stays_within_the_packs_bound(fleet: Model) -> None:
    """5,000 copies of one GPU were 5,000 copies of its rows (minutes); TP 1 to 4,999 was 1.1
    million configurations, past the fleet pack's bound of 1,024 on tp."""
    axes = narrow_axes(fleet, {"gpus": ["h100-sxm-80gb"] * 5000, "tp": [4, 2, 4], "engines": ["vllm", "vllm"]})
    assert axes["gpu"] == ["h100-sxm-80gb"] and axes["tp"] == [4, 2] and axes["engine"] == ["vllm"]
    with pytest.raises(UsageError, match=r"TP values are at most 1,024 \(the fleet pack's bound\), got 2048") as err:
        narrow_axes(fleet, {"tp": [4, 2048]})
    assert err.value.field == "tp"


@pytest.mark.parametrize(
    ("narrow", "field", "error"),
    [
        ({"gpus": ["h100-sxm-81gb"]}, "gpus", UnknownNameError),
        ({"kv_dtypes": ["fp5"]}, "kv_dtypes", UnknownNameError),
        ({"tp": [0]}, "tp", UsageError),
        ({"tp": [True]}, "tp", UsageError),
        ({"engines": ["vllm@0.8"]}, "engines", UsageError),
        ({"gpu": ["h100-sxm-80gb"]}, "gpu", UsageError),
    ],
)
def test_a_bad_value_names_its_field_and_no_option(fleet: Model, narrow: dict, field: str, error: type) -> None:
    with pytest.raises(error) as caught:
        narrow_axes(fleet, narrow)
    assert caught.value.field == field
    assert "--" not in str(caught.value)


def test_a_workbook_definition_names_the_key_and_file(tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text("title: t\npacks: [llm_fleet]\nfind: [replicas]\nplan: {tp: [4, 0]}\n")
    with pytest.raises(UsageError, match=r"fleet\.yaml: plan\.tp: TP values are whole numbers of at least 1, got 4, 0"):
        fleet_plan_of(load_definition(path))
    path.write_text("title: t\npacks: [llm_fleet]\nfind: [replicas]\nplan: {tp: []}\n")
    with pytest.raises(UsageError, match=r"plan\.tp: an empty list"):
        fleet_plan_of(load_definition(path))
