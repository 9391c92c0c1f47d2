"""What this process compiled, in one place: one :class:`Compiled` per model, one bound, one forget.

How it is designed, and why
---------------------------
Answering a question compiles things that depend on the model and the *shape* of the question,
never on its values: the ``if_`` conditions and their tests, the structural problems, their matchings and plans
(:mod:`concur.solver.plan`), the goal-seek decisions (:mod:`concur.solver.seek`), the sweep's
vector programs (:mod:`concur.sweep.vector`), whether the packs pass their unit check
(:mod:`concur.lang.check`); and, per values, the torn loops already solved (the in-process half
of :mod:`concur.solver.loopmemo`). All of it lives in the :class:`Compiled` of the model's key
(:attr:`concur.lang.model.Model.key`: the content of the packs and catalogs in play), so two
models never share an entry and one model's entries are found and dropped together.

Invariants:

* **One bound.** At most :data:`MODEL_LIMIT` models are kept, the least recently used dropped
  first; inside one, each table holds at most :data:`TABLE_LIMIT` entries (the loop memo
  :data:`LOOP_LIMIT`, the structural states :data:`STATE_LIMIT`), again least recently used
  first. Nothing here grows without bound.
* **One forget.** :func:`forget` drops every model and every process table: the next question
  compiles afresh (tests that count compilation, the closed-form table tool).
* **Values never key a compiled program** (a plan holds no values of its question); only the
  loop memo keys on values, and it keeps outcomes, never programs.
* **Process tables** (:func:`table`) hold what comes before a model exists or spans models: the
  packs loaded per file content, the models composed per list of packs, the YAML texts refused
  or replayed, closures compiled per expression node (kept with their node, so an ``id`` is never
  reused while its entry lives). They share the same bound and the same :func:`forget`.

Entries are immutable or owned by the table; a race that computes one twice is harmless, so no
lock guards them (as before, when every table was a plain dict): a lookup racing an eviction in
another thread is a hit or a miss, never an error.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from contextlib import suppress
from typing import Any, Generic, TypeVar, cast

__all__ = ["LOOP_LIMIT", "MODEL_LIMIT", "TABLE_LIMIT", "Compiled", "Table", "closure", "compiled", "forget", "table"]

MODEL_LIMIT = 64  # models kept (a fleet plan compiles one per engine; a session asks a few)
TABLE_LIMIT = 2048  # entries per table of one model (plans, problems, seeks, vector programs)
LOOP_LIMIT = 4096  # loop outcomes per model (a goal seek's trials)
STATE_LIMIT = 16384  # structural states per model: one per default a problem gives (~30), most shared
CLOSURE_LIMIT = 65536  # compiled expression closures, process-wide

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T")
N = TypeVar("N")


class Table(Generic[K, V]):
    """A mapping of at most ``limit`` entries; the least recently used goes first when full."""

    __slots__ = ("_items", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The entry under ``key`` (now the most recently used), or ``default``."""
        items = self._items
        hit = items.get(key, default)
        if hit is not default:
            with suppress(KeyError):  # another thread dropped it meanwhile: still a hit
                items.move_to_end(key)
        return hit

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def put(self, key: K, value: V) -> V:
        """Keep ``value`` under ``key``, dropping the least recently used entry when full."""
        items = self._items
        items[key] = value
        with suppress(KeyError):  # another thread's put may have moved or dropped entries meanwhile
            items.move_to_end(key)
            while len(items) > self.limit:
                items.popitem(last=False)
        return value

    def get_or(self, key: K, build: Callable[[], V]) -> V:
        """The entry under ``key``, built by ``build()`` and kept on a miss."""
        hit = self.get(key)
        return hit if hit is not None else self.put(key, build())

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


class Compiled:
    """Everything compiled for one model (``key``: its content key). ``plans``, ``problems``,
    ``seeks``, ``vectors``: keyed by the question's shape (:func:`concur.solver.plan.plan_key` and
    what each adds); ``matchings``: the structural states problems pass through while their defaults apply, each
    with its matching (:class:`concur.solver.problem._State`); ``loops``: torn-loop outcomes by (plan, loop, input values); ``checked``: the
    unit check's errors (None until checked); :meth:`once`: facts of the model itself (its
    conditions, its plain equations), built on first use."""

    __slots__ = ("_once", "checked", "key", "loops", "matchings", "plans", "problems", "seeks", "vectors")

    def __init__(self, key: str) -> None:
        self.key = key
        self.plans: Table[Any, Any] = Table(TABLE_LIMIT)
        self.problems: Table[Any, Any] = Table(TABLE_LIMIT)
        self.matchings: Table[Any, Any] = Table(STATE_LIMIT)
        self.seeks: Table[Any, Any] = Table(TABLE_LIMIT)
        self.vectors: Table[Any, Any] = Table(TABLE_LIMIT)
        self.loops: Table[Any, Any] = Table(LOOP_LIMIT)
        self.checked: list[Any] | None = None
        self._once: dict[str, Any] = {}

    def once(self, what: str, build: Callable[[], T]) -> T:
        """The model's fact ``what``, built by ``build()`` the first time it is asked for."""
        if what not in self._once:
            self._once[what] = build()
        return cast(T, self._once[what])


_MODELS: Table[str, Compiled] = Table(MODEL_LIMIT)
_TABLES: dict[str, Table[Any, Any]] = {}
# build -> id(node) -> (node, what build made of it): the hottest lookup, so plain dicts
_CLOSURES: dict[Callable[[Any], Any], dict[int, tuple[object, Any]]] = {}


def compiled(key: str) -> Compiled:
    """The :class:`Compiled` of the model whose content key is ``key`` (made on first use)."""
    hit = _MODELS.get(key)
    return hit if hit is not None else _MODELS.put(key, Compiled(key))


def table(name: str, limit: int = TABLE_LIMIT) -> Table[Any, Any]:
    """The process table ``name`` (made on first use with ``limit`` entries at most)."""
    hit = _TABLES.get(name)
    if hit is None:
        hit = _TABLES[name] = Table(limit)
    return hit


def closure(node: N, build: Callable[[N], T]) -> T:
    """What ``build(node)`` compiles for the object ``node`` (an expression node), once per node
    object and ``build`` (one table per kind of compilation): keyed by identity, the entry keeps the node alive so its ``id`` is not reused meanwhile.
    At :data:`CLOSURE_LIMIT` entries the table starts afresh (a miss only recompiles)."""
    made = _CLOSURES.get(build)
    if made is None:
        made = _CLOSURES[build] = {}
    hit = made.get(id(node))
    if hit is None or hit[0] is not node:
        if len(made) >= CLOSURE_LIMIT:
            made.clear()
        hit = made[id(node)] = (node, build(node))
    return hit[1]  # hit is typed Any: no cast() call on the hottest path of a search


def forget() -> None:
    """Drop everything compiled in this process: every model's tables and every process table."""
    _MODELS.clear()
    _CLOSURES.clear()
    for t in _TABLES.values():
        t.clear()
