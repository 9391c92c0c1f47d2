"""The formula language: a whitelist parser and the expression tree it builds.

Formulas from packs are *parsed*, never evaluated by Python: the text goes
through :func:`ast.parse` and every node is checked against a whitelist
(arithmetic, comparisons, numbers, declared names, unit literals in brackets,
and the functions of :mod:`concur.lang.functions`). Everything else -- attribute
access, subscripts, lambdas, calls of other names, keyword arguments, strings
outside a choice comparison -- is refused with the column where it starts.
Resource limits stop hostile input before any work: text length, node count,
nesting depth, and exponents (``9**9**9`` is refused: an exponent must be a
number of magnitude at most 64, or a variable).

The tree (:class:`Num`, :class:`Var`, :class:`UnitLit`, :class:`Str`,
:class:`Bin`, :class:`Neg`, :class:`Call`, :class:`Cmp`, :class:`If`) is plain,
frozen and cached as JSON (:mod:`concur.lang.serial`); it is evaluated by closures built once
(:func:`compile_node`), and turned into sympy only when an equation must be inverted
(:mod:`concur.solver.symbolic`).
Values are floats in base units; a unit literal is its base-unit magnitude.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import Location, PackError, UnsafeExpressionError
from .functions import FUNCTIONS
from .units import parse_quantity, unit_info

__all__ = [
    "BIN_OPS",
    "CMP_OPS",
    "LOGIC_OPS",
    "MAX_EXPONENT",
    "MAX_LENGTH",
    "MAX_NODES",
    "NAME_RE",
    "RESERVED_NAMES",
    "Bin",
    "Call",
    "Cmp",
    "If",
    "Logic",
    "Neg",
    "Node",
    "Num",
    "Str",
    "UnitLit",
    "Var",
    "compile_node",
    "name_problem",
    "names_in",
    "parse_equation",
    "parse_expression",
    "scalar_comparison",
    "split_equation",
    "to_text",
]

MAX_LENGTH = 2000
MAX_NODES = 500
MAX_DEPTH = 60
MAX_EXPONENT = 64
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
# Names sympy or a spreadsheet would misread, or that shadow the formula language.
RESERVED_NAMES = frozenset(
    {
        "E",
        "I",
        "N",
        "S",
        "Q",
        "O",
        "pi",
        "oo",
        "nan",
        "zoo",
        "TRUE",
        "FALSE",
        "True",
        "False",
        "None",
        "and",
        "or",
        "not",
        "if_",
        "lambda",
    }
    | set(FUNCTIONS)
)


def name_problem(name: str, what: str = "name") -> str | None:
    """Why ``name`` is not a valid identifier (None when it is): ASCII letter first, then ASCII
    letters, digits and '_', at most 64 characters.

    Non-ASCII is refused rather than normalised: Python (and so a formula) reads the full-width
    'ａ' as 'a' (NFKC), which would let two different-looking names silently mean one variable.
    """
    if NAME_RE.match(name):
        return None
    if not name.isascii():
        nfkc = unicodedata.normalize("NFKC", name)
        read = f" (NFKC, as Python reads it, makes it '{nfkc}')" if nfkc != name else ""
        return f"{what} '{name}' is not ASCII{read}; use ASCII letters, digits and '_'"
    return f"'{name}' is not a valid {what}; names start with a letter and use letters, digits and '_'"


class Node:
    """Base of the expression tree."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Num(Node):
    """A number literal."""

    value: float


@dataclass(frozen=True, slots=True)
class Var(Node):
    """A reference to a declared variable."""

    name: str


@dataclass(frozen=True, slots=True)
class UnitLit(Node):
    """A bracketed quantity such as ``[GiB]`` or ``[730 hour/month]``: ``value`` in base units."""

    text: str
    value: float
    dims: tuple[tuple[str, float], ...]


@dataclass(frozen=True, slots=True)
class Str(Node):
    """A string, legal only as one side of ``choice_variable == "option"``."""

    text: str


