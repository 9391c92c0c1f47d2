"""Presets over several catalogs (``catalog: [gpus, prices]``) and presets that fall back to another
(``fallback: gpu``): what they fill, what wins, and the one-line errors of a bad pack or id."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from concur.api import solve
from concur.errors import ConcurError, UnderdeterminedError, UnknownNameError
from concur.lang.fallback import fallback_pairs, fallback_values, following_model
from concur.lang.model import build_model
from concur.solver.givens import resolve_givens

FAMILIES = "[ampere, ada, hopper, blackwell, cdna3, cdna4, other]"
PACK = f"""pack: twogpu
presets:
  gpu: {{catalog: [gpus, prices]}}
  side_gpu:
    catalog: [gpus, prices]
    fallback: gpu
    fields: {{hbm_bandwidth: side_bw, family: side_family, gpu_hour_price: side_price}}
variables:
  hbm_bandwidth: {{unit: TB/s}}
  side_bw: {{unit: TB/s}}
  family: {{choices: {FAMILIES}, default: other}}
  side_family: {{choices: [other, blackwell, hopper, ampere, ada, cdna3, cdna4], default: other}}
  gpu_hour_price: {{unit: usd/gpu/hour}}
  side_price: {{unit: usd/gpu/hour}}
  bw_ratio: {{}}
  side_blackwell: {{}}
  price_sum: {{unit: usd/gpu/hour}}
equations:
  - bw_ratio = side_bw / hbm_bandwidth
  - side_blackwell = if_(side_family == "blackwell", 1, 0)
  - price_sum = side_price + gpu_hour_price
