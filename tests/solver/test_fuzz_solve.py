"""Any values for any givens: a solution or a ConcurError, never a traceback (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import concur
from concur.errors import ConcurError
from concur.lang.library import get_pack, pack_paths

PACKS = sorted(pack_paths())
numbers = st.one_of(st.integers(-5, 10**6), st.floats(-1e12, 1e12, allow_nan=False), st.sampled_from([0, 1, -1]))
texts = st.sampled_from(
    [
        "8192 token",
        "4 GiB",
        "0 s",
        "-1 GiB",
        "1e400",
        "nan",
        "abc",
        "8k token",
        "3 request/s",
        "bf16",
        "h100-sxm-80gb",
        "mla",
        "",
    ]
)


@st.composite
def questions(draw):
    pack = get_pack(draw(st.sampled_from(PACKS)))
    names = sorted(pack.variables)
    given = {
        n: draw(st.one_of(numbers, texts)) for n in draw(st.lists(st.sampled_from(names), max_size=8, unique=True))
    }
    if pack.presets and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(pack.presets)))
        given[key] = draw(st.sampled_from(["llama-3.1-70b", "h100-sxm-80gb", "bf16", "fp8", "nope"]))
    find = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
    return pack.name, given, find


@settings(max_examples=300, deadline=None)
@given(q=questions())
def test_solve_never_crashes(q):
    pack, given_values, find = q
    try:
        sol = concur.solve(find=find, given=given_values, packs=[pack])
    except ConcurError as exc:
        assert str(exc)
        return
    for name in find:
        assert name in sol.values
