"""What concur compiles lives in one place: ``concur.compiled``, with one bound and one forget.

Every module of ``engine/concur`` is read with ``ast``. A module-level name bound to a mutable
container (dict, list, set, OrderedDict, ...) that starts empty or is mutated anywhere in its
module is state; so is a function decorated with ``functools.cache``/``lru_cache`` that takes an
argument (a cache keyed on its inputs). Both are refused outside ``concur/compiled.py`` unless
:data:`ALLOWED` names them with the reason they are not a cache of compiled work.
"""

from __future__ import annotations

import ast
from pathlib import Path

from concur import compiled
from concur.compiled import Table

ROOT = Path(__file__).resolve().parents[1] / "engine" / "concur"
HOME = "concur/compiled.py"
CONTAINERS = {"dict", "list", "set", "OrderedDict", "defaultdict", "deque", "Counter", "WeakValueDictionary"}
CONTAINERS |= {"WeakKeyDictionary", "WeakSet"}
MUTATORS = {"setdefault", "update", "append", "add", "clear", "pop", "popitem", "extend", "insert", "remove"}
MUTATORS |= {"discard", "move_to_end", "appendleft"}
CACHES = {"cache", "lru_cache"}

# (module path, name) -> why it is not a cache of compiled work. True constants and runtime state only.
ALLOWED = {
    # a constant table: built once at import (``.update`` extends the literal), never written after
    ("concur/lang/units.py", "_REFUSED"): "the ambiguous unit spellings refused, a constant",
    # the unit registry: the shipped table of unit facts, plus units parsed, flushed to the cache folder
    ("concur/lang/units.py", "_MEMO"): "the unit registry (shipped table + units parsed), written to disk",
    # a recording for `python -m concur.lang.unit_table`, emptied by forget_units_asked
    ("concur/lang/units.py", "_SEEN"): "the unit texts asked for, recorded for the shipped-table tool",
    # a stack of `with recording():` blocks open right now, not a cache
    ("concur/lang/library.py", "_READS"): "the recordings open now (concur check's staleness test)",
    # decoders per node class, built from the code's own classes: bounded by the classes, not by inputs
    ("concur/lang/serial.py", "_NODE_FIELDS"): "one decoder list per expression class (a code constant)",
    ("concur/lang/serial.py", "_decoder"): "one decoder per type annotation of the code (a code constant)",
    # sympy needs one class per Erlang function name (two names): identity, not speed
    ("concur/maths/symfuncs.py", "erlang_function"): "one sympy class per Erlang function name",
    # executables this process built in its private folder (removed at exit): state, not compiled work
    ("concur/native/__init__.py", "_BUILT"): "executables this process built and owns",
    # runtime primitives: registries of live objects (primitives import nothing of the engine)
    ("concur/primitives/redis_bucket.py", "_registry"): "live Redis scripts per client (runtime state)",
    ("concur/primitives/worker_queue.py", "_LIVE_QUEUES"): "live worker queues (runtime state)",
    # per-invocation CLI state (--json), to be replaced by an invocation context (issue 24 item 3)
    ("concur/cli/report.py", "_JSON"): "whether this invocation asked for JSON errors",
}


def _container(value: ast.expr) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        return (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "") in CONTAINERS
    return False


def _empty(value: ast.expr) -> bool:
    if isinstance(value, ast.Dict):
        return not value.keys
    if isinstance(value, (ast.List, ast.Set)):
        return not value.elts
    return isinstance(value, ast.Call) and not value.args and not value.keywords


def _targets(node: ast.AST) -> list[ast.expr]:
    out: list[ast.expr] = []
    if isinstance(node, (ast.Assign, ast.Delete)):
        out = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        out = [node.target]
    flat: list[ast.expr] = []
    while out:
        t = out.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            out.extend(t.elts)
        else:
            flat.append(t)
    return flat


