"""The layers stay visible: data flows packs -> language -> solve -> presenters, never back up.

Every import inside ``engine/concur`` (module level *and* inside functions) is read from the
source with ``ast`` and checked against the layer order below; the packages form no cycle even
counting function-level imports; no module reaches into another's ``_private`` names; the runtime
primitives import nothing of the engine and nothing outside the standard library but ``redis``.
A new module lands in a layer by its package; a new top-level module must be added to ``LAYER``.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "engine" / "concur"

# Lower numbers are lower layers; a module may import its own layer and any lower one.
LAYER = {
    "errors": 0,
    "readfile": 0,
    "writefile": 0,
    "cache": 0,
    "compiled": 0,
    "extras": 0,
    "records": 0,
    "maths": 1,
    "lang": 2,
    "solver": 3,
    "sweep": 4,
    "analysis": 5,
    "excel": 6,
    "api": 7,
    "cli": 8,
    "bench": 9,  # benchmarks use the CLI's progress bars and writers; the CLI names them as strings
    "concur": 10,
    "__main__": 10,
    "primitives": -1,
    "native": 0,
}
DOMAIN = {"maths", "lang", "solver", "sweep", "analysis", "excel"}  # never the public facade above them


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _imports(typing_too: bool = False) -> list[tuple[str, str, str, bool]]:
    """(importer, imported module, imported name or "", at module level) for every concur import;
    ``typing_too`` counts the ``if TYPE_CHECKING:`` ones as well."""
    out = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        top = {id(n) for n in tree.body}
        typing_only = {
            id(sub)
            for n in ast.walk(tree)
            if isinstance(n, ast.If) and _type_checking(n.test)
            for body in n.body
            for sub in ast.walk(body)
        }
        for node in ast.walk(tree):
            if id(node) in typing_only and not typing_too:
                continue  # `if TYPE_CHECKING:` imports are for the type checker, never run
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target != "concur" and not target.startswith("concur."):
                    continue
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in MODULES:
                        out.append((name, sub, "", id(node) in top))
                    else:
                        out.append((name, target, alias.name, id(node) in top))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "concur" or alias.name.startswith("concur."):
                        out.append((name, alias.name, "", id(node) in top))
    return out


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


IMPORTS = _imports()


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "concur"


def test_every_module_has_a_layer() -> None:
    assert sorted({_layer(m) for m in MODULES} - LAYER.keys()) == []


def test_no_import_goes_up_a_layer() -> None:
    upward = sorted(
        {(a, b) for a, b, _n, _top in IMPORTS if _layer(a) != _layer(b) and LAYER[_layer(b)] > LAYER[_layer(a)]}
    )
    assert upward == [], "imports against the layer order (packs -> language -> solve -> presenters):\n" + "\n".join(
        f"  {a} -> {b}" for a, b in upward
    )


def test_domain_code_calls_the_solve_package_not_the_public_facade() -> None:
    facade = sorted(
        {(a, b) for a, b, _n, _top in IMPORTS if _layer(a) in DOMAIN and (b == "concur" or _layer(b) == "api")}
    )
    assert facade == []


def test_the_engine_never_imports_its_presenters() -> None:
    below = {"maths", "lang", "solver", "sweep", "analysis"}
    bad = sorted(
        {(a, b) for a, b, _n, _top in IMPORTS if _layer(a) in below and _layer(b) in {"cli", "excel", "bench"}}
    )
    assert bad == []


def test_packages_form_no_cycle_even_through_function_level_imports() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _n, _top in IMPORTS:
        if _layer(a) != _layer(b):
            graph[_layer(a)].add(_layer(b))
    assert _cycles(graph) == []


def test_modules_form_no_cycle_even_through_function_level_imports() -> None:
    """A function-level import defers loading; it must not hide a cycle (``units`` asking the pack
    loader it sits below, say): modules stay in one order, however late each is imported."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _n, _top in IMPORTS:
        if a != b and MODULES[b].name != "__init__.py":
            graph[a].add(b)
    assert _cycles(graph) == []


def test_modules_form_no_cycle_even_through_type_only_imports() -> None:
    """An ``if TYPE_CHECKING:`` import is a dependency a reader follows too: ``solver.plan`` holds
    ``Method`` beside the Plan that uses it, and ``lang.values`` names the little of a variable it
    reads as a Protocol, so no two modules need each other even for their annotations."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b, _n, _top in _imports(typing_too=True):
        if a != b and MODULES[b].name != "__init__.py":
            graph[a].add(b)
    assert _cycles(graph) == []


HEAVY = {"sympy", "numpy", "pint", "openpyxl", "matplotlib"}


def _third_party_at_module_level(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            roots.add(node.module.split(".")[0])
    return roots


AT_TOP: dict[str, set[str]] = defaultdict(set)  # module -> the concur modules it imports at module level
for _a, _b, _n, _at_top in IMPORTS:
    if _at_top:
        AT_TOP[_a].add(_b)


def _loads_heavy(module: str) -> bool:
    """Whether importing ``module`` loads sympy, numpy, pint, openpyxl or matplotlib: through its
    own module-level imports, its packages' and those of every concur module it loads so."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        parts = m.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts)) if ".".join(parts[:i]) in MODULES]
        todo += AT_TOP[m]
    return any(_third_party_at_module_level(MODULES[m]) & HEAVY for m in seen)


