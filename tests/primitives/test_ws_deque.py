"""WorkStealingDeque (LIFO owner, FIFO thieves, growth, conservation, the last-item race) and
WorkStealingPool (exactly-once, joins at any depth, errors)."""

from __future__ import annotations

import collections
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concur.primitives import Steal, WorkStealingDeque, WorkStealingPool, ws_deque

ENGINE = Path(__file__).resolve().parents[2] / "engine"


# -- deque, single thread ------------------------------------------------------
VARIANTS = pytest.mark.parametrize("locked", [False, True], ids=["atomic-deque", "locked"])


@VARIANTS
def test_owner_pops_lifo_thief_steals_fifo(locked) -> None:
    d = WorkStealingDeque(locked=locked)
    assert d.locked is locked
    for i in range(1, 6):
        d.push(i)
    assert [d.pop() for _ in range(3)] == [5, 4, 3]
    assert d.steal() == (Steal.SUCCESS, 1)
    assert d.steal() == (Steal.SUCCESS, 2)
    assert d.steal() == (Steal.EMPTY, None)
    assert d.pop() is None
    assert d.is_empty() and len(d) == 0


def test_the_default_variant_follows_the_interpreter() -> None:
    assert WorkStealingDeque().locked is (not ws_deque._GIL)


@VARIANTS
def test_many_items_keep_their_order(locked) -> None:
    d = WorkStealingDeque(locked=locked)
    for i in range(1000):
        d.push(i)
    stolen = [d.steal()[1] for _ in range(300)]
    popped = [d.pop() for _ in range(700)]
    assert stolen == list(range(300))
    assert popped == list(range(999, 299, -1))
    assert d.pop() is None and d.steal() == (Steal.EMPTY, None)


@VARIANTS
def test_none_rejected_and_non_owner_refused(locked) -> None:
    d = WorkStealingDeque(locked=locked)
    with pytest.raises(ValueError, match="None"):
        d.push(None)
    d.push(1)
    errors: list[BaseException] = []

    def intruder() -> None:
        for op in (lambda: d.push(2), d.pop):
            try:
                op()
            except RuntimeError as exc:
                errors.append(exc)

    t = threading.Thread(target=intruder)
    t.start()
    t.join()
    assert len(errors) == 2 and "does not own" in str(errors[0])
    assert d.pop() == 1


def test_locked_steal_reports_retry_while_the_lock_is_held() -> None:
    d = WorkStealingDeque(locked=True)
    d.push("x")
    with d._lock:  # the owner or another thief is mid-operation
        assert d.steal() == (Steal.RETRY, None)
    assert d.steal() == (Steal.SUCCESS, "x")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(["push", "pop", "steal"]), max_size=300), st.booleans())
def test_matches_sequential_model(ops, locked) -> None:
    d: WorkStealingDeque[int] = WorkStealingDeque(locked=locked)
    model: collections.deque[int] = collections.deque()
    for i, op in enumerate(ops):
        if op == "push":
            d.push(i)
            model.append(i)
        elif op == "pop":
            assert d.pop() == (model.pop() if model else None)
        else:
            expected = (Steal.SUCCESS, model.popleft()) if model else (Steal.EMPTY, None)
            assert d.steal() == expected
        assert len(d) == len(model)


# -- deque, concurrent -----------------------------------------------------------
@VARIANTS
def test_every_item_taken_exactly_once_owner_and_four_thieves(fast_switching, locked) -> None:
    """D3: multiset conservation with 1 owner (pushing and popping) and 4 thieves."""
    d: WorkStealingDeque[int] = WorkStealingDeque(locked=locked)
    n = 20_000
    owner_got: list[int] = []
    thief_got: list[list[int]] = [[] for _ in range(4)]
    done = threading.Event()
    first_steal = threading.Event()
    retries = [0]

    def thief(out: list[int]) -> None:
        while True:
            outcome, item = d.steal()
            if outcome is Steal.SUCCESS:
                out.append(item)
                first_steal.set()
            elif outcome is Steal.RETRY:
                retries[0] += 1
            elif done.is_set():
                return

    thieves = [threading.Thread(target=thief, args=(out,)) for out in thief_got]
    for t in thieves:
        t.start()
    for i in range(n):
        d.push(i)
        if i == 1000:  # make sure the thieves are really stealing before the owner races on
            assert first_steal.wait(timeout=30)
        if i % 3 == 0:
            item = d.pop()
            if item is not None:
                owner_got.append(item)
    while (item := d.pop()) is not None:
        owner_got.append(item)
    done.set()
    for t in thieves:
        t.join()
    everything = owner_got + [x for out in thief_got for x in out]
    assert len(everything) == n
    assert sorted(everything) == list(range(n))
    assert sum(map(len, thief_got)) > 0  # the thieves really took part


