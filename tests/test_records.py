"""concur.records.record behaves like @dataclass(frozen=True) for everything the engine uses."""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from concur.records import record


def _pair():
    """The same class twice: a stdlib frozen dataclass and a record."""

    def body(deco):
        @deco
        class Item:
            """An item."""

            name: str
            size: float = 1.0
            tags: dict[str, str] = dataclasses.field(default_factory=dict)
            note: str = dataclasses.field(default="", compare=False)

        return Item

    return body(dataclasses.dataclass(frozen=True)), body(record)


def test_construction_matches_dataclass():
    ref, rec = _pair()
    for args, kwargs in (
        ((), {"name": "a"}),
        (("a",), {}),
        (("a", 2.0), {}),
        (("a",), {"tags": {"k": "v"}}),
        ((), {"name": "a", "size": 3.0, "tags": {}, "note": "n"}),
        (("a", 2.0, {}, "n"), {}),
    ):
        a, b = ref(*args, **kwargs), rec(*args, **kwargs)
        assert dataclasses.asdict(a) == dataclasses.asdict(b)
        assert repr(a) == repr(b)
    assert rec("a").tags is not rec("a").tags  # a fresh default per instance
    for args, kwargs in (((), {}), (("a",), {"name": "b"}), (("a",), {"colour": "red"}), (("a", 1, {}, "", 5), {})):
        with pytest.raises(TypeError):
            ref(*args, **kwargs)
        with pytest.raises(TypeError):
            rec(*args, **kwargs)


def test_equality_hash_and_frozen_match_dataclass():
    ref, rec = _pair()
    assert rec("a", note="x") == rec("a", note="y")  # compare=False fields are left out
    assert rec("a") != rec("b") and rec("a") != ref("a")
    assert hash(rec("a", 2.0, ())) == hash(rec("a", 2.0, (), note="z")) == hash(ref("a", 2.0, ()))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        hash(rec("a"))  # a dict field is unhashable, as in the dataclass
    with pytest.raises(TypeError):
        hash(ref("a"))
    item = rec("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        item.name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del item.name  # type: ignore[misc]


def test_fields_replace_copy_and_pickle():
    _, rec = _pair()
    item = rec("a", 2.0, {"k": "v"}, "n")
    assert dataclasses.is_dataclass(item)
    assert [f.name for f in dataclasses.fields(item)] == ["name", "size", "tags", "note"]
    assert dataclasses.replace(item, size=3.0) == rec("a", 3.0, {"k": "v"})
    assert copy.deepcopy(item) == item


def test_pickle_round_trip():
    from concur.lang.units import unit_info

    info = unit_info("GiB")
    assert pickle.loads(pickle.dumps(info)) == info


def test_methods_a_record_cannot_share_are_refused():
    with pytest.raises(TypeError, match="__post_init__"):

        @record
        class Bad:
            """Needs a post-init."""

            x: int

            def __post_init__(self) -> None:
                pass