@dataclass(frozen=True, slots=True)
class Bin(Node):
    """``left op right`` for one of :data:`BIN_OPS`."""

    op: str  # + - * / ** %
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Neg(Node):
    """Unary minus."""

    arg: Node


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A call of a function of :data:`concur.lang.functions.FUNCTIONS`."""

    fn: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Cmp(Node):
    """A comparison ``left op right`` (one of :data:`CMP_OPS`; ``==`` within a relative 1e-12)."""

    op: str  # < <= > >= == !=
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Logic(Node):
    """``and``/``or`` over its arguments, or ``not`` of one."""

    op: str  # and / or / not
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class If(Node):
    """``if_(cond, then, other)``: ``then`` where ``cond`` holds, else ``other``."""

    cond: Node
    then: Node
    other: Node


_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**", ast.Mod: "%"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
BIN_OPS = frozenset(_BINOPS.values())
CMP_OPS = frozenset(_CMPOPS.values())
LOGIC_OPS = frozenset({"and", "or", "not"})
_BRACKET_RE = re.compile(r"\[([^\[\]]*)\]")
_PLACEHOLDER_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def _placeholder(index: int, width: int) -> str:
    """A name of exactly ``width`` characters standing for bracket literal ``index``."""
    digits = ""
    n = index
    while True:
        digits = _PLACEHOLDER_ALPHABET[n % 36] + digits
        n //= 36
        if n == 0:
            break
    name = "_" + digits
    if len(name) > width:
        return "_" + digits  # wider than the bracket: columns after it shift, still correct text
    return name + "_" * (width - len(name))


def split_equation(text: str) -> tuple[str, str, int]:
    """Split ``lhs = rhs`` on the one top-level ``=``; returns (lhs, rhs, rhs_offset)."""
    positions = [
        i
        for i, ch in enumerate(text)
        if ch == "=" and (i == 0 or text[i - 1] not in "=<>!") and (i + 1 >= len(text) or text[i + 1] != "=")
    ]
    if len(positions) != 1:
        raise ValueError("an equation needs exactly one '=' (use '==' only inside if_ or check)")
    i = positions[0]
    return text[:i], text[i + 1 :], i + 1


class _Parser:
    def __init__(
        self,
        text: str,
        where: Location | None,
        col_offset: int,
        unit_lookup: Callable[[str], Any] | None,
        allow_compare: bool,
    ) -> None:
        self.text = text
        self.where = where
        self.col_offset = col_offset
        self.unit_lookup = unit_lookup
        self.allow_compare = allow_compare
        self.count = 0
        self.units: dict[str, UnitLit] = {}

    def fail(
        self,
        message: str,
        col: int | None = None,
        hint: str | None = None,
        cls: type[PackError] = UnsafeExpressionError,
    ) -> PackError:
        where = self.where
        if where is not None and col is not None:
            base_col = (where.col or 1) if where.line is not None else 1
            where = Location(where.file, where.line, base_col + self.col_offset + col)
        return cls(f"{message} in formula '{self.text.strip()}'", where=where, hint=hint)

    def run(self) -> Node:
        text = self.text
        if len(text) > MAX_LENGTH:
            raise self.fail(f"formula is {len(text)} characters; the limit is {MAX_LENGTH}", 0)
        if "\n" in text.strip():
            pass
        source = self._replace_brackets(text)
        try:
            tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as exc:
            col = (exc.offset or 1) - 1 + (len(source) - len(source.lstrip()))
            raise self.fail(f"syntax error ({exc.msg})", col, cls=PackError) from None
        except (RecursionError, MemoryError, ValueError):
            raise self.fail("formula is nested too deeply", 0) from None
        lead = len(source) - len(source.lstrip())
        self.lead = lead
        if not source.isascii():
            self._refuse_folded_names(tree, source.strip())
        return self.node(tree.body, 0)

    def _refuse_folded_names(self, tree: ast.AST, source: str) -> None:
        """Python applies NFKC to identifiers ('ａ' parses as 'a'); refuse any name not written in ASCII."""
        for n in ast.walk(tree):
            if isinstance(n, ast.Name):
                written = ast.get_source_segment(source, n) or n.id
                if not written.isascii():
                    raise self.fail(
                        name_problem(written, "variable name") or "non-ASCII name", n.col_offset + self.lead
                    )

    def _replace_brackets(self, text: str) -> str:
        out = []
        last = 0
        for index, m in enumerate(_BRACKET_RE.finditer(text)):
            before = text[: m.start()].rstrip()
            if before and (before[-1].isalnum() or before[-1] in "_)]"):
                raise self.fail("subscripts are not allowed ([...] is a unit literal such as [GiB])", m.start())
            name = _placeholder(index, len(m.group(0)))
            out.append(text[last : m.start()])
            out.append(name)
            last = m.end()
            self.units[name] = self._unit_literal(m.group(1), m.start())
        out.append(text[last:])
        return "".join(out)

    def _unit_literal(self, body: str, col: int) -> UnitLit:
        if self.unit_lookup is None:
            raise self.fail("unit literals are not allowed here", col)
        body = body.strip()
        try:
            if body and (body[0].isdigit() or body[0] in ".+-"):
                number, info = parse_quantity(body)
            else:
                number, info = 1.0, unit_info(body)
        except ValueError as exc:
            raise self.fail(f"bad unit literal [{body}]: {exc}", col, cls=PackError) from None
        return UnitLit(body, number * info.factor, info.dims)

    def node(self, n: ast.AST, depth: int) -> Node:
        """The tree of Python AST node ``n``, refusing anything the language does not allow and
        any formula over :data:`MAX_NODES` parts or :data:`MAX_DEPTH` levels."""
        self.count += 1
        col = getattr(n, "col_offset", 0) + self.lead
        if self.count > MAX_NODES:
            raise self.fail(f"formula has more than {MAX_NODES} parts", col)
        if depth > MAX_DEPTH:
            raise self.fail(f"formula is nested deeper than {MAX_DEPTH} levels", col)
        if isinstance(n, ast.Constant):
            return self._constant(n, col)
        if isinstance(n, ast.Name):
            return self._name(n, col)
        if isinstance(n, ast.UnaryOp):
            return self._unary(n, depth, col)
        if isinstance(n, ast.BinOp):
            return self._binary(n, depth, col)
        if isinstance(n, ast.Call):
            return self._call(n, depth, col)
        if isinstance(n, ast.Compare):
            return self._compare(n, depth, col)
        if isinstance(n, ast.BoolOp) and self.allow_compare:
            op = "and" if isinstance(n.op, ast.And) else "or"
            return Logic(op, tuple(self.node(v, depth + 1) for v in n.values))
        what = type(n).__name__
        raise self.fail(
            f"'{what}' is not allowed in a formula",
            col,
            hint="formulas use arithmetic, numbers, variable names, [units] and the listed functions",
        )

    def _constant(self, n: ast.Constant, col: int) -> Node:
        """A finite number, or a string (a choice's value); anything else is refused."""
        if isinstance(n.value, bool) or not isinstance(n.value, (int, float)):
            if isinstance(n.value, str):
                return Str(n.value)
            raise self.fail(f"constant {n.value!r} is not a number", col)
        value = float(n.value) if abs(n.value) < 1e300 else math.inf
        if not math.isfinite(value):
            raise self.fail("number is too large", col)
        return Num(value)

    def _name(self, n: ast.Name, col: int) -> Node:
        """A unit literal's placeholder, or a variable whose name is allowed and not reserved."""
        if n.id in self.units:
            return self.units[n.id]
        problem = name_problem(n.id, "variable name")
        if problem:
            raise self.fail(problem, col)
        if n.id in RESERVED_NAMES:
            raise self.fail(f"'{n.id}' is reserved and cannot be used as a variable", col, hint="rename the variable")
        return Var(n.id)

    def _unary(self, n: ast.UnaryOp, depth: int, col: int) -> Node:
        """``-x`` (a negative number folds), ``+x``, and ``not`` where comparisons are allowed."""
        arg = self.node(n.operand, depth + 1)
        if isinstance(n.op, ast.USub):
            return Num(-arg.value) if isinstance(arg, Num) else Neg(arg)
        if isinstance(n.op, ast.UAdd):
            return arg
        if isinstance(n.op, ast.Not) and self.allow_compare:
            return Logic("not", (arg,))
        raise self.fail(f"operator '{type(n.op).__name__}' is not allowed", col)

    def _binary(self, n: ast.BinOp, depth: int, col: int) -> Node:
        """``+ - * / % **`` (powers checked by :meth:`_power`); any other operator is refused."""
        op = _BINOPS.get(type(n.op))
        if op is None:
            raise self.fail(
                f"operator '{type(n.op).__name__}' is not allowed",
                col,
                hint="use + - * / ** % and the listed functions",
            )
        if op == "**":
            return self._power(n, depth, col)
        return Bin(op, self.node(n.left, depth + 1), self.node(n.right, depth + 1))

    def _compare(self, n: ast.Compare, depth: int, col: int) -> Node:
        """One comparison, only where comparisons are allowed (an ``if_`` condition, a check)."""
        if not self.allow_compare:
            raise self.fail("comparisons are allowed only inside if_(...) or a check", col)
        if len(n.ops) != 1:
            raise self.fail("chained comparisons are not allowed; write 'a < b and b < c'", col)
        op = _CMPOPS.get(type(n.ops[0]))
        if op is None:
            raise self.fail(f"comparison '{type(n.ops[0]).__name__}' is not allowed", col)
        return Cmp(op, self.node(n.left, depth + 1), self.node(n.comparators[0], depth + 1))

    def _power(self, n: ast.BinOp, depth: int, col: int) -> Node:
        base = self.node(n.left, depth + 1)
        exponent = self.node(n.right, depth + 1)
        value = _constant_value(exponent)
        if value is None:
            if isinstance(exponent, Var):
                return Bin("**", base, exponent)
            raise self.fail(
                "an exponent must be a number or a single variable",
                col,
                hint=f"powers are limited to |exponent| <= {MAX_EXPONENT}",
            )
        if abs(value) > MAX_EXPONENT:
            raise self.fail(f"exponent {value:g} is larger than {MAX_EXPONENT}", col)
        if isinstance(base, Num) and abs(base.value) > 1e6 and abs(value) > 8:
            raise self.fail("constant power is too large", col)
        return Bin("**", base, exponent if isinstance(exponent, Num) else Num(value))

    def _call(self, n: ast.Call, depth: int, col: int) -> Node:
        if not isinstance(n.func, ast.Name):
            raise self.fail(
                "only the listed functions can be called",
                col,
                hint="allowed: " + ", ".join(sorted(FUNCTIONS)) + ", if_",
            )
        name = n.func.id
        if n.keywords or any(isinstance(a, ast.Starred) for a in n.args):
            raise self.fail(f"{name}() takes plain positional arguments", col)
        if name == "if_":
            if len(n.args) != 3:
                raise self.fail("if_(condition, then, else) takes 3 arguments", col)
            saved = self.allow_compare
            self.allow_compare = True
            cond = self.node(n.args[0], depth + 1)
            self.allow_compare = saved
            return If(cond, self.node(n.args[1], depth + 1), self.node(n.args[2], depth + 1))
        fn = FUNCTIONS.get(name)
        if fn is None:
            raise self.fail(
                f"unknown function '{name}'", col, hint="allowed: " + ", ".join(sorted(FUNCTIONS)) + ", if_"
            )
        if not fn.min_args <= len(n.args) <= fn.max_args:
            want = str(fn.min_args) if fn.min_args == fn.max_args else f"{fn.min_args} to {fn.max_args}"
            raise self.fail(f"{name}() takes {want} arguments, got {len(n.args)}", col)
        return Call(name, tuple(self.node(a, depth + 1) for a in n.args))


def _constant_value(node: Node) -> float | None:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Neg):
        inner = _constant_value(node.arg)
        return None if inner is None else -inner
    if isinstance(node, Bin) and node.op in "*/+-" and len(node.op) == 1:
        a, b = _constant_value(node.left), _constant_value(node.right)
        if a is None or b is None:
            return None
        if node.op == "/":
            return a / b if b else None
        return {"*": a * b, "+": a + b, "-": a - b}[node.op]
    return None


