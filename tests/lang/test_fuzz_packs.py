"""Malformed packs of every shape get diagnostics, never a traceback (hypothesis).

Generated documents are JSON (which is YAML) with random types in every slot and formulas
drawn from a small grammar that includes hostile pieces.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concur.lang.check import check_paths

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**20), 10**20), st.floats(allow_nan=True), st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6,
)
atoms = st.sampled_from(
    [
        "a",
        "b",
        "x",
        "2",
        "0",
        "1e308",
        "[GiB]",
        "[s]",
        "[730 hour/month]",
        "'mla'",
        "E",
        "__import__",
        "a.b",
        "a[0]",
        "lambda: 1",
        "9**9**9",
        "()",
        "[foo]",
        "[",
        "unit",
    ]
)
ops = st.sampled_from([" + ", " - ", " * ", " / ", " ** ", " % ", " == ", ", ", ""])
funcs = st.sampled_from(["", "floor", "ceil", "max", "min", "ln", "exp", "sqrt", "if_", "erlang_c", "eval", "open"])


@st.composite
def formulas(draw):
    parts = [draw(atoms)]
    for _ in range(draw(st.integers(0, 4))):
        parts.append(draw(ops))
        parts.append(draw(atoms))
    body = "".join(parts)
    fn = draw(funcs)
    return f"{fn}({body})" if fn else body


@st.composite
def packs(draw):
    variables = {
        name: draw(
            st.one_of(
                st.fixed_dictionaries(
                    {"unit": st.sampled_from(["GiB", "s", "", "B/token", "KB", "furlong", "request/s"])},
                    optional={
                        "default": values,
                        "bounds": values,
                        "integer": values,
                        "limit": values,
                        "choices": values,
                        "display": values,
                    },
                ),
                values,
            )
        )
        for name in draw(st.lists(st.sampled_from(["a", "b", "x", "E", "cpu2", "1x"]), max_size=4))
    }
    doc: dict = {
        "pack": "fuzz",
        "variables": variables,
        "equations": draw(
            st.lists(
                st.one_of(st.builds(lambda lhs, rhs: f"{lhs} = {rhs}", atoms, formulas()), formulas(), values),
                max_size=4,
            )
        ),
    }
    for key in draw(
        st.lists(st.sampled_from(["uses", "presets", "constraints", "examples", "scenario", "extra"]), max_size=3)
    ):
        doc[key] = draw(values)
    return doc


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=packs())
def test_malformed_packs_only_produce_diagnostics(tmp_path, doc):
    path = tmp_path / "fuzz.yaml"
    path.write_text(json.dumps(doc))
    diags, count = check_paths([str(path)])
    assert count == 1
    for d in diags:
        assert str(d).startswith(str(path)) or d.where is None