"""


@pytest.fixture
def pack(tmp_path: Path) -> str:
    path = tmp_path / "twogpu.yaml"
    path.write_text(PACK)
    return str(path)


def _num(sol: object, name: str) -> float:
    return float(sol.values[name])  # type: ignore[attr-defined]


def test_a_list_of_catalogs_is_one_chain(pack: str) -> None:
    model = build_model([pack])
    assert [p.catalog for p in model.presets["side_gpu"]] == ["gpus", "prices"]
    assert all(p.fallback == "gpu" for p in model.presets["side_gpu"])
    assert set(fallback_pairs(model, "side_gpu")) == {
        ("side_bw", "hbm_bandwidth"),
        ("side_family", "family"),
        ("side_price", "gpu_hour_price"),  # the price list's pick, renamed by fields
    }
    assert fallback_pairs(model, "gpu") == []


def test_given_it_fills_its_own_entry_and_price(pack: str) -> None:
    sol = solve(["bw_ratio", "side_blackwell", "price_sum"], {"gpu": "h100-sxm-80gb", "side_gpu": "b200"}, pack)
    assert _num(sol, "bw_ratio") == pytest.approx(8.0 / 3.35, rel=1e-3)  # B200 8 TB/s over H100 3.35 TB/s
    assert _num(sol, "side_blackwell") == 1
    # aws list prices: H100 6.88, B200 14.2416 usd/GPU-hour (catalogs/prices.yaml)
    assert _num(sol, "price_sum") == pytest.approx((6.88 + 14.2416) / 3600, rel=1e-9)


def test_not_given_it_takes_what_the_fallback_holds(pack: str) -> None:
    sol = solve(["bw_ratio", "side_blackwell", "price_sum"], {"gpu": "b200"}, pack)
    assert _num(sol, "bw_ratio") == 1
    assert _num(sol, "side_blackwell") == 1  # copied as text: the two choice lists differ in order
    assert _num(sol, "price_sum") == pytest.approx(2 * 14.2416 / 3600, rel=1e-9)


def test_a_value_typed_for_the_fallback_is_lent_too_and_one_typed_for_ours_wins(pack: str) -> None:
    sol = solve(["price_sum"], {"gpu": "h100-sxm-80gb", "gpu_hour_price": "2 usd/gpu/hour"}, pack)
    assert _num(sol, "price_sum") == pytest.approx(4 / 3600, rel=1e-12)  # never the catalog's 6.88
    sol = solve(["price_sum"], {"gpu": "h100-sxm-80gb", "side_price": "1 usd/gpu/hour"}, pack)
    assert _num(sol, "price_sum") == pytest.approx((1 + 6.88) / 3600, rel=1e-12)
    # no gpu at all: raw values are lent as well
    sol = solve(["bw_ratio"], {"hbm_bandwidth": "2 TB/s"}, pack)
    assert _num(sol, "bw_ratio") == 1


def test_nothing_is_lent_that_the_fallback_lacks(pack: str) -> None:
    model = build_model([pack])
    assert fallback_values(model, (), {}) == {}
    assert fallback_values(model, ("side_gpu",), {"hbm_bandwidth": 2e12}) == {}
    assert fallback_values(model, (), {"hbm_bandwidth": 2e12}) == {"side_bw": (2e12, "hbm_bandwidth", "side_gpu")}
    givens = resolve_givens(model, {"gpu": "h100-sxm-80gb", "gpu_hour_price": 2})
    assert givens.sources["side_bw"] == "preset side_gpu=h100-sxm-80gb"  # the side GPU is the H100 gpu names
    assert givens.sources["side_price"] == "as gpu_hour_price"  # typed, not the catalog's
    assert "side_gpu" not in givens.presets  # the answer names no preset the user did not give


def test_a_bad_id_is_one_line_with_did_you_mean(pack: str) -> None:
    with pytest.raises(UnknownNameError) as err:
        solve(["bw_ratio"], {"gpu": "h100-sxm-80gb", "side_gpu": "b20"}, pack)
    assert "unknown side_gpu 'b20'" in str(err.value) and "did you mean" in err.value.render()
    out = subprocess.run(
        [sys.executable, "-m", "concur", "solve", pack, "--find", "bw_ratio", "--set", "gpu=h100-sxm-80gb"]
        + ["--set", "side_gpu=h200-sx"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "unknown side_gpu 'h200-sx'; did you mean h200-sxm-141gb" in lines[0]


def test_a_fallback_to_an_undeclared_preset_is_refused_where_it_is_written(tmp_path: Path) -> None:
    path = tmp_path / "badfb.yaml"
    path.write_text(PACK.replace("pack: twogpu", "pack: badfb").replace("fallback: gpu", "fallback: gpuu"))
    with pytest.raises(ConcurError) as err:
        build_model([str(path)])
    assert "falls back to 'gpuu', which no pack in play declares" in str(err.value)
    assert err.value.where is not None and str(path) in str(err.value.where)
    path.write_text(PACK.replace("pack: twogpu", "pack: badfb").replace("fallback: gpu", "fallback: side_gpu"))
    with pytest.raises(ConcurError, match="cannot fall back to itself"):
        build_model([str(path)])
    path.write_text(PACK.replace("pack: twogpu", "pack: badfb").replace("[gpus, prices]}", "[]}"))
    with pytest.raises(ConcurError, match=r"catalog: NAME \(or \[NAME, \.\.\.\]\)"):
        build_model([str(path)])


def test_asking_for_what_the_fallback_would_lend_makes_ours_follow_the_answer(pack: str) -> None:
    """Without side_gpu, side_price is gpu_hour_price: asked for gpu_hour_price, the question has one
    unknown, and both sides are priced at the answer (it was refused, as if there were two)."""
    sol = solve(["gpu_hour_price"], {"gpu": "h100-sxm-80gb", "price_sum": "10 usd/gpu/hour"}, pack)
    assert _num(sol, "gpu_hour_price") == pytest.approx(5 / 3600, rel=1e-9)  # never 10 - 6.88, the list price
    assert _num(sol, "side_price") == _num(sol, "gpu_hour_price")
    step = next(s for s in sol.trace if s.variable == "side_price")
    assert sol.equation_text(step) == "side_price = gpu_hour_price"
    assert str(sol.where(step)).startswith(f"{pack}:4:")  # the side_gpu preset, where the fallback is written
    # the other way round: the answer given back gives the sum it came from
    back = solve(["price_sum"], {"gpu": "h100-sxm-80gb", "gpu_hour_price": "5 usd/gpu/hour"}, pack)
    assert _num(back, "price_sum") == pytest.approx(10 / 3600, rel=1e-12)
    # with the side's own price or its own GPU given, that price stands and only gpu_hour_price is found
    sol = solve(["gpu_hour_price"], {"gpu": "h100-sxm-80gb", "price_sum": "10 usd/gpu/hour", "side_price": 4}, pack)
    assert _num(sol, "gpu_hour_price") == pytest.approx(6 / 3600, rel=1e-9)
    sol = solve(["gpu_hour_price"], {"gpu": "h100-sxm-80gb", "side_gpu": "b200", "price_sum": "20 usd/gpu/hour"}, pack)
    assert _num(sol, "gpu_hour_price") == pytest.approx((20 - 14.2416) / 3600, rel=1e-9)  # B200's aws list price
    assert all(eq.text != "side_price = gpu_hour_price" for eq in sol.model.equations)
    # side_price asked for as well is an unknown of its own, as when gpu_hour_price is known: two
    # unknowns, one equation
    with pytest.raises(UnderdeterminedError):
        solve(["gpu_hour_price", "side_price"], {"gpu": "h100-sxm-80gb", "price_sum": "10 usd/gpu/hour"}, pack)


def test_a_following_model_adds_one_equation_per_pair_once_and_keys_apart(pack: str) -> None:
    model = build_model([pack])
    assert following_model(model, ("gpu",), ("bw_ratio",)) is model  # nothing asked that lends
    assert following_model(model, ("side_gpu",), ("gpu_hour_price",)) is model  # side_gpu given: its own entry
    assert following_model(model, ("side_price",), ("gpu_hour_price",)) is model  # ours given
    assert following_model(model, ("gpu",), ("gpu_hour_price", "side_price")) is model  # ours asked: its own
    follows = following_model(model, ("gpu",), ("gpu_hour_price", "hbm_bandwidth"))
    added = follows.equations[len(model.equations) :]
    assert [eq.text for eq in added] == ["side_bw = hbm_bandwidth", "side_price = gpu_hour_price"]
    assert len({eq.key for eq in follows.equations}) == len(follows.equations)
    assert follows.key != model.key  # its plans and caches are its own
    again = following_model(follows, ("gpu",), ("gpu_hour_price", "hbm_bandwidth"))
    assert again.equations == follows.equations  # a model already following adds nothing
    assert following_model(model, ("gpu",), ("gpu_hour_price", "hbm_bandwidth")).key == follows.key


def test_a_choice_that_cannot_follow_the_asked_one_is_still_refused(pack: str, tmp_path: Path) -> None:
    """side_family lists the families in another order than family: the same code is another family, so
    ``side_family = family`` would be wrong; asking for family without side_gpu is refused in one line."""
    from concur.errors import UsageError

    with pytest.raises(UsageError) as err:
        solve(["family", "side_blackwell"], {"hbm_bandwidth": "2 TB/s"}, pack)
    assert "side_family is family while side_gpu is not given, and family is asked for" in str(err.value)
    assert "their choices differ" in str(err.value)
    assert (err.value.variable, err.value.kind, err.value.field) == ("side_family", "asked_fallback", "side_gpu")
    out = subprocess.run(
        [sys.executable, "-m", "concur", "solve", pack, "--find", "family,side_blackwell"]
        + ["--set", "hbm_bandwidth=2"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "--set side_gpu=ID (or --set side_family=...)" in lines[0]
    # the same choices in the same order follow as numbers
    same = tmp_path / "samefam.yaml"
    same.write_text(
        PACK.replace("pack: twogpu", "pack: samefam").replace(
            "[other, blackwell, hopper, ampere, ada, cdna3, cdna4]", FAMILIES
        )
    )
    model = build_model([str(same)])
    assert "side_family = family" in {eq.text for eq in following_model(model, (), ("family",)).equations}


def test_a_sweep_asking_for_the_lender_follows_it_too(pack: str, tmp_path: Path) -> None:
    """The sweep's vectorised plan resolves its givens itself: without following, side_price kept H100's
    list price while gpu_hour_price was solved (only the scalar check of the first point refused)."""
    from concur.sweep.vector import sweep

    path = tmp_path / "twice.yaml"
    path.write_text(
        PACK.replace("pack: twogpu", "pack: twice").replace(
            "  price_sum:", "  twice_price: {unit: usd/gpu/hour}\n  price_sum:"
        )
        + "  - twice_price = 2 * gpu_hour_price\n"
    )
    model = build_model([str(path)])
    given = {"gpu": "h100-sxm-80gb"}
    for validate in (True, False):
        out = sweep(model, {"twice_price": [10.0, 20.0]}, given, ["gpu_hour_price", "price_sum"], validate=validate)
        assert out.method == "vector"
        assert list(out["price_sum"]) == pytest.approx([10.0, 20.0], rel=1e-12)  # never 6.88 + the price
    # a loop (side_price is in the equation solved for gpu_hour_price) is solved per point, alike
    out = sweep(build_model([pack]), {"price_sum": [10.0, 20.0]}, given, ["gpu_hour_price"])
    assert list(out["gpu_hour_price"]) == pytest.approx([5.0, 10.0], rel=1e-12)
