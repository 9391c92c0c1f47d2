"""The fleet plan is computed once per inputs: read back equal, recomputed when a file it read changes.

Counts calls of the planner (never times): the second export of the same question reads the plan
from the cache folder; changing the bytes of a catalog the plan read, or asking another question,
plans again.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from concur.analysis import fleet_memo
from concur.analysis.fleet_axes import narrow_axes
from concur.lang.library import formulas_dir
from concur.lang.model import build_model

QUESTION = {
    "model": "llama-3.1-70b",
    "arrival_rate": "50 request/s",
    "input_tokens": "1000 token/request",
    "output_tokens": "400 token/request",
    "ttft_slo": "2 s",
    "itl_slo": "50 ms",
}


@pytest.fixture
def planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_cache_key: None) -> list[Any]:
    """Every plan the planner really computed in this test."""
    monkeypatch.setenv("CONCUR_CACHE_DIR", str(tmp_path / "cache"))
    calls: list[Any] = []
    real = fleet_memo.plan_fleet

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(real(*args, **kwargs))
        return calls[-1]

    monkeypatch.setattr(fleet_memo, "plan_fleet", counting)
    return calls


def _axes() -> dict[str, list[Any]]:
    narrow = {"gpus": ["h100-sxm-80gb", "h200-sxm-141gb"], "tp": [4, 8], "engines": ["default"]}
    return narrow_axes(build_model(["llm_fleet"]), narrow)


def test_the_same_question_is_planned_once_and_read_back_equal(planned: list[Any]) -> None:
    first = fleet_memo.plan_fleet_once(QUESTION, _axes())
    again = fleet_memo.plan_fleet_once(QUESTION, _axes())
    assert len(planned) == 1
    assert again == first and again is not first
    assert [c.config for c in again.candidates] == [c.config for c in first.candidates]
    assert any(c.feasible for c in again.candidates)


def test_another_question_is_planned_again(planned: list[Any]) -> None:
    fleet_memo.plan_fleet_once(QUESTION, _axes())
    fleet_memo.plan_fleet_once({**QUESTION, "arrival_rate": "60 request/s"}, _axes())
    assert len(planned) == 2


def test_a_changed_catalog_file_is_a_miss(planned: list[Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = tmp_path / "catalogs"
    user.mkdir()
    prices = user / "prices.yaml"
    shutil.copy(formulas_dir() / "catalogs" / "prices.yaml", prices)
    monkeypatch.setenv("CONCUR_CATALOG_PATH", str(user))
    fleet_memo.plan_fleet_once(QUESTION, _axes())
    fleet_memo.plan_fleet_once(QUESTION, _axes())
    assert len(planned) == 1  # the user's catalog was read, and is unchanged
    prices.write_text(prices.read_text() + "\n# edited\n")
    fleet_memo.plan_fleet_once(QUESTION, _axes())
    assert len(planned) == 2