def parse_expression(
    text: str, *, where: Location | None = None, col_offset: int = 0, units: bool = True, allow_compare: bool = False
) -> Node:
    """Parse one expression; raises :class:`UnsafeExpressionError`/:class:`PackError` with file:line:col."""
    if not isinstance(text, str) or not text.strip():
        raise PackError("empty formula", where=where)
    return _Parser(text, where, col_offset, (lambda s: s) if units else None, allow_compare).run()


def parse_equation(text: str, *, where: Location | None = None) -> tuple[Node, Node]:
    """Parse ``lhs = rhs`` into two trees."""
    if not isinstance(text, str):
        raise PackError("an equation must be text like 'a = b * c'", where=where)
    if len(text) > MAX_LENGTH:
        raise UnsafeExpressionError(f"equation is {len(text)} characters; the limit is {MAX_LENGTH}", where=where)
    try:
        lhs, rhs, offset = split_equation(text)
    except ValueError as exc:
        raise PackError(f"{exc}: '{text}'", where=where) from None
    return (parse_expression(lhs, where=where, col_offset=0), parse_expression(rhs, where=where, col_offset=offset))


def walk(node: Node) -> Iterator[Node]:
    yield node
    if isinstance(node, (Bin, Cmp)):
        yield from walk(node.left)
        yield from walk(node.right)
    elif isinstance(node, Neg):
        yield from walk(node.arg)
    elif isinstance(node, (Call, Logic)):
        for a in node.args:
            yield from walk(a)
    elif isinstance(node, If):
        yield from walk(node.cond)
        yield from walk(node.then)
        yield from walk(node.other)