@VARIANTS
def test_last_item_race_has_exactly_one_winner(fast_switching, locked) -> None:
    """D4: owner pop vs thief steal of a single item, many rounds."""
    d: WorkStealingDeque[int] = WorkStealingDeque(locked=locked)
    rounds = 400
    start = threading.Barrier(2)
    end = threading.Barrier(2)
    thief_won: list[bool] = []
    owner_won: list[bool] = []

    def thief() -> None:
        for _ in range(rounds):
            start.wait()
            while True:
                outcome, _ = d.steal()
                if outcome is not Steal.RETRY:
                    break
            thief_won.append(outcome is Steal.SUCCESS)
            end.wait()

    t = threading.Thread(target=thief)
    t.start()
    for r in range(rounds):
        d.push(r)
        start.wait()
        owner_won.append(d.pop() is not None)
        end.wait()
        assert d.is_empty()
    t.join()
    assert all(a != b for a, b in zip(owner_won, thief_won))
    assert len(thief_won) == rounds


# -- pool -----------------------------------------------------------------------
def fib(spawn, n):
    if n < 2:
        return n
    a = spawn(fib, n - 1)
    return fib(spawn, n - 2) + a.result()


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_fib_at_depth_without_deadlock(workers, fast_switching) -> None:
    pool = WorkStealingPool(workers, seed=1)
    before = threading.active_count()
    assert pool.run(fib, 16) == 987
    assert threading.active_count() == before  # every worker thread joined
    assert sum(pool.stats.tasks) == 1597  # the root plus one spawn per call with n >= 2: fib(17) - 1
    assert len(pool.stats.steals) == workers


def tree_task(spawn, seen, node, branching, depth):
    seen.append(node)
    kids = (
        [spawn(tree_task, seen, node * branching + k + 1, branching, depth - 1) for k in range(branching)]
        if depth
        else []
    )
    return 1 + sum(k.result() for k in kids)


@settings(max_examples=15, deadline=None)
@given(workers=st.integers(1, 4), branching=st.integers(1, 4), depth=st.integers(0, 5))
def test_every_task_runs_exactly_once(workers, branching, depth) -> None:
    seen: list[int] = []
    nodes = sum(branching**d for d in range(depth + 1))
    assert WorkStealingPool(workers, seed=0).run(tree_task, seen, 0, branching, depth) == nodes
    assert len(seen) == nodes and len(set(seen)) == nodes


def failing(spawn, n):
    if n == 0:
        raise KeyError("leaf 0 failed")
    h = spawn(failing, n - 1)
    return h.result()


def test_exception_propagates_through_result_to_run() -> None:
    with pytest.raises(KeyError, match="leaf 0 failed"):
        WorkStealingPool(3).run(failing, 5)


def test_unretrieved_child_exception_is_raised_by_run() -> None:
    def parent(spawn):
        spawn(failing, 0)  # never joined
        return "parent done"

    pool = WorkStealingPool(2)
    with pytest.raises(KeyError):
        pool.run(parent)
    assert pool.run(fib, 10) == 55  # the pool is reusable after a failed run


def test_caught_child_exception_does_not_fail_the_run() -> None:
    def parent(spawn):
        try:
            spawn(failing, 0).result()
        except KeyError:
            return "handled"

    assert WorkStealingPool(2).run(parent) == "handled"


def test_misuse_is_refused() -> None:
    with pytest.raises(ValueError, match="workers"):
        WorkStealingPool(0)
    pool = WorkStealingPool(2)
    with pytest.raises(RuntimeError, match="spawn"):
        pool._spawn(fib, 3)


