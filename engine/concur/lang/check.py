"""``concur check``: dimensional analysis of every equation, without sympy.

Each variable's unit was parsed once into a dimension vector; this module walks
each equation's tree combining vectors (about 20 µs an equation). Rules:

* both sides of an equation, every term of a sum, both sides of a comparison,
  every argument of ``min``/``max``/``abs`` and both branches of ``if_`` agree;
* ``exp``/``ln``/``log2``/``log10``/``erlang_*`` take and give dimensionless values;
* ``floor``/``ceil`` take a pure count (dimensionless, or tokens/requests/...),
  because rounding must not depend on the unit the value is stored in;
* a bare number may scale anything but may only be *added* to a dimensionless
  value (0 excepted);
* a variable exponent needs a dimensionless base and exponent;
* a constant argument must lie in the function's admissible range
  (:data:`concur.lang.functions.FUNCTIONS`: ``erlang_b(1e9, 1e9)`` would run for minutes).

Checking a folder reads the ``*.yaml`` files *in* it: a symlink that leads outside the folder
is reported, not followed (a pull request could otherwise make CI read any file).

Diagnostics are compiler-style: ``file:line:col: error: message`` (:meth:`Diagnostic.to_json` for
machines). A file is first checked the fast way (the cached, fully validated model); only when it
fails to load is it loaded again in collecting mode (:func:`concur.lang.model.build_model` with
``problems``), so *every* independent problem is reported -- each bad variable, each bad
equation -- and the sound rest of the pack is still unit-checked. The same problem reached twice
(a broken pack used by two checked packs) is reported once.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..cache import cache_dir, digest, read_json, source_digest, write_json
from ..compiled import compiled
from ..errors import ConcurError, Location, UnitError
from ..records import record
from .expr import Bin, Call, Cmp, If, Logic, Neg, Node, Num, Str, UnitLit, Var, to_text, walk
from .functions import FUNCTIONS, out_of_range
from .library import inside, load_catalog_file
from .model import build_model
from .pack import Pack, load_catalog
from .units import (
    COUNT_DIMENSIONS,
    DIMENSIONLESS,
    Dims,
    dims_mul,
    dims_pow,
    format_dims,
)
from .values import convert_value

__all__ = [
    "Diagnostic",
    "check_catalogs",
    "check_equation_dims",
    "check_model",
    "check_paths",
    "infer_dims",
    "require_checked",
]


@record
class Diagnostic:
    """One problem: where (file, line, column when known), how bad, and what."""

    where: Location | None
    message: str
    severity: str = "error"

    def __str__(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        return f"{prefix}{self.severity}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """``{"file", "line", "col", "severity", "message"}`` (line/col null when unknown)."""
        where = self.where
        return {
            "file": where.file if where else None,
            "line": where.line if where else None,
            "col": where.col if where else None,
            "severity": self.severity,
            "message": self.message,
        }

    @classmethod
    def of(cls, exc: ConcurError, fallback: str) -> Diagnostic:
        """The diagnostic for an error raised while loading ``fallback`` (its file, when the error has no place)."""
        return cls(exc.where or Location(fallback), exc.render_body())


class _DimError(Exception):
    pass


def _bin_dims(node: Bin, var_dims: dict[str, Dims]) -> Dims:
    """``+ - %`` need one dimension (a literal 0 takes the other side's); ``* /`` combine;
    ``**`` raises to a constant, or needs a dimensionless base and exponent."""
    if node.op in ("+", "-", "%"):
        a, b = infer_dims(node.left, var_dims), infer_dims(node.right, var_dims)
        if a != b:
            if isinstance(node.left, Num) and node.left.value == 0:
                return b
            if isinstance(node.right, Num) and node.right.value == 0:
                return a
            verb = {"+": "add", "-": "subtract", "%": "take the remainder of"}[node.op]
            raise _DimError(f"cannot {verb} {_describe(node.left, a)} and {_describe(node.right, b)}")
        return a
    if node.op in ("*", "/"):
        a, b = infer_dims(node.left, var_dims), infer_dims(node.right, var_dims)
        return dims_mul(a, b, 1.0 if node.op == "*" else -1.0)
    base = infer_dims(node.left, var_dims)
    if isinstance(node.right, Num):
        return dims_pow(base, node.right.value)
    exp = infer_dims(node.right, var_dims)
    if base or exp:
        raise _DimError(
            f"a variable exponent needs a dimensionless base and exponent: "
            f"{_describe(node.left, base)} ** {_describe(node.right, exp)}"
        )
    return DIMENSIONLESS


def _call_dims(node: Call, var_dims: dict[str, Dims]) -> Dims:
    """A call's dimension by its function's rule (``dims`` in :mod:`concur.lang.functions`)."""
    fn = FUNCTIONS[node.fn]
    dims = [infer_dims(a, var_dims) for a in node.args]
    if fn.dims == "dimensionless":
        for arg, d in zip(node.args, dims):
            if d:
                raise _DimError(f"{node.fn}() needs a dimensionless argument, got {_describe(arg, d)}")
        return DIMENSIONLESS
    if fn.dims == "sqrt":
        return dims_pow(dims[0], 0.5)
    if fn.dims == "count":
        bad = [d for d, _ in dims[0] if d not in COUNT_DIMENSIONS]
        if bad:
            raise _DimError(
                f"{node.fn}() rounds a count; {_describe(node.args[0], dims[0])} is not one "
                f"(divide by a unit first, e.g. {node.fn}(x / [GiB]))"
            )
        return dims[0]
    first = dims[0]
    for arg, d in zip(node.args[1:], dims[1:]):
        if d != first:
            raise _DimError(f"{node.fn}() arguments disagree: {_describe(node.args[0], first)} vs {_describe(arg, d)}")
    return first


def _cmp_dims(node: Cmp, var_dims: dict[str, Dims]) -> Dims:
    """Both sides of a comparison share a dimension (a literal 0 matches any); the result is
    dimensionless."""
    a, b = infer_dims(node.left, var_dims), infer_dims(node.right, var_dims)
    if (
        a != b
        and not (isinstance(node.right, Num) and node.right.value == 0)
        and not (isinstance(node.left, Num) and node.left.value == 0)
    ):
        raise _DimError(f"cannot compare {_describe(node.left, a)} with {_describe(node.right, b)}")
    return DIMENSIONLESS


def _if_dims(node: If, var_dims: dict[str, Dims]) -> Dims:
    """The condition is checked on its own; both branches share the result's dimension."""
    infer_dims(node.cond, var_dims)
    a, b = infer_dims(node.then, var_dims), infer_dims(node.other, var_dims)
    if a != b:
        raise _DimError(f"if_() branches disagree: {_describe(node.then, a)} vs {_describe(node.other, b)}")
    return a


def infer_dims(node: Node, var_dims: dict[str, Dims]) -> Dims:
    """Dimension of ``node``; raises ``_DimError`` (internal) with a readable message."""
    if isinstance(node, (Num, Str)):
        return DIMENSIONLESS
    if isinstance(node, UnitLit):
        return node.dims
    if isinstance(node, Var):
        return var_dims[node.name]
    if isinstance(node, Neg):
        return infer_dims(node.arg, var_dims)
    if isinstance(node, Bin):
        return _bin_dims(node, var_dims)
    if isinstance(node, Call):
        return _call_dims(node, var_dims)
    if isinstance(node, Cmp):
        return _cmp_dims(node, var_dims)
    if isinstance(node, Logic):
        for arg in node.args:
            infer_dims(arg, var_dims)
        return DIMENSIONLESS
    if isinstance(node, If):
        return _if_dims(node, var_dims)
    raise TypeError(node)


def _describe(node: Node, dims: Dims) -> str:
    return f"'{to_text(node)}' [{format_dims(dims)}]"


def check_equation_dims(lhs: Node, rhs: Node, var_dims: dict[str, Dims]) -> str | None:
    """None when consistent, else the message."""
    try:
        a = infer_dims(lhs, var_dims)
        b = infer_dims(rhs, var_dims)
    except _DimError as exc:
        return str(exc)
    if a != b:
        return f"the two sides disagree: {_describe(lhs, a)} vs {_describe(rhs, b)}"
    return None


def _constant(node: Node) -> float | None:
    """The value of a tree made only of numbers, unit literals and arithmetic (None otherwise)."""
    if isinstance(node, (Num, UnitLit)):
        return node.value
    if isinstance(node, Neg):
        inner = _constant(node.arg)
        return None if inner is None else -inner
    if isinstance(node, Bin) and node.op in ("+", "-", "*", "/", "**"):
        a, b = _constant(node.left), _constant(node.right)
        if a is None or b is None:
            return None
        try:
            return float(
                {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else math.nan, "**": a**b if a > 0 else math.nan}[
                    node.op
                ]
            )
        except (ArithmeticError, ValueError):
            return None
    return None


def range_problems(node: Node) -> list[str]:
    """Constant arguments outside their function's admissible range, anywhere in ``node``."""
    out = []
    for n in walk(node):
        if isinstance(n, Call):
            for i, arg in enumerate(n.args):
                value = _constant(arg)
                problem = None if value is None else out_of_range(n.fn, i, value)
                if problem:
                    out.append(problem)
    return out


def _equation_problems(model, var_dims: dict[str, Dims], only_pack: str | None) -> list[Diagnostic]:  # type: ignore[no-untyped-def]
    """Unit mismatches, constant arguments out of range and identities (``a = a``) in the equations."""
    out: list[Diagnostic] = []
    for eq in model.equations:
        if only_pack and eq.pack != only_pack:
            continue
        msg = check_equation_dims(eq.lhs, eq.rhs, var_dims)
        if msg:
            names = ", ".join(f"{n} [{model.variables[n].unit.text or '1'}]" for n in sorted(eq.names))
            out.append(Diagnostic(eq.where, f"unit mismatch in '{eq.text}': {msg} (units: {names})"))
        for problem in range_problems(eq.lhs) + range_problems(eq.rhs):
            out.append(Diagnostic(eq.where, f"{problem} in '{eq.text}'"))
        if eq.lhs == eq.rhs:  # 'a = a' passed the check; every solve using it then said a is undetermined
            out.append(
                Diagnostic(
                    eq.where,
                    f"equation '{eq.text}' has the same expression on both sides: it holds for every value "
                    "and determines nothing; write the relation meant, or remove it",
                )
            )
    return out


def _constraint_problems(model, var_dims: dict[str, Dims], only_pack: str | None) -> list[Diagnostic]:  # type: ignore[no-untyped-def]
    """Unit mismatches and constant arguments out of range in the checks (constraints)."""
    out: list[Diagnostic] = []
    for con in model.constraints:
        if only_pack and con.pack != only_pack:
            continue
        try:
            infer_dims(con.expr, var_dims)
        except _DimError as exc:
            out.append(Diagnostic(con.where, f"unit mismatch in check '{con.text}': {exc}"))
        for problem in range_problems(con.expr):
            out.append(Diagnostic(con.where, f"{problem} in check '{con.text}'"))
    return out


def _default_problems(model, only_pack: str | None) -> list[Diagnostic]:  # type: ignore[no-untyped-def]
    """Defaults outside their variable's bounds."""
    out: list[Diagnostic] = []
    for var in model.variables.values():
        if only_pack and var.pack != only_pack:
            continue
        lo, hi = var.bounds
        if var.default is not None and ((lo is not None and var.default < lo) or (hi is not None and var.default > hi)):
            out.append(Diagnostic(var.where, f"default of '{var.name}' ({var.default_text}) is outside its bounds"))
    return out


def _preset_problems(model, broken: set[str]) -> list[Diagnostic]:  # type: ignore[no-untyped-def]
    """Preset fields mapped to variables no pack declares (``broken``: declarations already reported)."""
    out: list[Diagnostic] = []
    for key, chain in model.presets.items():
        for preset in chain:
            for field, target in preset.fields.items():
                if target not in model.variables and target not in broken:
                    out.append(
                        Diagnostic(preset.where, f"preset '{key}' maps field '{field}' to undeclared '{target}'")
                    )
    return out


def check_model(model, only_pack: str | None = None, examples: bool = True) -> list[Diagnostic]:  # type: ignore[no-untyped-def]
    """Check every equation and constraint (of ``only_pack`` if given) and every default/bound."""
    var_dims = {name: v.unit.dims for name, v in model.variables.items()}
    out = _equation_problems(model, var_dims, only_pack) + _constraint_problems(model, var_dims, only_pack)
    out += _default_problems(model, only_pack)
    broken = {name for pack in model.packs for name in pack.broken}  # declarations already reported
    out += _preset_problems(model, broken)
    for pack in model.packs if examples else ():  # a pack's examples speak its own names, not a composition's
        if only_pack and pack.name != only_pack:
            continue
        out.extend(_check_examples(pack, model, broken))
    return out


def _check_examples(pack: Pack, model, broken: set[str]) -> list[Diagnostic]:  # type: ignore[no-untyped-def]
    out = []
    for ex in pack.examples:
        for name in list(ex.find) + list(ex.expect):
            if name not in model.variables and name not in broken:
                out.append(Diagnostic(ex.where, f"example '{ex.name}' names unknown variable '{name}'"))
        for name, raw in ex.given.items():
            if name in model.presets:
                continue
            var = model.variables.get(name)
            if var is None and name in broken:
                continue
            if var is None:
                out.append(Diagnostic(ex.where, f"example '{ex.name}' gives unknown variable '{name}'"))
                continue
            try:
                convert_value(raw, var, ex.where)
            except ConcurError as exc:
                out.append(Diagnostic(ex.where, f"example '{ex.name}': {exc.message}"))
    return out


def check_paths(paths: list[str]) -> tuple[list[Diagnostic], int]:
    """Check pack files (or folders of them); returns (every diagnostic, packs checked).

    Paths are expected to exist (the CLI refuses a missing one as a usage error first).
    """
    files: list[Path] = []
    diags: list[Diagnostic] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files.extend(_files_in(path, diags))
        else:
            files.append(path)
    for f in files:
        diags.extend(check_file(f))
    return _unique(diags), len(files)


def check_file(path: Path) -> list[Diagnostic]:
    """Every problem of the pack in ``path``: the fast path when it loads, the collecting one when not."""
    try:
        model = build_model([str(path)])
    except ConcurError:
        problems: list[ConcurError] = []
        try:
            model = build_model([str(path)], problems=problems)
        except ConcurError as exc:  # not a pack at all (invalid YAML, no 'pack:'): one problem, nothing more
            return [Diagnostic.of(exc, str(path))]
        found = [Diagnostic.of(exc, str(path)) for exc in problems]
        return sorted(found + check_model(model, only_pack=model.packs[0].name), key=_position)
    return sorted(check_model(model, only_pack=model.packs[0].name), key=_position)


def _position(d: Diagnostic) -> tuple[str, int, int]:
    """Order in the file (a problem in a used pack sorts by that pack's name)."""
    w = d.where
    return (w.file, w.line or 0, w.col or 0) if w else ("", 0, 0)


def _unique(diags: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[tuple[str, str]] = set()
    out = []
    for d in diags:
        key = (str(d.where), d.message)
        if key not in seen:
            seen.add(key)
            out.append(d)
    return out


def check_catalogs(paths: list[str]) -> list[Diagnostic]:
    """Load every catalog under ``<folder>/catalogs/`` of the folders given (sources required), reporting
    every bad field, value and source."""
    out: list[Diagnostic] = []
    for p in paths:
        folder = Path(p) / "catalogs"
        if not folder.is_dir() or not inside(folder, Path(p)):
            continue
        for f in _files_in(folder, out):
            problems: list[ConcurError] = []
            try:
                load_catalog_file(f)  # cached by content: a catalog that loaded before is fine
                continue
            except ConcurError:
                pass
            try:
                load_catalog(f, problems=problems)
            except ConcurError as exc:
                problems.append(exc)
            out.extend(Diagnostic.of(exc, str(f)) for exc in problems)
    return _unique(out)


def _files_in(folder: Path, diags: list[Diagnostic]) -> list[Path]:
    """The ``*.yaml`` files of ``folder`` that really lie in it; a link leading out is a diagnostic."""
    files = []
    for f in sorted(folder.glob("*.yaml")):
        if inside(f, folder):
            files.append(f)
        else:
            diags.append(Diagnostic(Location(str(f)), "is a link to a file outside the folder checked; not read"))
    return files


_KIND = "unit-check"


def _passed(_payload: Any) -> bool:
    return True


def _unit_check(model) -> list[Diagnostic]:  # type: ignore[no-untyped-def]
    """The unit check's errors for ``model``; a pass is remembered in the cache folder under the
    packs' content (``model.key``) and concur's own code, so a warm solve does not check again.
    Only a pass is kept: a failure is always found afresh and reported in full."""
    file = cache_dir() / "unit-checks" / f"{digest(_KIND, source_digest(), model.key)[:40]}.json"
    if read_json(file, _KIND, _passed):
        return []
    diags = [d for d in check_model(model, examples=False) if d.severity == "error"]
    if not diags:
        write_json(file, _KIND, {"passed": True})
    return diags


def require_checked(model) -> None:  # type: ignore[no-untyped-def]
    """Refuse to solve a model whose packs fail the unit check (:class:`UnitError`, exit 1).

    A pack with ``c = a + b`` (GiB + s) would otherwise answer with exit 0; the check costs about
    20 µs an equation and runs once per model and process.
    """
    held = compiled(model.key)
    diags = held.checked
    if diags is None:
        diags = held.checked = _unit_check(model)
    if diags:
        first = diags[0]
        more = f"{len(diags) - 1} more problem(s); " if len(diags) > 1 else ""
        files = " ".join(sorted({p.path for p in model.packs}))
        raise UnitError(
            f"the packs fail their unit check: {first.message}",
            where=first.where,
            hint=f"{more}fix the pack (concur check {files} lists every problem)",
        )