def names_in(node: Node) -> frozenset[str]:
    """The variable names a tree refers to (the ``Var`` nodes :func:`walk` yields, gathered with an
    explicit stack: every solve asks this of every equation, and nested generators cost 3x more)."""
    names: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Var):
            names.add(n.name)
        elif isinstance(n, (Bin, Cmp)):
            stack.append(n.left)
            stack.append(n.right)
        elif isinstance(n, Neg):
            stack.append(n.arg)
        elif isinstance(n, (Call, Logic)):
            stack.extend(n.args)
        elif isinstance(n, If):
            stack.extend((n.cond, n.then, n.other))
    return frozenset(names)


def map_tree(node: Node, fn: Callable[[Node], Node | None]) -> Node:
    """Rebuild a tree bottom-up; ``fn`` may return a replacement (or None to keep)."""
    if isinstance(node, Bin):
        node = Bin(node.op, map_tree(node.left, fn), map_tree(node.right, fn))
    elif isinstance(node, Cmp):
        node = Cmp(node.op, map_tree(node.left, fn), map_tree(node.right, fn))
    elif isinstance(node, Neg):
        node = Neg(map_tree(node.arg, fn))
    elif isinstance(node, Call):
        node = Call(node.fn, tuple(map_tree(a, fn) for a in node.args))
    elif isinstance(node, Logic):
        node = Logic(node.op, tuple(map_tree(a, fn) for a in node.args))
    elif isinstance(node, If):
        node = If(map_tree(node.cond, fn), map_tree(node.then, fn), map_tree(node.other, fn))
    out = fn(node)
    return node if out is None else out


