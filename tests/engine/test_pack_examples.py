"""Every pack's ``examples:`` run through the solver (cases as data, one generic test)."""

from __future__ import annotations

import math

import pytest

import concur
from concur.errors import ConcurError
from concur.lang.library import get_pack, pack_paths
from concur.lang.units import unit_info


def _cases():
    for name in pack_paths():
        try:
            pack = get_pack(name)
        except ConcurError as exc:  # a broken pack fails its own test instead of breaking collection
            yield pytest.param(name, exc, id=f"{name}: does not load")
            continue
        for ex in pack.examples:
            yield pytest.param(name, ex, id=f"{name}: {ex.name}")


@pytest.mark.parametrize("pack_name, example", list(_cases()))
def test_example(pack_name, example):
    if isinstance(example, ConcurError):
        pytest.fail(f"pack {pack_name} does not load: {example}")
    if example.error:
        with pytest.raises(ConcurError) as info:
            concur.solve(find=list(example.find), given=example.given, packs=[pack_name])
        assert type(info.value).__name__ == example.error or any(
            c.__name__ == example.error for c in type(info.value).__mro__)
        return
    sol = concur.solve(find=list(example.find), given=example.given, packs=[pack_name])
    for name, exp in example.expect.items():
        var = sol.model.variable(name)
        if var.choices:
            assert var.choices[int(sol.values[name])] == exp.value
            continue
        got = sol.value(name, exp.unit) if exp.unit else sol.values[name] / var.unit.factor
        want = float(exp.value)
        if exp.abs is not None:
            assert abs(got - want) <= exp.abs, f"{name}: got {got}, expected {want} ± {exp.abs}"
        else:
            assert math.isclose(got, want, rel_tol=exp.rel, abs_tol=1e-12), \
                f"{name}: got {got}, expected {want} (rel {exp.rel})"


def test_every_shipped_pack_has_examples():
    missing = [n for n in pack_paths() if not get_pack(n).examples]
    assert not missing, f"packs without examples: {missing}"


def test_unit_info_refuses_ambiguous_spellings():
    with pytest.raises(ConcurError, match="kB"):
        unit_info("KB")
