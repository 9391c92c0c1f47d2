"""Data checks on the shipped catalogs (formulas/catalogs/*.yaml).

These tests read the YAML directly with ruamel's safe loader, independently of the
engine's catalog loader, so that a bad number or a missing source is caught even if the
loader is lenient. They check three things:

* shape: every file has ``catalog`` (= file stem), ``doc``, ``fields`` and ``entries``;
  every entry field is declared; every numeric field is ``{value: NUMBER, source: TEXT}``
  with a non-empty source, in every catalog file of the folder; the ids the public
  interface promises exist and carry every required field; the catalogs are big enough
  for fleet planning (at least 12 GPUs, 30 models) and cross-reference correctly (price
  and engine-limit ids are GPU and engine ids);
* sanity relations between the numbers (KV heads divide query heads, driver-reported
  memory below the nominal figure, FP8 peak at least the BF16 peak, MoE active below
  total, MLA and sliding-window fields complete, derived memory reproducible, ...);
* the anchor values the worked examples in docs/t1-kv-cache.md and docs/t2-throughput.md
  depend on (Llama-3.1-70B, H100).

The shape checks are also run against small broken catalogs built in the tests, so the
checks themselves are shown to fail on a missing source, a bare number and an
undeclared field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

CATALOG_DIR = Path(__file__).resolve().parents[2] / "formulas" / "catalogs"

REQUIRED_IDS: dict[str, set[str]] = {
    "gpus": {
        "h100-sxm-80gb",
        "h200-sxm-141gb",
        "a100-sxm-80gb",
        "a100-sxm-40gb",
        "l40s",
        "b200",
        "mi300x",
    },
    "models": {
        "llama-3.1-8b",
        "llama-3.1-70b",
        "llama-3.1-405b",
        "llama-3.3-70b",
        "qwen3-8b",
        "qwen3-32b",
        "mistral-7b",
        "mixtral-8x7b",
        "gpt-oss-20b",
        "gpt-oss-120b",
        "deepseek-v3",
    },
    "dtypes": {"bf16", "fp16", "fp8"},
    "prices": {"h100-sxm-80gb"},
    "engine_limits": {"vllm", "trtllm"},
}

# Fields every entry of a catalog must carry.
REQUIRED_FIELDS: dict[str, set[str]] = {
    "gpus": {
        "name",
        "gpu_memory",
        "memory_nominal",
        "hbm_bandwidth",
        "peak_flops_bf16",
        "peak_flops_fp8",
        "interconnect_bandwidth",
        "fast_link_domain",
        "slow_link_bandwidth",
        "vendor",
        "family",
    },
    "models": {
        "name",
        "params",
        "active_params",
        "layers",
        "attention_heads",
        "kv_heads",
        "head_dim",
        "hidden",
        "vocab",
        "max_context",
        "attention",
    },
    "dtypes": {"name", "bytes"},
    "prices": {"name"},  # provider columns vary by GPU: see test_prices_* below
    "engine_limits": {"name"},
}

# Declared units the engine relies on (None = dimensionless, no unit key).
EXPECTED_UNITS: dict[str, dict[str, str | None]] = {
    "gpus": {
        "gpu_memory": "GiB",
        "memory_nominal": "GB",
        "hbm_bandwidth": "TB/s",
        "peak_flops_bf16": "Tflop/s",
        "peak_flops_fp8": "Tflop/s",
        "peak_flops_fp4": "Tflop/s",
        "interconnect_bandwidth": "GB/s",
        "fast_link_domain": None,
        "slow_link_bandwidth": "GB/s",
    },
    "models": {
        "params": "parameter",
        "active_params": "parameter",
        "max_context": "token",
        "layers": None,
        "attention_heads": None,
        "kv_heads": None,
        "head_dim": None,
        "hidden": None,
        "vocab": None,
        "experts": None,
        "experts_per_token": None,
        "intermediate_size": None,
    },
    "dtypes": {"bytes": "B"},
    "prices": {p: "usd/gpu/hour" for p in ("aws", "azure", "coreweave", "lambda", "runpod")},
    "engine_limits": {"max_num_seqs": "request", "max_num_seqs_large_gpu": "request"},
}

# Text fields an entry may carry besides declared {value, source} fields.
TEXT_FIELDS = {"name", "doc"}
# Categorical fields: {value: one of choices, source}.
CHOICE_FIELDS = {"attention", "vendor", "family"}

GIB_PER_GB = 1e9 / 2**30  # 0.9313...; 1 GB / 1 GiB


def _load(path: Path) -> Any:
    yaml = YAML(typ="safe", pure=True)
    with path.open(encoding="utf-8") as fh:
        return yaml.load(fh)


@pytest.fixture(scope="module")
def catalogs() -> dict[str, Any]:
    return {name: _load(CATALOG_DIR / f"{name}.yaml") for name in REQUIRED_IDS}


def shape_problems(stem: str, data: Any) -> list[str]:
    """Every violation of the catalog format in ``data`` (parsed ``stem``.yaml); [] if none."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return [f"{stem}: top level must be a mapping"]
    if data.get("catalog") != stem:
        problems.append(f"{stem}: 'catalog' is {data.get('catalog')!r}, expected {stem!r}")
    if not isinstance(data.get("doc"), str) or not data["doc"].strip():
        problems.append(f"{stem}: missing 'doc' paragraph")
    fields = data.get("fields")
    entries = data.get("entries")
    if not isinstance(fields, dict) or not fields:
        return problems + [f"{stem}: 'fields' must be a non-empty mapping"]
    if not isinstance(entries, dict) or not entries:
        return problems + [f"{stem}: 'entries' must be a non-empty mapping"]
    for fname, fdecl in fields.items():
        if not isinstance(fdecl, dict) or not str(fdecl.get("doc", "")).strip():
            problems.append(f"{stem}.fields.{fname}: needs a 'doc'")
    for eid, entry in entries.items():
        where = f"{stem}.{eid}"
        if not isinstance(entry, dict):
            problems.append(f"{where}: entry must be a mapping")
            continue
        for key, item in entry.items():
            if key in TEXT_FIELDS:
                if not isinstance(item, str) or not item.strip():
                    problems.append(f"{where}.{key}: must be non-empty text")
                continue
            if key not in fields:
                problems.append(f"{where}.{key}: field not declared under 'fields'")
                continue
            if not isinstance(item, dict) or set(item) != {"value", "source"}:
                problems.append(f"{where}.{key}: must be {{value, source}}, got {item!r}")
                continue
            source = item["source"]
            if not isinstance(source, str) or not source.strip():
                problems.append(f"{where}.{key}: empty or missing source")
            value = item["value"]
            choices = fields[key].get("choices")
            if fields[key].get("text"):  # a text field (engines.yaml version): words, not a number
                if not isinstance(value, str) or not value.strip():
                    problems.append(f"{where}.{key}: text field needs non-empty text, got {value!r}")
            elif choices is not None:
                if value not in choices:
                    problems.append(f"{where}.{key}: {value!r} not in {choices}")
            elif isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"{where}.{key}: value {value!r} is not a number")
            elif not math.isfinite(value) or value < 0:
                # Zero is legitimate for a fitted constant (engines.yaml t_fixed); the data
                # catalogs are checked for strictly positive values separately.
                problems.append(f"{where}.{key}: value {value!r} must be finite and >= 0")
    return problems