# ---------------------------------------------------------------- printing

_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2, "**": 4}


def to_text(node: Node, prec: int = 0) -> str:
    """Print a tree back in the formula language (used in traces and messages)."""
    if isinstance(node, Num):
        v = node.value
        return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)
    if isinstance(node, Var):
        return node.name
    if isinstance(node, UnitLit):
        return f"[{node.text}]"
    if isinstance(node, Str):
        return repr(node.text)
    if isinstance(node, Neg):
        text = "-" + to_text(node.arg, 3)
        return f"({text})" if prec > 1 else text
    if isinstance(node, Bin):
        p = _PREC[node.op]
        right_p = p + 1 if node.op in "-/%" or (False) else p
        if node.op == "**":
            text = f"{to_text(node.left, p + 1)}**{to_text(node.right, p)}"
        else:
            text = f"{to_text(node.left, p)} {node.op} {to_text(node.right, right_p if node.op in '-/%' else p)}"
        return f"({text})" if p < prec or (p == prec and node.op in "-/%") else text
    if isinstance(node, Call):
        return f"{node.fn}({', '.join(to_text(a) for a in node.args)})"
    if isinstance(node, If):
        return f"if_({to_text(node.cond)}, {to_text(node.then)}, {to_text(node.other)})"
    if isinstance(node, Cmp):
        return f"{to_text(node.left, 1)} {node.op} {to_text(node.right, 1)}"
    if isinstance(node, Logic):
        if node.op == "not":
            return f"not ({to_text(node.args[0])})"
        return f" {node.op} ".join(f"({to_text(a)})" for a in node.args)
    raise TypeError(node)