def test_function_level_imports_only_defer_heavy_dependencies() -> None:
    """An import inside a function is there to keep a heavy library off a path that does not need
    it, and for nothing else (not to dodge a cycle, not out of habit). Three places defer more, each
    for a reason a test holds: the CLI's commands, so ``concur --help`` and shell completion load
    no engine module (test_packaging); the package root, so ``import concur.primitives`` loads no
    engine (test_packaging); and a tool module run as ``__main__`` importing its own library copy."""
    lazy_by_design = ("concur.cli", "concur.bench")
    light = sorted(
        {
            (a, b)
            for a, b, _n, at_top in IMPORTS
            if not at_top and a != b and a != "concur" and not a.startswith(lazy_by_design) and not _loads_heavy(b)
        }
    )
    assert light == [], "function-level imports of modules that load nothing heavy (import them at the top):\n" + (
        "\n".join(f"  {a} -> {b}" for a, b in light)
    )


def test_no_module_imports_another_modules_private_names() -> None:
    private = sorted(
        {(a, f"{b}.{n}") for a, b, n, _top in IMPORTS if n.startswith("_") and not n.startswith("__") and a != b}
    )
    assert private == []


def test_the_primitives_import_nothing_of_the_engine_and_only_the_standard_library() -> None:
    stdlib = set(sys.stdlib_module_names)
    for name, path in MODULES.items():
        if _layer(name) != "primitives":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                roots = [(node.module or "").split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in stdlib or root == "redis", f"{name} imports {root}"
    assert all(_layer(b) == "primitives" for a, b, _n, _top in IMPORTS if _layer(a) == "primitives")


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in list(graph):
        if v not in index:
            visit(v)
    return out


# What bench/ may use of the command line: its presentation (progress bars, output streams and
# tables), the registry of benchmarks, and the web server the serve benchmark times. Never a
# command's module or the command line's reading of a question: domain logic lives below.
BENCH_MAY_USE_CLI = ("concur.cli.progress", "concur.cli.streams", "concur.cli.tabular", "concur.cli.web")
BENCH_REGISTRY = "concur.cli.commands.bench"


def test_library_code_imports_nothing_of_the_command_line() -> None:
    """excel/ and analysis/ (and everything below them) never import cli/; bench/ only its
    presentation pieces. A workbook definition, a diagnosis, the fleet grid are library code the
    CLI calls, so a Python caller or the web page gets them without click."""
    below = sorted({(a, b) for a, b, _n, _top in IMPORTS if _layer(b) == "cli" and LAYER[_layer(a)] < LAYER["cli"]})
    assert below == []
    bench = sorted(
        {
            (a, b)
            for a, b, _n, _top in IMPORTS
            if _layer(a) == "bench"
            and _layer(b) == "cli"
            and a != "concur.bench"  # the package lists the benchmarks the CLI registers
            and not b.startswith(BENCH_MAY_USE_CLI)
            and b != BENCH_REGISTRY
        }
    )
    assert bench == [], "bench/ reaching into the command line's logic:\n" + "\n".join(
        f"  {a} -> {b}" for a, b in bench
    )


TESTS = ROOT.parents[1] / "tests"
LIBRARY_TEST_FOLDERS = {"excel", "analysis", "solver", "sweep", "lang", "maths", "primitives"}
LIBRARY_TESTS = {"test_workbooks.py", "test_fleet.py", "test_fleet_backward.py", "test_erlang.py", "test_plot.py"}
ENTRY_POINTS = {"concur.cli.cli", "concur.cli.main"}  # running a command end to end, as a user would
CLI_INTERNALS_TESTED: dict[str, str] = {}
"""Tests filed under a library package that reach into the command line's own pieces (file name ->
why), each to be moved to tests/cli/; empty, and a new one must say why here."""


def _cli_internals(path: Path) -> list[int]:
    """Lines of ``path`` importing anything of concur.cli but its entry points."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            if node.module == "concur.cli":
                names = [f"concur.cli.{a.name}" for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        if any((n == "concur.cli" or n.startswith("concur.cli.")) and n not in ENTRY_POINTS for n in names):
            lines.append(node.lineno)
    return lines


def test_tests_of_library_code_import_nothing_of_the_command_line() -> None:
    """A test of a library package (its folder under tests/ mirrors the package, or it is one of the
    flat library test modules) calls the library, or runs a command end to end (``cli``, ``main``);
    it never reaches into the command line's parsers, tables or a command's helpers."""
    paths = [p for p in TESTS.rglob("test_*.py") if LIBRARY_TEST_FOLDERS & set(p.relative_to(TESTS).parts[:-1])]
    paths += [TESTS / name for name in sorted(LIBRARY_TESTS) if (TESTS / name).is_file()]
    assert paths, "no library tests found: the folders or names above are stale"
    bad = [
        f"{p.relative_to(TESTS)}:{line}"
        for p in paths
        if p.name not in CLI_INTERNALS_TESTED
        for line in _cli_internals(p)
    ]
    assert bad == []