def v(entry: dict[str, Any], key: str) -> Any:
    return entry[key]["value"]


# ---------------------------------------------------------------- shape


@pytest.mark.parametrize("stem", sorted(REQUIRED_IDS))
def test_catalog_shape(catalogs: dict[str, Any], stem: str) -> None:
    assert shape_problems(stem, catalogs[stem]) == []


@pytest.mark.parametrize("path", sorted(CATALOG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_catalog_file_sources_every_number(path: Path) -> None:
    """Every catalog in the folder, generated ones (engines.yaml) included, passes the shape
    check: each numeric field of each entry is {value, source} with a non-empty source."""
    assert shape_problems(path.stem, _load(path)) == []


def test_choice_fields_are_the_known_ones() -> None:
    declared = {
        fname
        for path in CATALOG_DIR.glob("*.yaml")
        for fname, decl in _load(path)["fields"].items()
        if "choices" in decl
    }
    assert declared == CHOICE_FIELDS


def test_catalog_sizes(catalogs: dict[str, Any]) -> None:
    """Fleet planning compares many GPUs and models (issue: Fleet planning end to end)."""
    assert len(catalogs["gpus"]["entries"]) >= 12
    assert len(catalogs["models"]["entries"]) >= 30


@pytest.mark.parametrize("stem", sorted(REQUIRED_IDS))
def test_required_ids_and_fields(catalogs: dict[str, Any], stem: str) -> None:
    entries = catalogs[stem]["entries"]
    assert REQUIRED_IDS[stem] <= set(entries), REQUIRED_IDS[stem] - set(entries)
    for eid, entry in entries.items():
        missing = REQUIRED_FIELDS[stem] - set(entry)
        assert not missing, f"{stem}.{eid} lacks {sorted(missing)}"


@pytest.mark.parametrize("stem", sorted(REQUIRED_IDS))
def test_declared_units(catalogs: dict[str, Any], stem: str) -> None:
    fields = catalogs[stem]["fields"]
    for fname, unit in EXPECTED_UNITS[stem].items():
        assert fields[fname].get("unit") == unit, (stem, fname, fields[fname])


@pytest.mark.parametrize("stem", sorted(REQUIRED_IDS))
def test_data_values_are_positive(catalogs: dict[str, Any], stem: str) -> None:
    for eid, entry in catalogs[stem]["entries"].items():
        for key, item in entry.items():
            if isinstance(item, dict) and isinstance(item["value"], (int, float)):
                assert item["value"] > 0, (stem, eid, key)


def test_ids_are_lowercase_slugs(catalogs: dict[str, Any]) -> None:
    for stem, data in catalogs.items():
        for eid in data["entries"]:
            assert eid == eid.lower() and " " not in eid, f"{stem}: bad id {eid!r}"


# A minimal valid catalog, and three ways to break it: the checks must notice each.
_GOOD = {
    "catalog": "gpus",
    "doc": "test",
    "fields": {"gpu_memory": {"unit": "GiB", "doc": "memory"}},
    "entries": {"x": {"name": "X", "gpu_memory": {"value": 1.0, "source": "datasheet"}}},
}


def _with_entry_field(value: Any) -> dict[str, Any]:
    return {**_GOOD, "entries": {"x": {"name": "X", "gpu_memory": value}}}


def test_shape_check_accepts_minimal_catalog() -> None:
    assert shape_problems("gpus", _GOOD) == []


@pytest.mark.parametrize(
    ("broken", "expected"),
    [
        (_with_entry_field({"value": 1.0, "source": ""}), "empty or missing source"),
        (_with_entry_field({"value": 1.0, "source": "   "}), "empty or missing source"),
        (_with_entry_field({"value": 1.0}), "must be {value, source}"),
        (_with_entry_field(1.0), "must be {value, source}"),
        (_with_entry_field({"value": "80GB", "source": "x"}), "is not a number"),
        (_with_entry_field({"value": -1.0, "source": "x"}), "must be finite and >= 0"),
        ({**_GOOD, "entries": {"x": {"name": "X", "hbm": {"value": 1, "source": "s"}}}}, "not declared"),
        ({**_GOOD, "catalog": "gpu"}, "expected 'gpus'"),
    ],
    ids=[
        "empty-source",
        "blank-source",
        "no-source",
        "bare-number",
        "text-value",
        "negative",
        "undeclared-field",
        "wrong-stem",
    ],
)
def test_shape_check_rejects(broken: dict[str, Any], expected: str) -> None:
    problems = shape_problems("gpus", broken)
    assert any(expected in p for p in problems), problems


def test_shape_check_fails_on_real_catalog_with_source_removed(catalogs: dict[str, Any]) -> None:
    data = _load(CATALOG_DIR / "models.yaml")
    data["entries"]["llama-3.1-70b"]["layers"]["source"] = ""
    assert shape_problems("models", data) == ["models.llama-3.1-70b.layers: empty or missing source"]


# ---------------------------------------------------------------- dtypes


def test_dtype_bytes(catalogs: dict[str, Any]) -> None:
    e = catalogs["dtypes"]["entries"]
    expected = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "fp4": 0.5, "mxfp4": 0.53125}
    for dtype, nbytes in expected.items():
        assert v(e[dtype], "bytes") == nbytes, dtype


# ---------------------------------------------------------------- models

# Models whose head_dim is set independently of hidden_size (config.json has its own
# head_dim key), or MLA, where the per-head width has nothing to do with the residual.
DECOUPLED_HEAD_DIM = {
    "qwen3-32b",
    "qwen3-0.6b",
    "qwen3-235b-a22b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "deepseek-v3",
    "deepseek-r1",
    "qwen3-4b",
    "qwen3-30b-a3b",
    "mistral-small-24b",
    "gemma-2-9b",
    "gemma-2-27b",
    "gemma-3-12b",
    "gemma-3-27b",
}
# Known MoE checkpoints; every entry with an `experts` field is MoE, and these must have one.
KNOWN_MOE = {
    "mixtral-8x7b",
    "mixtral-8x22b",
    "qwen3-235b-a22b",
    "qwen3-30b-a3b",
    "gpt-oss-20b",
    "gpt-oss-120b",
    "deepseek-v3",
    "deepseek-r1",
    "deepseek-v2-lite",
    "llama-4-scout",
    "llama-4-maverick",
}


def test_kv_heads_divide_attention_heads(catalogs: dict[str, Any]) -> None:
    for eid, e in catalogs["models"]["entries"].items():
        assert v(e, "attention_heads") % v(e, "kv_heads") == 0, eid


def test_integer_architecture_fields(catalogs: dict[str, Any]) -> None:
    keys = (
        "layers",
        "attention_heads",
        "kv_heads",
        "head_dim",
        "hidden",
        "vocab",
        "max_context",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "sliding_window",
        "sliding_window_layers",
    )
    for eid, e in catalogs["models"]["entries"].items():
        for key in keys:
            if key in e:
                assert isinstance(v(e, key), int), (eid, key)


def test_head_dim_times_heads_is_hidden_where_coupled(catalogs: dict[str, Any]) -> None:
    entries = catalogs["models"]["entries"]
    assert set(entries) >= DECOUPLED_HEAD_DIM
    for eid, e in entries.items():
        coupled = v(e, "head_dim") * v(e, "attention_heads") == v(e, "hidden")
        # The exemption list must stay honest: an entry listed as decoupled really is.
        assert coupled is (eid not in DECOUPLED_HEAD_DIM), eid


def test_active_params(catalogs: dict[str, Any]) -> None:
    entries = catalogs["models"]["entries"]
    moe = {eid for eid, e in entries.items() if "experts" in e}
    assert moe >= KNOWN_MOE, KNOWN_MOE - moe
    for eid, e in entries.items():
        if eid in moe:
            assert v(e, "active_params") < v(e, "params") / 2, eid
        else:
            assert v(e, "active_params") == v(e, "params"), eid


def test_moe_expert_fields(catalogs: dict[str, Any]) -> None:
    for eid, e in catalogs["models"]["entries"].items():
        assert ("experts" in e) == ("experts_per_token" in e), eid
        if "experts" in e:
            assert isinstance(v(e, "experts"), int) and isinstance(v(e, "experts_per_token"), int)
            assert 1 <= v(e, "experts_per_token") < v(e, "experts"), eid


def test_dense_mlp_wider_than_residual(catalogs: dict[str, Any]) -> None:
    """A dense MLP expands the residual stream (a MoE expert may be narrower)."""
    for eid, e in catalogs["models"]["entries"].items():
        if "intermediate_size" in e and "experts" not in e:
            assert isinstance(v(e, "intermediate_size"), int), eid
            assert v(e, "intermediate_size") > v(e, "hidden"), eid


def test_attention_specific_fields(catalogs: dict[str, Any]) -> None:
    for eid, e in catalogs["models"]["entries"].items():
        is_mla = v(e, "attention") == "mla"
        assert ("kv_lora_rank" in e) is is_mla, eid
        assert ("qk_rope_head_dim" in e) is is_mla, eid
        # A sliding-window hybrid needs both the window and how many layers slide.
        assert ("sliding_window" in e) == ("sliding_window_layers" in e), eid
        if "sliding_window" in e:
            assert 0 < v(e, "sliding_window_layers") < v(e, "layers"), eid
            assert v(e, "sliding_window") < v(e, "max_context"), eid


def test_llama_31_70b_anchor(catalogs: dict[str, Any]) -> None:
    """The numbers the T1 worked check (55 users on 4x H100, docs/t1-kv-cache.md) is built from."""
    e = catalogs["models"]["entries"]["llama-3.1-70b"]
    assert v(e, "layers") == 80
    assert v(e, "kv_heads") == 8
    assert v(e, "head_dim") == 128
    assert v(e, "attention_heads") == 64
    assert v(e, "params") == pytest.approx(70.55e9, rel=1e-4)
    assert v(e, "attention") == "gqa"
    # bf16 KV bytes per token per GPU at TP4 (docs/t1-kv-cache.md: 81,920 B).
    assert 2 * v(e, "layers") * (v(e, "kv_heads") // 4) * v(e, "head_dim") * 2 == 81_920


def test_llama_33_70b_shares_31_architecture(catalogs: dict[str, Any]) -> None:
    entries = catalogs["models"]["entries"]
    a, b = entries["llama-3.1-70b"], entries["llama-3.3-70b"]
    for key in ("params", "layers", "attention_heads", "kv_heads", "head_dim", "hidden", "vocab", "max_context"):
        assert v(a, key) == v(b, key), key


def test_deepseek_v3_mla(catalogs: dict[str, Any]) -> None:
    e = catalogs["models"]["entries"]["deepseek-v3"]
    assert v(e, "attention") == "mla"
    assert v(e, "kv_lora_rank") == 512
    assert v(e, "qk_rope_head_dim") == 64
    assert v(e, "kv_heads") == 128 and v(e, "head_dim") == 128
    assert v(e, "layers") == 61
    # One 576-value latent per layer, bf16: 70,272 B per token (vllm_kv_points.yaml).
    latent = v(e, "kv_lora_rank") + v(e, "qk_rope_head_dim")
    assert v(e, "layers") * latent * 2 == 70_272


def test_gpt_oss_sliding_layers_are_half(catalogs: dict[str, Any]) -> None:
    for eid in ("gpt-oss-20b", "gpt-oss-120b"):
        e = catalogs["models"]["entries"][eid]
        assert v(e, "sliding_window_layers") * 2 == v(e, "layers"), eid
        assert v(e, "sliding_window") == 128


# ---------------------------------------------------------------- GPUs


def test_driver_memory_below_nominal(catalogs: dict[str, Any]) -> None:
    """The driver never reports more than the datasheet figure.

    The datasheet "GB" of these parts is binary in practice: an "80GB" H100 reports
    79.18 GiB (85.0e9 B, more than 80e9 B), a "192GB" MI300X 205.8e9 B. So the bound is
    nominal read as GiB. The lower bound (90 %) allows for what the driver and ECC keep
    (the L40S's GDDR6 with ECC on reports 44.31 of 48) and catches a value typed in MiB,
    GB of a different part, or the per-node total.
    """
    for eid, e in catalogs["gpus"]["entries"].items():
        reported_gib, nominal = v(e, "gpu_memory"), v(e, "memory_nominal")
        assert 0.9 * nominal <= reported_gib <= nominal, eid


def test_hbm_parts_report_more_bytes_than_decimal_nominal(catalogs: dict[str, Any]) -> None:
    """For HBM parts the printed GB is binary: the driver's bytes exceed nominal x 1e9.

    This is why the catalog keeps ``gpu_memory`` and never derives it from
    ``memory_nominal``; dividing the nominal by 1.0737 would understate H100 memory by 5 %.
    """
    hbm = {
        "h100-sxm-80gb",
        "h200-sxm-141gb",
        "a100-sxm-80gb",
        "a100-sxm-40gb",
        "b200",
        "mi300x",
        "h100-pcie-80gb",
        "b300",
        "mi325x",
        "mi355x",
    }
    entries = catalogs["gpus"]["entries"]
    for eid in hbm:
        assert v(entries[eid], "gpu_memory") > v(entries[eid], "memory_nominal") * GIB_PER_GB, eid


def test_fp8_peak_at_least_bf16(catalogs: dict[str, Any]) -> None:
    for eid, e in catalogs["gpus"]["entries"].items():
        assert v(e, "peak_flops_fp8") >= v(e, "peak_flops_bf16"), eid
        if "peak_flops_fp4" in e:
            assert v(e, "peak_flops_fp4") > v(e, "peak_flops_fp8"), eid


# Families with FP8 tensor units (fp8 > bf16) and with FP4 units (peak_flops_fp4 given).
FP8_FAMILIES = {"ada", "hopper", "blackwell", "cdna3", "cdna4"}
FP4_FAMILIES = {"blackwell", "cdna4"}


def test_low_precision_support_follows_family(catalogs: dict[str, Any]) -> None:
    """FP8 support is implied by peak_flops_fp8 > peak_flops_bf16; it must match the family,
    and FP4 peaks appear exactly on the families with FP4 units."""
    for eid, e in catalogs["gpus"]["entries"].items():
        family = v(e, "family")
        has_fp8 = v(e, "peak_flops_fp8") > v(e, "peak_flops_bf16")
        assert has_fp8 is (family in FP8_FAMILIES), eid
        assert ("peak_flops_fp4" in e) is (family in FP4_FAMILIES), eid
        assert v(e, "vendor") == ("amd" if family.startswith("cdna") else "nvidia"), eid


def test_interconnect_bandwidth_per_direction(catalogs: dict[str, Any]) -> None:
    """Per-direction scale-up bandwidth: H100 SXM NVLink is 900 GB/s bidirectional = 450."""
    e = catalogs["gpus"]["entries"]
    assert v(e["h100-sxm-80gb"], "interconnect_bandwidth") == 450
    for eid, entry in e.items():
        # From PCIe Gen4 x16 (32 GB/s per direction) to NVLink 5 (900).
        assert 16 <= v(entry, "interconnect_bandwidth") <= 1000, eid


# GPUs whose gpu_memory is derived (no citable driver log) -> the logged GPU whose
# reported/nominal ratio is applied (same memory kind), as the gpus.yaml doc states.
DERIVED_MEMORY_FROM = {
    "h100-pcie-80gb": "h100-sxm-80gb",
    "b300": "b200",
    "mi325x": "mi300x",
    "mi355x": "mi300x",
    "l4": "l40s",
    "rtx-4090": "rtx-3090",
}


def test_derived_gpu_memory_follows_the_rule(catalogs: dict[str, Any]) -> None:
    entries = catalogs["gpus"]["entries"]
    derived = {eid for eid, e in entries.items() if e["gpu_memory"]["source"].startswith("derived:")}
    assert derived == set(DERIVED_MEMORY_FROM)
    for eid, ref_id in DERIVED_MEMORY_FROM.items():
        e, ref = entries[eid], entries[ref_id]
        assert ref_id not in derived, ref_id
        ratio = v(ref, "gpu_memory") / v(ref, "memory_nominal")
        assert v(e, "gpu_memory") == pytest.approx(v(e, "memory_nominal") * ratio, abs=0.006), eid


def test_peaks_are_dense(catalogs: dict[str, Any]) -> None:
    """Dense figures: H100 SXM BF16 is 989.4 Tflop/s, not the 1,979 sparse headline."""
    e = catalogs["gpus"]["entries"]
    assert v(e["h100-sxm-80gb"], "peak_flops_bf16") == pytest.approx(989.4)
    assert v(e["h100-sxm-80gb"], "peak_flops_fp8") == pytest.approx(1978.9)
    for eid, entry in e.items():
        # Sanity band for a dense BF16 tensor peak of a serving GPU (Tflop/s).
        assert 50 <= v(entry, "peak_flops_bf16") <= 5000, eid
        # Device-memory bandwidth (TB/s): 0.3 for the L4's GDDR6 up to 8 for Blackwell HBM3e.
        assert 0.2 <= v(entry, "hbm_bandwidth") <= 10, eid


def test_h100_anchor(catalogs: dict[str, Any]) -> None:
    """The numbers the T1 and T2 worked checks (docs/t1-kv-cache.md, t2-throughput.md) are built from."""
    e = catalogs["gpus"]["entries"]["h100-sxm-80gb"]
    assert v(e, "gpu_memory") == 79.18
    assert v(e, "hbm_bandwidth") == 3.35
    assert catalogs["gpus"]["entries"]["a100-sxm-80gb"]["gpu_memory"]["value"] == 79.15


def test_t2_worked_check_from_catalog(catalogs: dict[str, Any]) -> None:
    """T2 (docs/t2-throughput.md): Llama-3.1-8B bf16 on H100, batch 1, context 2,048 -> 4.87 ms/step."""
    m = catalogs["models"]["entries"]["llama-3.1-8b"]
    g = catalogs["gpus"]["entries"]["h100-sxm-80gb"]
    bf16 = v(catalogs["dtypes"]["entries"]["bf16"], "bytes")
    kv_per_token = 2 * v(m, "layers") * v(m, "kv_heads") * v(m, "head_dim") * bf16
    step_bytes = v(m, "params") * bf16 + 1 * 2048 * kv_per_token
    t_step_ms = step_bytes / (v(g, "hbm_bandwidth") * 1e12) * 1e3
    assert round(t_step_ms, 2) == 4.87


# ---------------------------------------------------------------- prices


def test_price_ids_are_gpu_ids(catalogs: dict[str, Any]) -> None:
    prices = catalogs["prices"]["entries"]
    assert set(prices) <= set(catalogs["gpus"]["entries"]), set(prices) - set(catalogs["gpus"]["entries"])


def test_prices_have_provider_url_and_date(catalogs: dict[str, Any]) -> None:
    """A price is only usable with where and when it was listed: every provider column of every
    entry cites the provider's own page (URL) and the date it was retrieved."""
    import re

    data = catalogs["prices"]
    pages = {"aws": "aws.amazon.com", "azure": "azure.microsoft.com", "coreweave": "coreweave.com"}
    pages |= {"lambda": "lambda.ai", "runpod": "runpod.io"}
    assert set(data["fields"]) == set(pages)
    count = 0
    for eid, e in data["entries"].items():
        for provider in data["fields"]:
            if provider not in e:
                continue
            count += 1
            source = e[provider]["source"]
            assert f"https://www.{pages[provider]}" in source or f"https://{pages[provider]}" in source, (eid, provider)
            assert re.search(r"retrieved 20\d\d-\d\d", source), f"{eid}.{provider}: no date in {source!r}"
            # A plausible on-demand list price for one GPU-hour.
            assert 0.1 <= v(e, provider) <= 50, (eid, provider)
    assert count >= 20


def test_prices_name_their_default_provider_and_several_per_gpu(catalogs: dict[str, Any]) -> None:
    data = catalogs["prices"]
    assert data["pick"] == {"by": "provider", "sets": "gpu_hour_price", "default": "aws"}
    several = [eid for eid, e in data["entries"].items() if sum(p in e for p in data["fields"]) >= 3]
    assert {"h100-sxm-80gb", "h200-sxm-141gb", "b200", "a100-sxm-80gb", "l40s"} <= set(several)


def test_topology_fields(catalogs: dict[str, Any]) -> None:
    """TP within fast_link_domain runs at interconnect_bandwidth, beyond it at slow_link_bandwidth."""
    e = catalogs["gpus"]["entries"]
    assert (v(e["h100-pcie-80gb"], "fast_link_domain"), v(e["h100-pcie-80gb"], "slow_link_bandwidth")) == (2, 64)
    for gid in ("h100-sxm-80gb", "h200-sxm-141gb", "b200", "mi300x"):
        assert v(e[gid], "fast_link_domain") == 8 and v(e[gid], "slow_link_bandwidth") == 50, gid
    for eid, entry in e.items():
        assert v(entry, "slow_link_bandwidth") <= v(entry, "interconnect_bandwidth"), eid


# ---------------------------------------------------------------- engine limits


def test_engine_limit_ids_are_engine_ids(catalogs: dict[str, Any]) -> None:
    engines = _load(CATALOG_DIR / "engines.yaml")["entries"]
    assert set(catalogs["engine_limits"]["entries"]) <= set(engines)


def test_engine_default_batch_caps(catalogs: dict[str, Any]) -> None:
    e = catalogs["engine_limits"]["entries"]
    assert v(e["vllm"], "max_num_seqs") == 256
    assert v(e["vllm"], "max_num_seqs_large_gpu") == 1024
    assert v(e["trtllm"], "max_num_seqs") == 2048
    for eid, entry in e.items():
        for key in ("max_num_seqs", "max_num_seqs_large_gpu"):
            if key in entry:
                assert isinstance(v(entry, key), int), (eid, key)


def test_a_text_field_takes_words_and_refuses_a_number_or_nothing() -> None:
    text = {**_GOOD, "fields": {"version": {"text": True, "doc": "release"}}}
    good = {**text, "entries": {"x": {"name": "X", "version": {"value": "0.11", "source": "s"}}}}
    assert shape_problems("gpus", good) == []
    for bad in (11, "", "  "):
        broken = {**text, "entries": {"x": {"name": "X", "version": {"value": bad, "source": "s"}}}}
        assert any("text field needs non-empty text" in p for p in shape_problems("gpus", broken)), bad
