"""The suite holds enough recent public serving measurements, on both vendors and both model kinds.

A point of tests/data/throughput_points.yaml *qualifies* when it states everything a serving
measurement needs to be checked against (and fitted by) the step model, and is recent:

* engine vLLM, SGLang or TensorRT-LLM, with an ``engine_version`` naming a release of that engine
  (:func:`concur.lang.versions.release`: ``NIM 1.8.0`` or ``not recorded`` names none);
* ``published`` on or after 2025-01-01 (the run's or the page's date, see tests/data/README.md);
* a catalog GPU, an integer ``tp``, a catalog model, catalog weight and KV dtypes;
* the lengths (numeric ``isl``/``osl``, or their published means under ``derived_not_measured``);
* the load: a closed-loop concurrency (an integer) or an open-loop rate (``N req/s``);
* a measured throughput (aggregate or per GPU) and a measured TPOT, ITL or TTFT;
* a ``source`` URL and a ``locator`` inside it.

At least 30 points must qualify, with NVIDIA and AMD GPUs and dense and MoE models among them.
(tests/data/step_time_refs.yaml adds none: its refs repeat points of this file -- the ``point``
they name -- or, for the three vLLM-on-B200 runs of vllm-project/vllm PR 20759, ran a main-branch
build that names no release and publish TPOT without a throughput.)
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from concur.lang.library import get_catalog
from concur.lang.versions import release

ROOT = Path(__file__).resolve().parents[2]
POINTS = YAML(typ="safe").load((ROOT / "tests" / "data" / "throughput_points.yaml").read_text())["points"]
REFS = YAML(typ="safe").load((ROOT / "tests" / "data" / "step_time_refs.yaml").read_text())["refs"]
ENGINES = ("vllm", "sglang", "trtllm")
SINCE = "2025-01-01"
MINIMUM = 30
_DTYPE_ALIASES = {"nvfp4": "fp4"}  # NVIDIA's FP4 checkpoints: the catalog's fp4
_RATE = re.compile(r"^\d+(\.\d+)?\s*req/s\b")


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0


def refusal(point: dict[str, Any]) -> str | None:
    """Why ``point`` does not qualify (the first criterion it misses), or None when it does."""
    gpus, models, dtypes = get_catalog("gpus").entries, get_catalog("models").entries, get_catalog("dtypes").entries
    measured = point.get("measured") or {}
    derived = point.get("derived_not_measured") or {}
    load = point.get("concurrency")
    checks = (
        ("engine", point.get("engine") in ENGINES),
        ("version", release(str(point.get("engine_version") or "")) is not None),
        ("published", str(point.get("published") or "") >= SINCE),
        ("gpu", point.get("gpu") in gpus),
        ("tp", isinstance(point.get("tp"), int) and not isinstance(point.get("tp"), bool) and point["tp"] >= 1),
        ("model", point.get("model") in models),
        (
            "dtypes",
            all(
                _DTYPE_ALIASES.get(str(point.get(k)), str(point.get(k))) in dtypes for k in ("weight_dtype", "kv_dtype")
            ),
        ),
        (
            "lengths",
            (_number(point.get("isl")) and _number(point.get("osl")))
            or (_number(derived.get("mean_isl_tokens")) and _number(derived.get("mean_osl_tokens"))),
        ),
        (
            "load",
            (isinstance(load, int) and not isinstance(load, bool) and load >= 1)
            or (isinstance(load, str) and _RATE.match(load) is not None),
        ),
        (
            "throughput",
            _number(measured.get("output_tok_s_aggregate")) or _number(measured.get("output_tok_s_per_gpu")),
        ),
        ("latency", any(re.match(r"^(tpot|itl|ttft)_ms", k) and _number(v) for k, v in measured.items())),
        ("source", str(point.get("source") or "").startswith("https://") and bool(str(point.get("locator") or ""))),
    )
    return next((name for name, ok in checks if not ok), None)


def _kind(point: dict[str, Any]) -> str:
    experts = get_catalog("models").entries[point["model"]].values.get("experts")
    return "moe" if experts is not None and experts[0] else "dense"


def _vendor(point: dict[str, Any]) -> str:
    return str(get_catalog("gpus").entries[point["gpu"]].values["vendor"][0])


QUALIFYING = [p for p in POINTS if refusal(p) is None]


def test_at_least_30_recent_measured_points_on_both_vendors_and_both_kinds() -> None:
    assert len(QUALIFYING) >= MINIMUM, f"{len(QUALIFYING)} qualifying points, fewer than {MINIMUM}"
    assert {_vendor(p) for p in QUALIFYING} >= {"nvidia", "amd"}
    assert {_kind(p) for p in QUALIFYING} >= {"dense", "moe"}
    engines = {p["engine"] for p in QUALIFYING}
    assert len(engines) >= 2, engines


def test_step_time_refs_add_no_qualifying_points_of_their_own() -> None:
    """The count is over throughput_points.yaml alone: a ref repeats one of its points or names no release."""
    ids = {p["id"] for p in POINTS}
    own = [r for r in REFS if r.get("point") not in ids]
    assert all(release(str(r.get("engine_version") or "")) is None for r in own), [r["id"] for r in own]


@pytest.mark.parametrize(
    ("criterion", "change"),
    [
        ("engine", lambda p: p.update(engine="other")),
        ("version", lambda p: p.update(engine_version="NIM 1.8.0")),
        ("published", lambda p: p.update(published="2024-12-31")),
        ("published", lambda p: p.pop("published")),
        ("gpu", lambda p: p.update(gpu="h100-imaginary")),
        ("tp", lambda p: p.pop("tp")),
        ("model", lambda p: p.update(model="not-a-model")),
        ("dtypes", lambda p: p.update(kv_dtype="unknown")),
        ("lengths", lambda p: (p.update(isl="ShareGPT"), p.pop("derived_not_measured", None))),
        ("load", lambda p: p.update(concurrency="max (all prompts at once)")),
        (
            "throughput",
            lambda p: [p["measured"].pop(k, None) for k in ("output_tok_s_aggregate", "output_tok_s_per_gpu")],
        ),
        ("latency", lambda p: [p["measured"].pop(k) for k in list(p["measured"]) if re.match("^(tpot|itl|ttft)", k)]),
        ("source", lambda p: p.update(locator="")),
    ],
)
def test_a_point_missing_a_criterion_does_not_count(criterion: str, change: Any) -> None:
    point = copy.deepcopy(next(p for p in QUALIFYING if isinstance(p.get("isl"), int)))
    change(point)
    assert refusal(point) == criterion


def test_the_vendor_and_kind_checks_see_each_side() -> None:
    """The coverage assertion is not vacuous: each side is present through its own points."""
    amd_moe = [p["id"] for p in QUALIFYING if _vendor(p) == "amd" and _kind(p) == "moe"]
    nvidia_dense = [p["id"] for p in QUALIFYING if _vendor(p) == "nvidia" and _kind(p) == "dense"]
    assert amd_moe and nvidia_dense
