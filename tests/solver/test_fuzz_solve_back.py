"""A differential fuzz over every shipped pack: each answer solved back.

For every pack example that answers (its givens scaled by a few factors), each value it finds is
given back in place of one of the example's numeric givens, and that given is asked for. The
inverse answer, given to the forward question, must give the forward answer again: exactly for a
whole count, within the numeric policy's tolerance otherwise (several roots may answer an inverse;
whichever was chosen must be a root). An inverse refused with exit 3 while the forward answer
proves a solution exists may be a false "impossible", but many-to-one equations (a floor, a max,
a memory-bound step where compute is free) make most such refusals honest, so refusals are
counted, not failed; an inverse that *answers* must be right.

Deterministic (no random draws: every example, every swap, in order) and bounded: at most
:data:`SWAPS_PER_PACK` inverse questions per pack, each under the solver's step budget.
"""

from __future__ import annotations

import functools

import pytest

import concur
from concur.errors import ConcurError
from concur.lang.library import get_pack, pack_paths
from concur.lang.model import build_model

PACKS = sorted(pack_paths())
FACTORS = (1.0, 2.0)
SWAPS_PER_PACK = 30
PARTS = 3
"""Each pack's swaps run as PARTS tests (swap n in part n % PARTS), so parallel workers share a
slow pack's inverses instead of one worker waiting on all thirty."""


@functools.cache
def model(pack: str):
    return build_model([pack])


def _shown(var, base: float) -> object:
    if var.choices:
        return var.choices[int(base)]
    if var.integer:
        return round(base / var.display.factor)
    return f"{base / var.display.factor!r} {var.display.text}".strip()


def _scaled(m, given: dict, factor: float) -> dict:
    out = {}
    for key, raw in given.items():
        var = m.variables.get(key)
        if factor != 1.0 and var is not None and not var.choices and not var.integer and isinstance(raw, (int, float)):
            out[key] = raw * factor
        else:
            out[key] = raw
    return out


def _swaps(pack: str):
    m = model(pack)
    for ex in get_pack(pack).examples:
        if ex.error is not None:
            continue
        for factor in FACTORS:
            given = _scaled(m, dict(ex.given), factor)
            try:
                sol = concur.solve(find=list(ex.find), given=given, packs=[pack])
            except ConcurError:
                continue
            for target in ex.find:
                tvar = m.variables[target]
                if tvar.choices or tvar.limit:
                    continue
                for invert in sorted(given):
                    ivar = m.variables.get(invert)
                    if ivar is None or ivar.choices or ivar.limit or invert in m.presets:
                        continue
                    yield given, target, sol.values[target], invert


@pytest.mark.parametrize("part", range(PARTS))
@pytest.mark.parametrize("pack", PACKS)
def test_every_answer_solves_back(pack, part):
    m = model(pack)
    checked = 0
    for n, (given, target, value, invert) in enumerate(_swaps(pack)):
        if n >= SWAPS_PER_PACK:
            break
        if n % PARTS != part:
            continue
        tvar, ivar = m.variables[target], m.variables[invert]
        inverse = {k: v for k, v in given.items() if k != invert}
        inverse[target] = _shown(tvar, value)
        try:
            found = concur.solve(find=[invert], given=inverse, packs=[pack]).values[invert]
        except ConcurError:
            continue  # many-to-one equations (a floor, a max, a flat region) make some inverses refusals
        forward = {**given, invert: _shown(ivar, found)}
        try:
            again = concur.solve(find=[target], given=forward, packs=[pack]).values[target]
        except ConcurError as exc:
            raise AssertionError(
                f"{pack}: {invert} = {found} answers the inverse of {target} = {value}, but the forward "
                f"question at it is refused: {exc}"
            ) from None
        checked += 1
        if tvar.integer:
            assert again == value, f"{pack}: {target} {value} -> {invert} {found} -> {target} {again}"
        else:
            assert again == pytest.approx(value, rel=1e-6), f"{pack}: {target} {value} -> {invert} {found} -> {again}"
    assert checked or pack in NOTHING_TO_SWAP, f"{pack}: no answer of part {part} was solved back"


NOTHING_TO_SWAP: frozenset[str] = frozenset()
