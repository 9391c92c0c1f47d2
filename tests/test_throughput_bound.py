"""T2: the decode roofline is never beaten, and the calibrated model is within 20% (median).

The points are ``tests/data/throughput_points.yaml`` (published measurements with sources; the schema
is ``tests/data/README.md``).  Each point's roofline terms are solved by the pack (``llm_throughput``)
from the point's architecture numbers and the GPU's catalog entry; ``concur.analysis.calibration.evaluate``
only applies the fitted efficiency and fixed cost, and the last tests check it against the engine
end to end.

Two kinds of rows are kept in the file but left out of the bound, each with its reason as the skip
message: a GPU that ``formulas/catalogs/gpus.yaml`` lacks (``catalog_missing: [gpus/<id>]``: no
bandwidth or peak to bound it with), and speculative decoding (``speculative_decoding`` other than
``none``: several tokens per target-model step, which the one-token-per-step roofline does not
describe).  The fit tests run on the points the shipped ``engines.yaml`` names as its fit set, so
that adding data never silently changes what the catalog claims; refitting the catalog on more
points moves those tests along with it.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from concur.analysis.calibration import Point, _terms, calibrate, engines_catalog, evaluate, gpu_entry, load_points

DATA = Path(__file__).parent / "data" / "throughput_points.yaml"
ROOT = Path(__file__).resolve().parents[1]
DOC = YAML(typ="safe").load(DATA.read_text())
ROWS: list[dict[str, Any]] = DOC["points"]
MIN_BOUNDED = 45
"""At least this many published points must run through the bound test."""


def skip_reason(row: dict[str, Any]) -> str | None:
    """Why a row is kept out of the bound test, or None when it runs."""
    gpus = [m for m in row.get("catalog_missing", []) if m.startswith("gpus/")]
    if gpus:
        return (f"{row['id']}: GPU {', '.join(g.split('/', 1)[1] for g in gpus)} is not in "
                "formulas/catalogs/gpus.yaml (no bandwidth or peak FLOP/s to bound it with)")
    spec = row.get("speculative_decoding", "none")
    if spec != "none":
        return (f"{row['id']}: speculative decoding ({spec}) emits several tokens per target-model step; "
                "the one-token-per-step roofline does not bound it")
    return None


def _load(rows: list[dict[str, Any]]) -> list[Point]:
    """The rows through ``load_points`` (the public reader), from a copy of the file holding only them."""
    yaml = YAML()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "points.yaml"
        with path.open("w", encoding="utf-8") as fh:
            yaml.dump({**DOC, "points": rows}, fh)
        return load_points(path)


SKIPPED = {row["id"]: reason for row in ROWS if (reason := skip_reason(row))}
POINTS = _load([row for row in ROWS if row["id"] not in SKIPPED])


def _catalog_fit_ids() -> list[str]:
    """The ids the shipped engines catalog says its global fit used."""
    shipped = YAML(typ="safe").load((ROOT / "formulas" / "catalogs" / "engines.yaml").read_text())
    source = shipped["entries"]["default"]["efficiency"]["source"]
    match = re.search(r"ids (.*?) \(", source)
    assert match, f"engines.yaml default source names no ids: {source!r}"
    return [i.strip() for i in match.group(1).split(",")]


FIT_IDS = _catalog_fit_ids()
FIT_POINTS = [p for p in POINTS if p.id in FIT_IDS]


LLAMA_8B = {"params": "8.03e9 parameter", "layers": 32, "kv_heads": 8, "head_dim": 128, "gpu": "h100-sxm-80gb", "tp": 1,
            "weight_bytes": "2 B/parameter", "kv_bytes": "2 B/token", "input_tokens": 1024, "output_tokens": 2048}


def _llama8b_h100(concurrency: float, **arch: object) -> Point:
    """DESIGN.md T2: Llama-3.1-8B bf16 on one H100, 1,024 in / 2,048 out (terms solved by the pack)."""
    given = {**LLAMA_8B, "active_params": "8.03e9 parameter", **arch, "concurrency": concurrency}
    terms = _terms(given)
    return Point(id="t2", family="other", gpu="h100-sxm-80gb", memory_time=terms["memory_time"],
                 compute_time=terms["compute_time"], prefill_time=terms["prefill_time"], tp=1, pp=1,
                 concurrency=concurrency, input_tokens=1024, output_tokens=2048, measured_per_gpu=None,
                 measured_per_user=None)


def test_published_gpu_names_resolve_to_catalog_entries() -> None:
    assert gpu_entry("H100-SXM-80GB") == "h100-sxm-80gb"
    assert gpu_entry("L40S-48GB") == "l40s"
    assert gpu_entry("B200-SXM-180GB") == "b200"
    assert gpu_entry("MI300X-192GB") == "mi300x"
    with pytest.raises(Exception, match="not in formulas/catalogs/gpus.yaml"):
        gpu_entry("TPU-v5e")


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_bound_is_never_below_a_measurement(row: dict[str, Any]) -> None:
    if row["id"] in SKIPPED:
        pytest.skip(SKIPPED[row["id"]])
    point = next(p for p in POINTS if p.id == row["id"])
    bound = evaluate(point)
    assert point.measured_per_gpu is not None or point.measured_per_user is not None
    if point.measured_per_gpu is not None:
        assert point.measured_per_gpu <= bound["bound_per_gpu"], point.assumptions
    if point.measured_per_user is not None:
        assert point.measured_per_user <= bound["bound_per_user"], point.assumptions


def test_enough_points_run_through_the_bound() -> None:
    assert len(POINTS) >= MIN_BOUNDED, f"only {len(POINTS)} bounded points ({len(SKIPPED)} skipped: {SKIPPED})"
    assert len(POINTS) + len(SKIPPED) == len(ROWS)


def test_every_published_point_is_read() -> None:
    assert [p.id for p in POINTS] == [r["id"] for r in ROWS if r["id"] not in SKIPPED]
    assert len({r["id"] for r in ROWS}) == len(ROWS), "duplicate point ids"
    assert {p.family for p in POINTS} >= {"trtllm", "vllm", "sglang"}
    for point, row in zip(POINTS, (r for r in ROWS if r["id"] not in SKIPPED)):
        # the family the calibration reads from the engine text is the point's engine id
        assert point.family == row["engine"], row["id"]
        # a point whose load is not a number ("max ...") enters the bound test but not the fit
        load = row.get("batch_size", row.get("concurrency"))
        if isinstance(load, str) and not any(ch.isdigit() for ch in load.split("(")[0]):
            assert not point.fit, point.id


REQUIRED_KEYS = ("id", "source_group", "model", "model_name_as_published", "config_family_for_bounds", "gpu",
                 "gpu_as_published", "n_gpus", "weight_dtype", "kv_dtype", "engine", "engine_version",
                 "speculative_decoding", "isl", "measured", "metric_def", "source", "locator")
ENGINE_IDS = {"vllm", "sglang", "trtllm", "other"}
EXTRA_DTYPES = {"nvfp4", "unknown"}  # NVIDIA's FP4 (the calibration reads it as 4-bit) and "not published"


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_point_carries_its_planning_keys(row: dict[str, Any]) -> None:
    """tests/data/README.md: what every point must say, in concur's ids where they exist."""
    from concur.lang.library import get_catalog

    assert not [k for k in REQUIRED_KEYS if k not in row], row["id"]
    assert "batch_size" in row or "concurrency" in row, row["id"]
    assert row["engine"] in ENGINE_IDS
    assert any(k.startswith("output_tok_s") for k in row["measured"]), "no output tok/s in measured"
    missing = set(row.get("catalog_missing", []))
    assert row["model"] in get_catalog("models").entries or f"models/{row['model']}" in missing
    assert row["gpu"] in get_catalog("gpus").entries or f"gpus/{row['gpu']}" in missing
    for catalog_id in missing:
        kind, name = catalog_id.split("/", 1)
        assert name not in get_catalog(kind).entries, f"{catalog_id} is in the catalog now: drop catalog_missing"
    dtypes = set(get_catalog("dtypes").entries) | EXTRA_DTYPES
    assert row["weight_dtype"] in dtypes and row["kv_dtype"] in dtypes
    assert row["config_family_for_bounds"] in DOC["model_configs_used_for_bounds"]
    source = str(row["source"])
    assert source.startswith("https://"), source
    if "github.com" in source and "/blob/" in source:
        assert re.search(r"/blob/[0-9a-f]{40}/", source), f"GitHub source not pinned to a commit: {source}"
    text = repr(row)
    assert not re.search(r"DESIGN\.md|\.\./shared|/work/shared", text), "a point cites internal design notes"


