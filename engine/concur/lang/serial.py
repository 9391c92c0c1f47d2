"""Packs, catalogs and expression trees as plain JSON data, and back -- validating every field.

The cache (:mod:`concur.cache`) stores parsed packs and inverted closed forms as JSON, and a
cache file may have been written by someone else. :func:`decode` therefore trusts nothing: it
rebuilds objects *from their declared types* and raises :class:`Malformed` (a ``ValueError``)
on the first thing that does not fit, which the cache reader turns into a miss.

Encoding, driven by the dataclasses' type hints (one rule per type, no per-class code):

* a dataclass is a JSON object with exactly its field names (missing or extra keys: refused);
* an expression node is a list ``[ClassName, field, field, ...]``, ``ClassName`` one of
  :data:`NODES` (compact: a pack holds thousands of nodes);
* ``tuple[T, ...]`` and ``tuple[A, B]`` are lists (fixed length checked), ``dict[str, T]`` an
  object, ``X | None`` null or X, ``float`` any JSON number (``Infinity``/``NaN`` as Python's
  json writes them), ``int`` an integer, ``bool`` only true/false (never 0/1), ``str`` a string;
* ``Any`` (raw YAML values kept in examples and scenarios) is plain JSON data, nesting bounded.

Beyond types, the invariants the rest of the engine relies on without re-checking are checked
here too, so a well-typed but hostile file still cannot crash anything downstream: node
operators and functions come from the formula language's tables with a fitting argument count,
variable names match ``NAME_RE``, trees are at most :data:`MAX_DEPTH` deep, and each mapping
keyed by name agrees with the names inside (``variables[k].name == k``...).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from .expr import BIN_OPS, CMP_OPS, LOGIC_OPS, NAME_RE, Bin, Call, Cmp, If, Logic, Neg, Node, Num, Str, UnitLit, Var
from .functions import FUNCTIONS
from .pack import Catalog, Pack

__all__ = [
    "MAX_DEPTH",
    "NODES",
    "Malformed",
    "decode",
    "decode_catalog",
    "decode_inverses",
    "decode_nodes",
    "decode_pack",
    "encode",
    "encode_inverses",
]

NODES: dict[str, type[Node]] = {c.__name__: c for c in (Num, Var, UnitLit, Str, Bin, Neg, Call, Cmp, Logic, If)}
MAX_DEPTH = 400  # expression nesting (the parser allows 60; sympy's inverses nest deeper) and raw data
T = TypeVar("T")


class Malformed(ValueError):
    """Cached data that does not fit the declared types or invariants."""


def encode(value: Any) -> Any:
    """Plain JSON data for a dataclass, node, tuple, dict or scalar (inverse of :func:`decode`)."""
    if isinstance(value, Node):
        return [type(value).__name__, *(encode(getattr(value, name)) for name in _field_names(type(value)))]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return value


def decode(data: Any, kind: Any) -> Any:
    """Rebuild a value of type ``kind`` from :func:`encode`'s output; raises :class:`Malformed`."""
    return _decoder(kind)(data, 0)


def decode_pack(data: Any) -> Pack:
    pack: Pack = decode(data, Pack)
    _keyed(pack.variables, "name")
    _keyed(pack.presets, "key")
    for eq in pack.equations:
        if not isinstance(eq.lhs, Node) or not isinstance(eq.rhs, Node):
            raise Malformed("equation sides must be trees")
    return pack


def decode_catalog(data: Any) -> Catalog:
    catalog: Catalog = decode(data, Catalog)
    _keyed(catalog.fields, "name")
    _keyed(catalog.entries, "id")
    return catalog


def decode_nodes(data: Any) -> tuple[Node, ...]:
    return decode(data, tuple[Node, ...])  # type: ignore[no-any-return]


def encode_inverses(table: dict[tuple[str, str, str], list[Node]]) -> Any:
    """The solver's inverted closed forms ``{(model, equation, variable): [tree, ...]}`` as JSON rows."""
    return [[*key, encode(trees)] for key, trees in table.items()]


def decode_inverses(data: Any) -> dict[tuple[str, str, str], list[Node]]:
    if not isinstance(data, list):
        raise Malformed("expected a list of rows")
    out: dict[tuple[str, str, str], list[Node]] = {}
    for row in data:
        if not (isinstance(row, list) and len(row) == 4 and all(isinstance(k, str) for k in row[:3])):
            raise Malformed("expected [model, equation, variable, trees]")
        out[(row[0], row[1], row[2])] = list(decode_nodes(row[3]))
    return out


def _keyed(mapping: dict[str, Any], attr: str) -> None:
    for key, item in mapping.items():
        if getattr(item, attr) != key:
            raise Malformed(f"entry '{key}' is named '{getattr(item, attr)}'")


Decoder = Callable[[Any, int], Any]