# ---------------------------------------------------------------- evaluation

Env = dict[str, Any]
Compiled = Callable[[Env], Any]

_PY_BIN: dict[str, Callable[[Any, Any], Any]] = {  # C functions: no Python frame per operation
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "**": operator.pow,
    "%": operator.mod,
}
_PY_CMP: dict[str, Callable[[Any, Any], Any]] = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: abs(a - b) <= 1e-12 * max(abs(a), abs(b), 1e-300),
    "!=": lambda a, b: abs(a - b) > 1e-12 * max(abs(a), abs(b), 1e-300),
}


def scalar_comparison(op: str) -> Callable[[Any, Any], Any]:
    """The function a scalar closure compares with under ``op`` (``==``/``!=`` with a relative tolerance)."""
    return _PY_CMP[op]


def _np_cmp(op: str) -> Callable[[Any, Any], Any]:
    def run(a: Any, b: Any) -> Any:
        import numpy as np

        if op == "==":
            return np.isclose(a, b, rtol=1e-12, atol=0)
        if op == "!=":
            return ~np.isclose(a, b, rtol=1e-12, atol=0)
        return _PY_CMP[op](a, b)

    return run


def _compile_call(node: Call, vector: bool) -> Compiled:
    """A function call: the table's float (or numpy) form on the compiled arguments, with one-
    and two-argument calls unrolled (most calls; no argument list is built per evaluation)."""
    fn = FUNCTIONS[node.fn]
    impl = fn.np if vector else fn.py
    args = [compile_node(a, vector=vector) for a in node.args]
    if len(args) == 1:
        a0 = args[0]
        return lambda env: impl(a0(env))
    if len(args) == 2:
        a0, a1 = args
        return lambda env: impl(a0(env), a1(env))
    return lambda env: impl(*[a(env) for a in args])


def _compile_logic(node: Logic, vector: bool) -> Compiled:
    """``not``/``and``/``or``: Python's short-circuit on floats, numpy's elementwise on arrays."""
    parts = [compile_node(a, vector=vector) for a in node.args]
    if vector:
        import numpy as np

        if node.op == "not":
            return lambda env: np.logical_not(parts[0](env))
        red = np.logical_and if node.op == "and" else np.logical_or
        # parts may mix scalars (a choice) and arrays (a swept input): broadcast first
        return lambda env: red.reduce(np.broadcast_arrays(*[np.asarray(p(env)) for p in parts]))
    if node.op == "not":
        return lambda env: not parts[0](env)
    if node.op == "and":
        return lambda env: all(p(env) for p in parts)
    return lambda env: any(p(env) for p in parts)