def test_points_span_sources_engines_and_gpus() -> None:
    """Enough spread for leave-one-source-out validation and per-engine fits."""
    groups = {r["source_group"] for r in ROWS}
    assert len(groups) >= 5, groups
    bounded = [r for r in ROWS if r["id"] not in SKIPPED]
    assert {r["engine"] for r in bounded} >= {"vllm", "sglang", "trtllm"}
    assert {r["gpu"] for r in bounded} >= {"h100-sxm-80gb", "h200-sxm-141gb", "b200", "a100-sxm-80gb", "mi300x"}


def test_catalog_fit_set_is_in_the_data() -> None:
    ids = {p.id for p in POINTS}
    assert FIT_IDS and set(FIT_IDS) <= ids, f"engines.yaml names points the data lacks: {set(FIT_IDS) - ids}"
    assert all(p.fit for p in POINTS if p.id in FIT_IDS)


def test_calibrated_median_error_within_20_percent() -> None:
    cal = calibrate(FIT_POINTS)
    errors = sorted(cal.errors().values())
    median = (errors[len(errors) // 2] + errors[(len(errors) - 1) // 2]) / 2
    assert len(errors) == sum(p.fit for p in FIT_POINTS)
    assert median <= 0.20, f"median |model/measured - 1| = {median:.1%}"
    assert 0 < cal.global_fit.efficiency <= 1 and cal.global_fit.t_fixed >= 0


def test_calibration_beats_the_bare_roofline() -> None:
    cal = calibrate(FIT_POINTS)
    bare = sorted(abs(evaluate(p)["bound_per_gpu"] / p.measured_per_gpu - 1)
                  for p in FIT_POINTS if p.fit and p.measured_per_gpu)
    fitted = sorted(cal.errors().values())
    assert fitted[len(fitted) // 2] < bare[len(bare) // 2] / 3


def test_t2_worked_numbers() -> None:
    one, many = evaluate(_llama8b_h100(1)), evaluate(_llama8b_h100(64))
    assert f"{one['t_step'] * 1e3:.3g}" == "4.87"
    assert f"{many['t_step'] * 1e3:.3g}" == "9.92"
    assert math.floor(one["bound_per_user"]) == 205
    assert round(many["bound_per_gpu"], -1) == 6450
    assert many["compute_time"] < many["memory_time"]


def test_moe_reads_only_active_weights_at_batch_one() -> None:
    dense = _llama8b_h100(1)
    moe = _llama8b_h100(1, active_params="2.0075e9 parameter")
    # batch 1 reads a quarter of the weights (plus the KV cache); large batches read them all
    assert moe.memory_time == pytest.approx((8.03e9 * 2 / 4 + 2048 * 131072) / 3.35e12)
    assert dense.memory_time == pytest.approx((8.03e9 * 2 + 2048 * 131072) / 3.35e12)
    assert _llama8b_h100(200, active_params="2.0075e9 parameter").memory_time == pytest.approx(
        _llama8b_h100(200).memory_time, rel=1e-6)


def test_sliding_window_layers_read_only_their_window() -> None:
    """gpt-oss style: half the layers attend to 128 tokens, so the KV read shrinks accordingly."""
    full = _llama8b_h100(64)
    hybrid = _llama8b_h100(64, sliding_window=128, sliding_window_layers=16)
    kv_full = 64 * 2048 * 131072 / 3.35e12
    assert full.memory_time - hybrid.memory_time == pytest.approx(kv_full * (2048 - 128) / 2048 / 2, rel=1e-9)


def test_engines_catalog_is_the_current_fit() -> None:
    from ruamel.yaml import YAML

    shipped = YAML(typ="safe").load((ROOT / "formulas" / "catalogs" / "engines.yaml").read_text())
    fresh = engines_catalog(calibrate(FIT_POINTS))
    assert set(shipped["entries"]) == set(fresh["entries"])
    for name, entry in fresh["entries"].items():
        for field in ("efficiency", "t_fixed", "efficiency_prefill"):
            assert shipped["entries"][name][field]["value"] == pytest.approx(entry[field]["value"], rel=1e-3)
            assert "tests/data/throughput_points.yaml" in shipped["entries"][name][field]["source"]


def _solve_or_skip(**kw):
    try:
        import concur.api  # noqa: F401
    except ImportError:
        pytest.skip("engine (concur.api) not built yet")
    import concur

    return concur.solve(packs=["llm_throughput"], **kw)


T2_GIVEN = {"weights_per_gpu": "16.06 GB", "kv_per_token": "131072 B/token", "weight_bytes": "2 B/parameter",
            "active_params": "8.03e9 parameter", "tp": 1, "pp": 1, "hbm_bandwidth": "3.35 TB/s",
            "peak_flops_bf16": "989.4 Tflop/s", "peak_flops_fp8": "1978.9 Tflop/s",
            "input_tokens": "1024 token/request", "output_tokens": "2048 token/request",
            "efficiency": 1, "t_fixed": "0 ms"}


@pytest.mark.parametrize("concurrency", [1, 64])
def test_pack_and_calibration_physics_agree(concurrency: int) -> None:
    sol = _solve_or_skip(find=["t_step", "bound_tokens_per_s", "served_tokens_per_s"],
                         given={**T2_GIVEN, "concurrency": f"{concurrency} request", "efficiency_prefill": 0.5})
    ref = evaluate(_llama8b_h100(concurrency), 1.0, 0.0, 0.5)
    assert sol.value("t_step", "s") == pytest.approx(float(ref["t_step"]), rel=1e-9)
    assert sol.value("bound_tokens_per_s", "token/s") == pytest.approx(float(ref["bound_per_gpu"]), rel=1e-9)
    assert sol.value("served_tokens_per_s", "token/s") == pytest.approx(float(ref["per_gpu"]), rel=1e-9)