@functools.cache
def _decoder(kind: Any) -> Decoder:
    """One decoding function per type, built once from the type's structure."""
    if kind is Any:
        return _plain
    if kind is Node:
        return _node
    if kind in (str, int, float, bool, type(None)):
        return _scalar_decoder(kind)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(args)
    if origin is tuple:
        return _tuple_decoder(args)
    if origin is dict:
        return _dict_decoder(args[1])
    if dataclasses.is_dataclass(kind):
        return _dataclass_decoder(kind)
    raise TypeError(f"no JSON decoding for {kind!r}")  # a programming error: a new field type


def _scalar_decoder(kind: type) -> Decoder:
    def run(data: Any, depth: int) -> Any:
        if kind is float and isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        if type(data) is kind:
            return data
        raise Malformed(f"expected {kind.__name__}, got {type(data).__name__}")

    return run


def _union_decoder(args: tuple[Any, ...]) -> Decoder:
    options = [_decoder(a) for a in args]

    def run(data: Any, depth: int) -> Any:
        for option in options:
            try:
                return option(data, depth)
            except Malformed:
                continue
        raise Malformed(f"{type(data).__name__} fits none of {args}")

    return run


def _tuple_decoder(args: tuple[Any, ...]) -> Decoder:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])

        def run_var(data: Any, depth: int) -> Any:
            if not isinstance(data, list):
                raise Malformed("expected a list")
            return tuple(item(v, depth + 1) for v in data)

        return run_var
    items = [_decoder(a) for a in args]

    def run_fixed(data: Any, depth: int) -> Any:
        if not isinstance(data, list) or len(data) != len(items):
            raise Malformed(f"expected a list of {len(items)}")
        return tuple(f(v, depth + 1) for f, v in zip(items, data))

    return run_fixed


def _dict_decoder(value_kind: Any) -> Decoder:
    item = _decoder(value_kind)

    def run(data: Any, depth: int) -> Any:
        if not isinstance(data, dict):
            raise Malformed("expected an object")
        return {k: item(v, depth + 1) for k, v in data.items()}

    return run


def _dataclass_decoder(kind: Any) -> Decoder:
    hints = typing.get_type_hints(kind)
    fields = [(f.name, _decoder(hints[f.name])) for f in dataclasses.fields(kind)]
    names = {name for name, _ in fields}

    def run(data: Any, depth: int) -> Any:
        if not isinstance(data, dict) or data.keys() != names:
            raise Malformed(f"expected the fields of {kind.__name__}")
        return kind(*[f(data[name], depth + 1) for name, f in fields])  # by position: the fields' order

    return run


def _plain(data: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise Malformed("data nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [_plain(v, depth + 1) for v in data]
    if isinstance(data, dict):
        return {k: _plain(v, depth + 1) for k, v in data.items()}
    raise Malformed(f"unexpected {type(data).__name__}")


def _field_names(cls: type[Node]) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]  # every node class is a dataclass


_NODE_FIELDS: dict[str, list[Decoder]] = {}  # node class name -> one decoder per field, built on first use


def _node_fields(name: str) -> list[Decoder]:
    decoders = _NODE_FIELDS.get(name)
    if decoders is None:
        hints = typing.get_type_hints(NODES[name])
        decoders = _NODE_FIELDS[name] = [_decoder(hints[f]) for f in _field_names(NODES[name])]
    return decoders


def _node(data: Any, depth: int) -> Node:
    if depth > MAX_DEPTH:
        raise Malformed("expression nested too deeply")
    if not isinstance(data, list) or not data or not isinstance(data[0], str) or data[0] not in NODES:
        raise Malformed("expected an expression node")
    cls = NODES[data[0]]
    decoders = _node_fields(data[0])
    if len(data) != len(decoders) + 1:
        raise Malformed(f"{data[0]} takes {len(decoders)} fields")
    node = cls(*(f(v, depth + 1) for f, v in zip(decoders, data[1:])))
    _check_node(node)
    return node


def _check_node(node: Node) -> None:
    """The invariants the evaluators index tables with (a bad one would be a KeyError later)."""
    if isinstance(node, Bin) and node.op not in BIN_OPS:
        raise Malformed(f"operator {node.op!r}")
    if isinstance(node, Cmp) and node.op not in CMP_OPS:
        raise Malformed(f"comparison {node.op!r}")
    if isinstance(node, Logic) and (
        node.op not in LOGIC_OPS or not node.args or (node.op == "not") != (len(node.args) == 1)
    ):
        raise Malformed(f"logic {node.op!r}")
    if isinstance(node, Var) and not NAME_RE.match(node.name):
        raise Malformed("variable name")
    if isinstance(node, Call):
        fn = FUNCTIONS.get(node.fn)
        if fn is None or not fn.min_args <= len(node.args) <= fn.max_args:
            raise Malformed(f"call of {node.fn!r}")