def _mutated(tree: ast.Module) -> set[str]:
    """Module names written through: ``X[k] = ...``, ``del X[k]``, ``X.update(...)`` and the like."""
    out = set()
    for node in ast.walk(tree):
        for t in _targets(node):
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                out.add(t.value.id)
        call = node.func if isinstance(node, ast.Call) else None
        if isinstance(call, ast.Attribute) and call.attr in MUTATORS and isinstance(call.value, ast.Name):
            out.add(call.value.id)
    return out


def _state(tree: ast.Module) -> list[tuple[str, int]]:
    """(name, line) of module-level mutable containers that start empty or are written to."""
    mutated = _mutated(tree)
    out = []
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        if value is None or not _container(value):
            continue
        for t in _targets(node):
            if isinstance(t, ast.Name) and (_empty(value) or t.id in mutated):
                out.append((t.id, node.lineno))
    return out


def _input_caches(tree: ast.Module) -> list[tuple[str, int]]:
    """(name, line) of functions memoised by ``functools.cache``/``lru_cache`` on an argument."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [
            a for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs if a.arg not in ("self", "cls")
        ]
        for d in node.decorator_list:
            f = d.func if isinstance(d, ast.Call) else d
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in CACHES and (params or node.args.vararg or node.args.kwarg):
                out.append((node.name, node.lineno))
    return out


def found() -> dict[tuple[str, str], int]:
    """(module path, name) -> line of every cache-like module state in engine/concur."""
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        tree = ast.parse(path.read_text(), filename=str(path))
        for name, line in _state(tree) + _input_caches(tree):
            out[rel, name] = line
    return out


def test_no_cache_lives_outside_the_compiled_model():
    stray = {k: line for k, line in found().items() if k[0] != HOME and k not in ALLOWED}
    assert not stray, "module-level caches outside concur/compiled.py (move them into a Compiled table): " + ", ".join(
        f"{path}:{line} {name}" for (path, name), line in sorted(stray.items())
    )


def test_the_scan_sees_what_it_must_refuse():
    """The scan is not blind: each shape of cache it refuses is found in a sample module."""
    sample = ast.parse(
        "import functools\n"
        "_A: dict[str, int] = {}\n"
        "_B = {'x': 1}\n"
        "_C = set()\n"
        "_D = {'k': 2}\n"
        "def f(k):\n    _B[k] = 1\n    _C.add(k)\n"
        "@functools.lru_cache(maxsize=8)\ndef g(x):\n    return x\n"
        "@functools.cache\ndef h():\n    return 1\n"
    )
    assert {n for n, _ in _state(sample)} == {"_A", "_B", "_C"}  # _D is a constant: never written
    assert [n for n, _ in _input_caches(sample)] == ["g"]  # h takes nothing: a constant computed once


def test_the_allowlist_names_only_what_is_there():
    """A stale entry would hide the next cache of that name: every allowed name is still found."""
    assert set(ALLOWED) - set(found()) <= {("concur/cli/report.py", "_JSON")}  # another change may remove it


def test_one_bound_and_one_forget():
    table: Table[int, int] = Table(3)
    for k in range(3):
        table.put(k, k)
    assert table.get(0) == 0  # 0 is now the most recently used
    table.put(3, 3)
    assert 1 not in table and 0 in table and len(table) == 3
    model = compiled.compiled("a model key")
    assert compiled.compiled("a model key") is model
    model.plans.put("shape", "plan")
    assert model.once("fact", lambda: [1]) is model.once("fact", lambda: [2])
    compiled.table("a process table").put("k", "v")
    compiled.forget()
    assert compiled.compiled("a model key") is not model
    assert "k" not in compiled.table("a process table")
    for i in range(compiled.MODEL_LIMIT + 1):
        compiled.compiled(f"model {i}")
    fresh = compiled.compiled("model 0")
    assert len(fresh.plans) == 0  # the least recently used model was dropped at the bound
    compiled.forget()