def _compile_if(node: If, vector: bool) -> Compiled:
    """``if_``: one branch evaluated on floats, ``numpy.where`` over both on arrays."""
    fc = compile_node(node.cond, vector=vector)
    ft, fo = compile_node(node.then, vector=vector), compile_node(node.other, vector=vector)
    if vector:
        import numpy as np

        return lambda env: np.where(fc(env), ft(env), fo(env))
    return lambda env: ft(env) if fc(env) else fo(env)


def _compile_bin(node: Bin, vector: bool) -> Compiled:
    """A binary operator; ``%`` on arrays is ``numpy.mod`` (the sign of the divisor, as Python).

    A side that is a name or a constant is read in place rather than called (most operands of a
    pack's equations are one or the other: half the calls of an evaluation), with the same
    operation on the same values, so the result is the same float."""
    if vector and node.op == "%":
        fl, fr = compile_node(node.left, vector=vector), compile_node(node.right, vector=vector)
        return lambda env: __import__("numpy").mod(fl(env), fr(env))
    op = _PY_BIN[node.op]
    left, right = _leaf(node.left), _leaf(node.right)
    if left is not None and right is not None:
        return _bin_leaves(op, left, right)
    if left is not None:
        fr = compile_node(node.right, vector=vector)
        kind, a = left
        return (lambda env: op(env[a], fr(env))) if kind == "var" else (lambda env: op(a, fr(env)))
    fl = compile_node(node.left, vector=vector)
    if right is not None:
        kind, b = right
        return (lambda env: op(fl(env), env[b])) if kind == "var" else (lambda env: op(fl(env), b))
    fr = compile_node(node.right, vector=vector)
    return lambda env: op(fl(env), fr(env))


def _leaf(node: Node) -> tuple[str, Any] | None:
    """``("var", name)`` for a name, ``("const", value)`` for a number or unit literal, else None."""
    if isinstance(node, Var):
        return ("var", node.name)
    if isinstance(node, (Num, UnitLit)):
        return ("const", node.value)
    return None


def _bin_leaves(op: Callable[[Any, Any], Any], left: tuple[str, Any], right: tuple[str, Any]) -> Compiled:
    """``op`` on two leaves; two constants are still computed per evaluation (an error such as a
    division by zero is raised where the formula is evaluated, as for any other operation)."""
    (lk, a), (rk, b) = left, right
    if lk == "var" and rk == "var":
        return lambda env: op(env[a], env[b])
    if lk == "var":
        return lambda env: op(env[a], b)
    if rk == "var":
        return lambda env: op(a, env[b])
    return lambda env: op(a, b)


def compile_node(node: Node, *, vector: bool = False) -> Compiled:
    """Build a closure ``f(env) -> value`` once; ``vector=True`` works on numpy arrays.

    Raises ``KeyError`` for a missing name, ``ZeroDivisionError``/``ValueError``/
    ``OverflowError`` for arithmetic the values do not allow (scalar mode).
    """
    if isinstance(node, Num):
        v = node.value
        return lambda env: v
    if isinstance(node, UnitLit):
        u = node.value
        return lambda env: u
    if isinstance(node, Var):
        name = node.name
        return lambda env: env[name]
    if isinstance(node, Str):
        raise TypeError(f"string '{node.text}' outside a choice comparison")
    if isinstance(node, Neg):
        f = compile_node(node.arg, vector=vector)
        return lambda env: -f(env)
    if isinstance(node, Bin):
        return _compile_bin(node, vector)
    if isinstance(node, Call):
        return _compile_call(node, vector)
    if isinstance(node, Cmp):
        fl, fr = compile_node(node.left, vector=vector), compile_node(node.right, vector=vector)
        cmp = _np_cmp(node.op) if vector else _PY_CMP[node.op]
        return lambda env: cmp(fl(env), fr(env))
    if isinstance(node, Logic):
        return _compile_logic(node, vector)
    if isinstance(node, If):
        return _compile_if(node, vector)
    raise TypeError(node)