def test_import_stays_light() -> None:
    code = (
        "import sys, concur.primitives as p; p.ShardedCounter; p.WorkStealingPool; "
        "heavy = {'numpy', 'sympy', 'click', 'pint', 'openpyxl', 'matplotlib', 'concur.errors'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={"PYTHONPATH": str(ENGINE)})


# -- nested joins past one thread's inline depth ----------------------------------
def chain(spawn, n):
    """A join chain n deep: each task spawns the next and waits for it."""
    return 0 if n == 0 else spawn(chain, n - 1).result() + 1


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_join_chain_thousands_deep_needs_no_recursion(workers) -> None:
    """Regression: each nested result() ran the next task on the same Python stack, so a
    chain ~170 deep raised RecursionError. Past INLINE_DEPTH levels a thread now parks
    and the chain goes on in another thread."""
    depth = 3000
    assert depth > sys.getrecursionlimit()  # a frame a level at least: no single stack holds it
    pool = WorkStealingPool(workers, seed=3)
    before = threading.active_count()
    assert pool.run(chain, depth) == depth
    assert threading.active_count() == before  # relief threads joined too
    assert sum(pool.stats.tasks) == depth + 1
    # Every task of a chain stays on its thread's stack until the bottom returns, so no
    # thread ran more than INLINE_DEPTH of them and relief threads carried the rest.
    assert max(pool.stats.tasks) <= ws_deque.INLINE_DEPTH
    assert len(pool.stats.tasks) > workers


def test_failure_at_the_bottom_of_a_deep_chain_reaches_run() -> None:
    pool = WorkStealingPool(2)
    with pytest.raises(KeyError, match="leaf 0 failed"):
        pool.run(failing, 2000)
    assert pool.run(chain, 1200) == 1200  # reusable afterwards


@pytest.fixture
def shallow_inline(monkeypatch):
    """Park after one or two nested levels, so every test tree exercises the hand-over."""
    monkeypatch.setattr(ws_deque, "INLINE_DEPTH", 2)


@settings(max_examples=15, deadline=None)
@given(workers=st.integers(1, 4), branching=st.integers(1, 4), depth=st.integers(0, 5))
def test_every_task_runs_exactly_once_when_joins_park(workers, branching, depth) -> None:
    old = ws_deque.INLINE_DEPTH
    ws_deque.INLINE_DEPTH = 2
    try:
        seen: list[int] = []
        nodes = sum(branching**d for d in range(depth + 1))
        assert WorkStealingPool(workers, seed=0).run(tree_task, seen, 0, branching, depth) == nodes
        assert len(seen) == nodes and len(set(seen)) == nodes
    finally:
        ws_deque.INLINE_DEPTH = old


@pytest.mark.parametrize("workers", [1, 3])
def test_fib_with_parking_under_fast_switching(workers, shallow_inline, fast_switching) -> None:
    pool = WorkStealingPool(workers, seed=5)
    before = threading.active_count()
    assert pool.run(fib, 14) == 377
    assert sum(pool.stats.tasks) == 610  # the root plus one spawn per call with n >= 2: fib(15)
    assert threading.active_count() == before


def test_spawn_is_refused_off_its_thread_and_after_the_run() -> None:
    kept: list[object] = []
    errors: list[BaseException] = []

    def root(spawn):
        kept.append(spawn)

        def intruder() -> None:
            try:
                spawn(fib, 2)
            except RuntimeError as exc:
                errors.append(exc)

        t = threading.Thread(target=intruder)
        t.start()
        t.join()
        return spawn(fib, 5).result()

    assert WorkStealingPool(2).run(root) == 5
    assert len(errors) == 1 and "on that task's thread" in str(errors[0])
    with pytest.raises(RuntimeError, match="spawn"):
        kept[0](fib, 2)  # the run is over


def test_result_from_a_thread_outside_the_pool() -> None:
    go = threading.Event()
    handles: list[object] = []
    got: list[int] = []

    def slow(spawn):
        go.wait()
        return 7

    def root(spawn):
        h = spawn(slow)
        handles.append(h)
        outsider = threading.Thread(target=lambda: got.append(h.result()))
        outsider.start()
        go.set()
        value = h.result()
        outsider.join()
        return value

    assert WorkStealingPool(2).run(root) == 7
    assert got == [7] and handles[0].result() == 7
