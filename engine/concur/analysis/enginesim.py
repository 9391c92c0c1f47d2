"""An engine-level discrete-event simulator: one step at a time, as a serving engine schedules.

How is this designed, and why?
==============================

:mod:`concur.analysis.simulate` checks the fleet formula's averages by simulating the formula's
own assumptions (a fluid batch, prefill as a fixed delay). This module is the independent
check: requests arrive, a scheduler per engine kind admits them under the KV pool and the batch
cap, and every step is timed from its actual contents by :class:`~concur.analysis.step_model.StepModel`
(the pack's constants, not its steady state). Nothing here reads a formula's ``t_step``,
``ttft`` or ``itl``.

**State.** Per replica: a FIFO ``waiting`` queue, a ``running`` list in admission order, the
free KV blocks. Per request: tokens in the KV cache (``ctx``), tokens it must compute before it
decodes (``pre``: the prompt, or after a preemption the prompt plus what it had generated),
tokens generated, blocks held. One heap of events ``(time, seq, kind, replica)`` -- arrivals and
step ends -- where ``seq`` breaks ties, so a run is a pure function of its inputs and seed.
A replica with work runs steps back to back; a step's composition is fixed when it starts
(arrivals during a step wait for the next), its tokens appear when it ends.

**The two schedulers.**

* ``mixed`` (vLLM V1; TensorRT-LLM in-flight batching): a step carries every decoding sequence
  (one token each) and then prefill chunks -- first of running requests still prefilling, then
  of waiting requests admitted in FIFO order -- until the step's token budget
  (``max_num_batched_tokens``) is spent. KV blocks are taken as tokens are computed; when a
  running request cannot get a block the newest running request is preempted (its blocks freed,
  it goes back to the head of the queue and later recomputes its prompt and output so far),
  as vLLM does by default (recompute). With ``reserve`` (TensorRT-LLM's default
  GUARANTEED_NO_EVICT; the engines catalog's ``kv_reserve``) admission takes the blocks of the
  whole context (input + output tokens) up front instead, and nothing is ever preempted.
* ``separate`` (SGLang's default, TGI): a step is either a prefill batch or a decode step. While
  a prompt is unfinished or a waiting request can be admitted, the replica runs prefill batches
  (chunks up to the token budget), and its decoding sequences wait; otherwise a decode step of
  every running sequence. Admission reserves the request's whole context (input + output
  tokens) up front, so this scheduler never preempts (SGLang overcommits with a decaying token
  ratio and retracts; reserving is its conservative end).

Both admit a waiting request only while the batch holds fewer than ``max_num_seqs`` and its
blocks fit; the queue is strictly FIFO (a head that does not fit blocks those behind it).
With several replicas a request goes, on arrival, to the replica with the fewest requests
(running + waiting), ties to the lowest index.

**Load.** Open loop: arrivals from a :mod:`~concur.analysis.arrivals` stream (Poisson, bursty
Gamma, or a trace). Closed loop (``concurrency=C``): C clients each send a request, and the
next one the moment the previous finishes, as benchmark clients with a fixed maximum
concurrency do. The first ``warmup`` requests are not recorded; arrivals go on until every
recorded request has finished, so the last ones are measured under the same load.

**What it reports** (:class:`EngineSimResult`), over the recorded requests: TTFT (arrival to
first token), TPOT per request ((finish - first token)/(output - 1): concur's ``itl``), every
inter-token gap, each as mean and p50/p90/p99; output tokens/s and requests/s from the first
recorded arrival to the last recorded finish (arrivals go on meanwhile, so this is what the
replicas serve under the load); the waiting queue's time average over the first and the second
half of the recorded arrivals' window -- **unstable** when the second half's exceeds the first's by
more than one request and more than 1 % of the recorded requests (the queue absorbing over 2 % of
the arrivals: it grows instead of settling). A closed loop is never unstable: its clients wait.

**Effort** is counted, never timed: events (arrivals + steps) stop at ``max_events`` with a
:class:`~concur.errors.BudgetError` saying so. A 2,000-request run at a few hundred requests in
flight is tens of thousands of events (``concur bench enginesim`` measures events/s).

Worked example: Llama-3.1-8B on one H100 (vLLM constants, budget 8,192 tokens), 1,000 in /
400 out, closed loop at 64 clients: each step carries 64 decodes and, every few steps, a
1,000-token prompt; the simulated mean TPOT is then the decode step plus the prompt chunks'
share, which is what a benchmark's TPOT measures (``tests/analysis/test_enginesim.py`` compares it with
measured points).

**Speculative decoding** (``step.spec``, :mod:`~concur.analysis.speculation`): a decode step
runs ``draft_tokens + 1`` tokens per sequence through the target (budget and KV blocks counted for
all of them) after the draft's steps, and each sequence advances by its own drawn acceptance (one
seeded generator per run). Such steps are never coalesced (each sequence advances differently);
an inter-token gap is then the gap between a sequence's token-bearing steps, as a streaming client
sees its chunks. ``concur.analysis.enginesim_disagg`` runs disaggregated prefill/decode pools.

Non-goals: prefix caching, CPU/GPU overlap of scheduling, preemption by
swapping, priorities other than FIFO, routing other than least-loaded, per-layer pipelining.
"""

from __future__ import annotations

import heapq
import math
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import BudgetError, InfeasibleError, UsageError
from .enginesim_result import SLO_NAMES, EngineSimResult, Percentiles, StepRecord, seconds_text, sla_misses
from .step_model import EngineLimits, StepModel

__all__ = [
    "DEFAULT_MAX_EVENTS",
    "SLO_NAMES",
    "EngineSimResult",
    "EventLoop",
    "Percentiles",
    "StepRecord",
    "seconds_text",
    "simulate_engine",
    "sla_misses",
]

DEFAULT_MAX_EVENTS = 1_000_000
COALESCE_MAX = 4096  # most decode steps one event stands for
_COALESCE_WINDOW = 256  # ... when sliding windows make each step's context a sum over the batch
_ARRIVE, _STEP_END = 0, 1


class Stream(Protocol):
    def next(self) -> tuple[float, int, int] | None: ...


class RequestTable:
    """Per-request state in growable numpy arrays (ids are arrival order)."""

    _INT = ("inp", "out", "ctx", "pre", "gen", "blocks", "kept", "kept_pos", "kept_mark")
    _FLOAT = ("arrival", "first", "last", "finish")

    def __init__(self) -> None:
        import numpy as np

        self.np = np
        self.n = 0
        self.cap = 1024

        def ints() -> Any:
            return np.zeros(self.cap, dtype=np.int64)

        def floats() -> Any:
            return np.full(self.cap, np.nan)

        self.inp: Any = ints()
        self.out: Any = ints()
        self.ctx: Any = ints()  # tokens in the KV cache
        self.pre: Any = ints()  # tokens to compute before decoding (prompt, or prompt + output after preemption)
        self.gen: Any = ints()  # tokens generated
        self.blocks: Any = ints()  # KV blocks held
        self.kept: Any = ints()  # full blocks a preemption left cached (prefix caching), ...
        self.kept_pos: Any = ints()  # ... the free blocks ahead of them in the free queue then, ...
        self.kept_mark: Any = ints()  # ... and the replica's allocation count then
        self.arrival: Any = floats()
        self.first: Any = floats()  # first token
        self.last: Any = floats()  # latest token
        self.finish: Any = floats()
        self.rec: Any = np.zeros(self.cap, dtype=bool)  # recorded (after the warm-up)

    def add(self, t: float, inp: int, out: int, recorded: bool) -> int:
        np = self.np
        if self.n == self.cap:
            self.cap *= 2
            for name in (*self._INT, *self._FLOAT, "rec"):
                old = getattr(self, name)
                new = np.full(self.cap, np.nan) if old.dtype.kind == "f" else np.zeros(self.cap, dtype=old.dtype)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
        i = self.n
        self.n += 1
        self.arrival[i], self.inp[i], self.out[i], self.pre[i] = t, inp, out, inp
        self.rec[i] = recorded
        return i


@dataclass
class _Replica:
    free: int
    allocated: int = 0  # blocks handed out from the free queue so far (evicts cached blocks in LRU order)
    waiting: deque[int] = field(default_factory=deque)
    running: list[int] = field(default_factory=list)
    busy: bool = False
    work: tuple[Any, list[tuple[int, int]], Any, float, float] | None = None  # decode ids, chunks, ends, s, start
    prefilling: list[int] = field(default_factory=list)  # running requests still computing their prompt, in order
    dec: Any = None  # cached: running requests that decode, in running order (None: recompute)
    dec_context: int = 0  # cached: sum over ``dec`` of (ctx + 1), the context a decode step reads


def simulate_engine(
    step: StepModel,
    limits: EngineLimits,
    source: Stream,
    *,
    requests: int,
    warmup: int = 0,
    replicas: int = 1,
    concurrency: int | None = None,
    max_events: int = DEFAULT_MAX_EVENTS,
    observe: Callable[[StepRecord], None] | None = None,
    coalesce: bool = True,
    seed: int = 1,
) -> EngineSimResult:
    """Run until the ``requests`` requests after the first ``warmup`` have finished; see the module
    essay. ``concurrency`` makes it a closed loop (the stream's times are then ignored).
    Raises :class:`UsageError` for bad arguments, :class:`InfeasibleError` for a request the KV
    pool can never hold, :class:`BudgetError` past ``max_events``. ``coalesce=False`` runs every decode
    step as its own event (the same results, more events: for tests). ``seed`` seeds the draws of
    speculative decoding's accepted tokens (``step.spec``; unused without it).

    >>> from concur.analysis.arrivals import Synthetic
    >>> every_step_10_ms = StepModel(0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.01)
    >>> one_seat = EngineLimits(kv_blocks=100, block_size=16, max_num_seqs=1, token_budget=64, mixed=True)
    >>> run = simulate_engine(every_step_10_ms, one_seat, Synthetic(1.0, 8, 11), requests=5, concurrency=1)
    >>> round(run.ttft.p90 * 1e3, 6), round(run.tpot.p90 * 1e3, 6), run.stable
    (10.0, 10.0, True)
    """
    for name, value, low in (
        ("requests", requests, 1),
        ("warmup", warmup, 0),
        ("replicas", replicas, 1),
        ("max_events", max_events, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise UsageError(f"{name} must be a whole number >= {low}, got {value!r}", variable=name)
    if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
        raise UsageError(f"concurrency must be a whole number >= 1, got {concurrency!r}", variable="concurrency")
    sim = _Sim(step, limits, source, requests, warmup, replicas, concurrency, max_events, observe)
    sim.coalesce = coalesce and step.spec is None  # drawn acceptances make every decode step its own
    sim.rng = sim.np.random.default_rng(seed)
    sim.run()
    return sim.result()


def _within_events(concurrency: int | None, max_events: int) -> None:
    """Refuse up front a closed loop of more clients than ``max_events``: each client's first request
    is made before the loop counts events, so ``--concurrency 100000000`` never reached the budget."""
    if concurrency is not None and concurrency > max_events:
        raise UsageError(
            f"{concurrency:,} closed-loop clients cannot finish within max_events ({max_events:,}): "
            "each is at least one event",
            variable="concurrency",
            hint="simulate fewer clients, or raise --max-events",
        )


class EventLoop(ABC):
    """The event loop both engine simulators share: a heap of ``(time, seq, kind, where)`` events,
    arrivals drawn one ahead from ``source`` (or ``closed`` clients re-arriving as they finish), every
    event counted against ``max_events``, the queue length noted after each; and the per-run state
    both keep (the request table, step records, inter-token gaps, speculation's counts).

    A subclass calls ``super().__init__`` and defines ``arrive(t)`` and ``on_event(kind, where)``
    for every kind but :data:`_ARRIVE` (0).
    """

    def __init__(
        self,
        source: Stream,
        requests: int,
        warmup: int,
        concurrency: int | None,
        max_events: int,
        observe: Callable[[StepRecord], None] | None,
    ) -> None:
        import numpy as np

        _within_events(concurrency, max_events)
        self.np = np
        self.source = source
        self.first_rec, self.end_rec = warmup, warmup + requests
        self.closed = concurrency
        self.max_events, self.observe = max_events, observe
        self.req = RequestTable()
        self.heap: list[tuple[float, int, int, int]] = []
        self.seq = self.events = self.steps = 0
        self.pending = requests  # recorded requests not finished
        self.dry = False  # the stream has run out
        self.pending_arrival: tuple[float, int, int] = (0.0, 1, 1)
        self.waiting_total = 0
        self.queue_t: list[float] = [0.0]
        self.queue_n: list[int] = [0]
        self.step_end: list[float] = []
        self.step_tokens: list[int] = []
        self.step_done: list[int] = []
        self.gaps: list[Any] = []  # inter-token gaps of recorded requests (arrays) ...
        self.gap_weights: list[Any] = []  # ... and how many tokens had each
        self.coalesce = True
        self.batch_time = self.decode_time = 0.0
        self.finish_order: list[int] = []
        self.now = 0.0
        self.rng: Any = None
        self.spec_emitted = 0  # tokens decode steps emitted, and ...
        self.spec_slots = 0  # ... sequence-steps that emitted them (speculation's measured acceptance length)

    @abstractmethod
    def arrive(self, t: float) -> None:
        """A request arrives at ``t`` (the pending one, or a closed-loop client's next)."""

    @abstractmethod
    def on_event(self, kind: int, where: int) -> None:
        """An event of ``kind`` (not an arrival) at ``where`` (a replica or worker index) is due now."""

    def push(self, t: float, kind: int, where: int) -> None:
        heapq.heappush(self.heap, (t, self.seq, kind, where))
        self.seq += 1

    def count(self) -> None:
        self.events += 1
        if self.events > self.max_events:
            raise BudgetError(
                f"the simulation stopped after {self.max_events:,} events (max_events) with "
                f"{self.pending:,} recorded requests unfinished",
                hint="simulate fewer requests, or raise --max-events",
            )

    def run(self) -> None:
        if self.closed is not None:
            for _ in range(self.closed):
                self.arrive(0.0)
        else:
            self.schedule_arrival()
        while self.heap and self.pending > 0:
            t, _, kind, where = heapq.heappop(self.heap)
            self.count()
            self.now = t
            if kind == _ARRIVE:
                self.arrive(t)
                self.schedule_arrival()
            else:
                self.on_event(kind, where)
            self.note_queue()
        if self.pending > 0:
            raise InfeasibleError(
                f"{self.pending:,} recorded requests never finished: the trace ran out before they arrived",
                hint="ask for fewer requests than the trace holds",
            )

    def schedule_arrival(self) -> None:
        if self.closed is not None or self.dry:
            return
        nxt = self.source.next()
        if nxt is None:
            self.dry = True
            return
        self.pending_arrival = nxt
        self.push(nxt[0], _ARRIVE, -1)

    def note_queue(self) -> None:
        self.queue_t.append(self.now)
        self.queue_n.append(self.waiting_total)

    def count_unfinished(self, groups: Any) -> None:
        """Count the steps of coalesced groups still running that ended before the run stopped, as
        one-by-one steps would have been; ``groups``: ``(decoding sequences, step ends, start)`` each."""
        for dec, ends, start in groups:
            done = ends[ends < self.now]
            if len(done):
                self.step_end.extend(done.tolist())
                self.step_tokens.extend([len(dec)] * len(done))
                self.step_done.extend([0] * len(done))
                self.steps += len(done)
                self.batch_time += len(dec) * (float(done[-1]) - start)
                self.decode_time += float(done[-1]) - start


class _Sim(EventLoop):
    """The event loop of :func:`simulate_engine` (one instance per run)."""

    def __init__(
        self,
        step: StepModel,
        limits: EngineLimits,
        source: Stream,
        requests: int,
        warmup: int,
        replicas: int,
        concurrency: int | None,
        max_events: int,
        observe: Callable[[StepRecord], None] | None,
    ) -> None:
        super().__init__(source, requests, warmup, concurrency, max_events, observe)
        self.step, self.lim = step, limits
        self.reps = [_Replica(limits.kv_blocks) for _ in range(replicas)]
        self.preemptions = 0
        self.admitted: list[int] = []
        self.ever: set[int] = set()
        self.verify = 1 if step.spec is None else step.spec.verify  # tokens per decoding sequence a step runs

    # -- events -----------------------------------------------------------------------------
    def on_event(self, kind: int, where: int) -> None:
        self.end_step(where)

    def arrive(self, t: float) -> None:
        if self.closed is not None:
            nxt = self.source.next()
            if nxt is None:
                return
            _, inp, out = nxt
        else:
            _, inp, out = self.pending_arrival
        i = self.req.n
        need = -(-(inp + out - 1 + self.verify - 1) // self.lim.block_size)
        if need > self.lim.kv_blocks:
            raise InfeasibleError(
                f"request {i} needs {inp + out - 1:,} tokens of KV cache ({need:,} blocks); one replica's pool "
                f"holds {self.lim.kv_tokens:,} tokens",
                hint="shorter requests, more memory per replica (tp), or an fp8 KV cache",
            )
        self.req.add(t, inp, out, self.first_rec <= i < self.end_rec)
        r = min(range(len(self.reps)), key=lambda k: len(self.reps[k].running) + len(self.reps[k].waiting))
        rep = self.reps[r]
        rep.waiting.append(i)
        self.waiting_total += 1
        if not rep.busy:
            self.start_step(r)

    # -- scheduling ----------------------------------------------------------------------------
    def release(self, rep: _Replica, i: int) -> None:
        rep.free += int(self.req.blocks[i])
        self.req.blocks[i] = 0

    def take(self, rep: _Replica, blocks: int) -> None:
        """Hand ``blocks`` blocks out of the free queue (from its head: the least recently freed)."""
        rep.free -= blocks
        rep.allocated += blocks

    def preempt(self, rep: _Replica) -> int:
        """Preempt the newest running request (recompute later); returns its id. With prefix caching
        its full blocks stay cached at the free queue's tail, prefix last (vLLM frees a request's blocks
        in reverse order so that the tail blocks are evicted first), until allocations reach them."""
        req = self.req
        victim = rep.running.pop()
        if self.lim.prefix_caching:
            req.kept[victim] = int(req.ctx[victim]) // self.lim.block_size
            req.kept_pos[victim] = rep.free
            req.kept_mark[victim] = rep.allocated
        self.release(rep, victim)
        if victim in rep.prefilling:
            rep.prefilling.remove(victim)
        req.ctx[victim] = 0
        req.pre[victim] = req.inp[victim] + req.gen[victim]
        rep.waiting.appendleft(victim)
        rep.dec = None
        self.waiting_total += 1
        self.preemptions += 1
        return victim

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.lim.block_size)

    def decoders(self, rep: _Replica) -> Any:
        """The running requests that decode, in running order (cached until membership changes)."""
        if rep.dec is None:
            np = self.np
            skip = set(rep.prefilling)
            ids = [i for i in rep.running if i not in skip] if skip else rep.running
            rep.dec = np.fromiter(ids, dtype=np.int64, count=len(ids))
            rep.dec_context = int((self.req.ctx[rep.dec] + 1).sum())
        return rep.dec

    def start_step(self, r: int) -> None:
        rep = self.reps[r]
        if self.lim.mixed:
            dec, chunks, new = self.plan_mixed(rep)
        else:
            dec, chunks, new = self.plan_separate(rep)
        if len(dec) == 0 and not chunks:
            rep.busy, rep.work = False, None
            return
        req, step = self.req, self.step
        if len(dec) == 0:
            decode_context = 0.0
        elif step.window_share <= 0 and dec is rep.dec:
            decode_context = float(rep.dec_context)
        else:
            decode_context = float(step.kv_tokens(req.ctx[dec] + 1).sum())
        pairs = pre_ctx = 0.0
        pre_tokens = 0
        for i, c in chunks:
            p = int(req.ctx[i])
            pairs += c * p + c * (c + 1) / 2
            pre_ctx += float(step.kv_tokens(p + c))
            pre_tokens += c
        duration = step.time(len(dec), decode_context, pre_tokens, pairs, pre_ctx, self.verify)
        if step.spec is not None:
            duration += step.spec.draft_time(len(dec), decode_context)
        ends = None
        if self.coalesce and not chunks and len(dec) and not rep.prefilling:
            ends = self.coalesced(rep, dec, duration)
        if ends is not None:
            duration = float(ends[-1]) - self.now
        rep.busy, rep.work = True, (dec, chunks, ends, duration, self.now)
        self.push(self.now + duration if ends is None else float(ends[-1]), _STEP_END, r)
        for i in new:
            if i not in self.ever:
                self.ever.add(i)
                self.admitted.append(i)
        if self.observe is not None:
            self.observe(
                StepRecord(
                    r,
                    self.now,
                    self.now + duration,
                    tuple(int(i) for i in dec),
                    tuple(chunks),
                    tuple(new),
                    self.lim.kv_blocks - rep.free,
                    len(rep.running),
                    1 if ends is None else len(ends),
                )
            )

    def coalesced(self, rep: _Replica, dec: Any, first: float) -> Any:
        """End times of the identical decode steps that follow from now, or None for one step.

        Between events nothing changes a decode-only composition but its contexts (one token longer
        each step), so the steps up to the first finish, the next event that could reach this replica
        (an arrival, another replica's step in a closed loop; none while the queue's head waits for
        room, which only a finish makes) or the blocks running out are timed at once, with the same arithmetic
        (:meth:`StepModel.decode_times`, ends accumulated in order) as one by one."""
        np, req, bs = self.np, self.req, self.lim.block_size
        if self.lim.mixed and dec is not rep.dec:
            return None  # the budget cut the decodes
        ctx, n = req.ctx[dec], len(dec)
        m = min(int((req.out[dec] - req.gen[dec]).min()), COALESCE_MAX)
        if self.step.window_share > 0:
            m = min(m, _COALESCE_WINDOW)
        if m < 2:
            return None
        if self.lim.on_demand:  # blocks for steps 2..m (step 1's are taken): shrink m until they fit
            base = ctx // bs
            while m >= 2 and int(((ctx + m - 1) // bs - base).sum()) > rep.free:
                m //= 2
            if m < 2:
                return None
        j = np.arange(m)
        if self.step.window_share > 0:
            contexts = self.step.kv_tokens(ctx[None, :] + 1 + j[:, None]).sum(axis=1)
        else:
            contexts = float(rep.dec_context) + j * float(n)
        durations = self.step.decode_times(n, contexts)
        durations[0] = first
        ends = np.cumsum(np.concatenate(([self.now], durations)))[1:]
        if rep.waiting:  # the head could not be admitted now, nor before a finish: arrivals queue behind it
            horizon = math.inf
        elif self.closed is None:  # open loop: only an arrival reaches this replica (others' steps do not)
            horizon = math.inf if self.dry else self.pending_arrival[0]
        else:  # closed loop: any replica's step may finish a request and send its client's next one
            horizon = self.heap[0][0] if self.heap else math.inf
        m = min(m, int(np.searchsorted(ends, horizon, side="left")) + 1)
        if m < 2:
            return None
        if self.lim.on_demand:
            extra = (ctx + m - 1) // bs - ctx // bs
            self.take(rep, int(extra.sum()))
            req.blocks[dec] += extra
        return ends[:m]

    def admit(self, rep: _Replica, budget: int, whole: bool) -> tuple[list[tuple[int, int]], list[int]]:
        """FIFO admission while the batch cap, the budget and the blocks allow."""
        req = self.req
        chunks: list[tuple[int, int]] = []
        new: list[int] = []
        while rep.waiting and budget > 0 and len(rep.running) < self.lim.max_num_seqs:
            i = rep.waiting[0]
            hit = self.cached_prefix(rep, i)
            c = min(int(req.pre[i]) - hit * self.lim.block_size, budget)
            if whole:
                need = self.blocks_for(int(req.inp[i] + req.out[i]) - 2 + self.verify)
            else:
                need = self.blocks_for(hit * self.lim.block_size + c)
            if need > rep.free:
                break
            rep.waiting.popleft()
            self.waiting_total -= 1
            rep.free -= hit  # the cached blocks leave the free queue without being recomputed ...
            self.take(rep, need - hit)  # ... the rest are handed out
            req.blocks[i] = need
            req.ctx[i] = hit * self.lim.block_size
            req.kept[i] = 0  # admitted: its cached prefix is in use (a head that waits keeps it)
            rep.running.append(i)
            rep.prefilling.append(i)
            chunks.append((i, c))
            new.append(i)
            budget -= c
        return chunks, new

    def cached_prefix(self, rep: _Replica, i: int) -> int:
        """Full blocks of a preempted request's prefix still cached now (0 without prefix caching): its
        block j of ``kept`` sat ``kept_pos + kept - 1 - j`` blocks from the free queue's head, so it
        survives until that many blocks have been handed out since. At least one prompt token is
        always computed again (the engine must produce the next token)."""
        kept = int(self.req.kept[i])
        if kept <= 0:
            return 0
        since = rep.allocated - int(self.req.kept_mark[i])
        alive = max(0, min(kept, int(self.req.kept_pos[i]) + kept - since))
        return min(alive, (int(self.req.pre[i]) - 1) // self.lim.block_size)

    def plan_mixed(self, rep: _Replica) -> tuple[Any, list[tuple[int, int]], list[int]]:
        """Every decode (within the budget), then prefill chunks of the running, then admissions."""
        req, bs = self.req, self.lim.block_size
        budget = self.lim.token_budget
        v = self.verify
        while True:
            dec = self.decoders(rep)
            if len(dec) * v > budget:
                dec = dec[: budget // v]
            if v == 1 and not self.lim.reserve:
                grow = (req.ctx[dec] % bs) == 0
            else:  # room for the verified tokens' KV (the rejected ones' slots are reused next step; none
                # is ever missing when admission reserved the whole context)
                grow = self.np.maximum(0, -(-(req.ctx[dec] + v) // bs) - req.blocks[dec])
            need = int(grow.sum())
            if need <= rep.free:
                break
            self.preempt(rep)  # the newest running request, decoding or not; then look again
        if need:
            self.take(rep, need)
            if v == 1 and not self.lim.reserve:
                req.blocks[dec[grow]] += 1
            else:
                req.blocks[dec] += grow
        budget -= len(dec) * v
        before = self.preemptions
        chunks: list[tuple[int, int]] = []
        for i in list(rep.prefilling):
            if budget <= 0:
                break
            if i not in rep.prefilling:
                continue  # preempted for an older request's chunk
            c = min(int(req.pre[i] - req.ctx[i]), budget)
            extra = max(0, self.blocks_for(int(req.ctx[i]) + c) - int(req.blocks[i]))
            while extra > rep.free and rep.running[-1] != i:
                self.preempt(rep)
            if extra > rep.free:
                c = (rep.free + int(req.blocks[i])) * bs - int(req.ctx[i])
                extra = rep.free
                if c <= 0:
                    continue
            self.take(rep, extra)
            req.blocks[i] += extra
            chunks.append((i, c))
            budget -= c
        if self.preemptions != before:  # a prompt chunk preempted newer requests, decoders among them
            alive = set(rep.running)
            gone = [int(i) for i in dec if int(i) not in alive]
            if gone:
                dec = self.np.array([i for i in dec if int(i) in alive], dtype=self.np.int64)
        more, new = self.admit(rep, budget, whole=self.lim.reserve)
        return dec, chunks + more, new

    def plan_separate(self, rep: _Replica) -> tuple[Any, list[tuple[int, int]], list[int]]:
        """A prefill batch while a prompt is unfinished or a request can be admitted; else a decode step."""
        req = self.req
        budget = self.lim.token_budget
        chunks: list[tuple[int, int]] = []
        for i in rep.prefilling:
            if budget <= 0:
                break
            c = min(int(req.pre[i] - req.ctx[i]), budget)
            chunks.append((i, c))
            budget -= c
        more, new = self.admit(rep, budget, whole=True)
        chunks += more
        if chunks:
            return self.np.zeros(0, dtype=self.np.int64), chunks, new
        return self.decoders(rep), [], []

    # -- step end ---------------------------------------------------------------------------------
    def end_step(self, r: int) -> None:
        rep = self.reps[r]
        assert rep.work is not None
        dec, chunks, ends, duration, _ = rep.work
        m = 1 if ends is None else len(ends)
        self.steps += m  # completed steps: one still running when the run ends is not counted
        done: list[int] = []
        tokens = self.end_decodes(rep, dec, ends, duration, done) if len(dec) else 0
        if ends is not None:
            self.step_end.extend(ends[:-1].tolist())
            self.step_tokens.extend([len(dec)] * (m - 1))
            self.step_done.extend([0] * (m - 1))
        tokens += self.end_chunks(rep, chunks, done)
        if done:
            self.finish(rep, done)
        self.step_end.append(self.now)
        self.step_tokens.append(tokens)
        self.step_done.append(len(done))
        rep.work = None  # still busy: a closed loop's new arrivals must not start this replica twice
        if self.closed is not None and self.pending > 0:
            for _ in done:
                self.arrive(self.now)
        self.start_step(r)

    def end_decodes(self, rep: _Replica, dec: Any, ends: Any, duration: float, done: list[int]) -> int:
        """Advance the decoding sequences by the step's tokens (``m`` coalesced steps of one, or one
        speculative step's draws), record their gaps, collect the finished into ``done``; the tokens."""
        req, np, now = self.req, self.np, self.now
        m = 1 if ends is None else len(ends)
        self.batch_time += len(dec) * duration
        self.decode_time += duration
        if self.step.spec is None:
            adv: Any = m
            emitted = m * len(dec)
        else:
            adv = np.minimum(self.step.spec.draw(self.rng, len(dec)), req.out[dec] - req.gen[dec])
            emitted = int(adv.sum())
            self.spec_emitted += emitted
            self.spec_slots += len(dec)
        req.ctx[dec] += adv
        req.gen[dec] += adv
        if dec is rep.dec:
            rep.dec_context += emitted
        rec = req.rec[dec]
        if rec.any():
            first_end = now if ends is None else float(ends[0])
            gaps = first_end - req.last[dec[rec]]
            self.gaps.append(gaps)
            self.gap_weights.append(np.ones(len(gaps)))
            if ends is not None:
                self.gaps.append(np.diff(ends))
                self.gap_weights.append(np.full(m - 1, float(rec.sum())))
        req.last[dec] = now
        over = req.gen[dec] >= req.out[dec]
        if over.any():
            done.extend(int(i) for i in dec[over])
        return emitted if self.step.spec is not None else len(dec)

    def end_chunks(self, rep: _Replica, chunks: list[tuple[int, int]], done: list[int]) -> int:
        """Advance the prompt chunks; a finished prompt emits its first token. Returns the tokens emitted."""
        req, np, now = self.req, self.np, self.now
        tokens = 0
        for i, c in chunks:
            req.ctx[i] += c
            if req.ctx[i] >= req.pre[i]:
                rep.prefilling.remove(i)
                rep.dec = None
                req.gen[i] += 1
                tokens += 1
                if math.isnan(req.first[i]):
                    req.first[i] = now
                elif req.rec[i]:
                    self.gaps.append(np.array([now - req.last[i]]))
                    self.gap_weights.append(np.ones(1))
                req.last[i] = now
                if req.gen[i] >= req.out[i]:
                    done.append(i)
        return tokens

    def finish(self, rep: _Replica, done: list[int]) -> None:
        """Retire the finished requests: out of the batch, their blocks freed, recorded ones counted."""
        req = self.req
        gone = set(done)
        rep.running = [i for i in rep.running if i not in gone]
        rep.dec = None
        for i in done:
            req.finish[i] = self.now
            self.release(rep, i)
            self.finish_order.append(i)
            if req.rec[i]:
                self.pending -= 1

    # -- statistics -------------------------------------------------------------------------------
    def unfinished_steps(self) -> None:
        """Count the coalesced steps of every replica that ended before the run stopped."""
        groups = (rep.work for rep in self.reps if rep.work is not None and rep.work[2] is not None)
        self.count_unfinished((dec, ends, start) for dec, _, ends, _, start in groups)

    def result(self) -> EngineSimResult:
        self.unfinished_steps()
        np, req = self.np, self.req
        n = req.n
        rec = np.flatnonzero(req.rec[:n])
        arrival, first, finish = req.arrival[rec], req.first[rec], req.finish[rec]
        out = req.out[rec]
        multi = out > 1
        tpot = (finish[multi] - first[multi]) / (out[multi] - 1)
        gaps = np.concatenate(self.gaps) if self.gaps else np.zeros(0)
        weights = np.concatenate(self.gap_weights) if self.gaps else np.zeros(0)
        t0, t1, t_end = float(arrival.min()), float(arrival.max()), float(finish.max())
        ends = np.asarray(self.step_end)
        inside = (ends > t0) & (ends <= t_end)
        span = max(t_end - t0, 1e-12)
        q1, q2 = queue_halves(np.asarray(self.queue_t), np.asarray(self.queue_n, dtype=float), t0, t1)
        served = float(np.asarray(self.step_done)[inside].sum()) / span
        grows = self.closed is None and q2 - q1 > max(1.0, 0.01 * len(rec))
        return EngineSimResult(
            engine="mixed" if self.lim.mixed else "separate",
            replicas=len(self.reps),
            recorded=len(rec),
            ttft=Percentiles.of(first - arrival),
            tpot=Percentiles.of(tpot),
            itl_gap=Percentiles.of(gaps, weights),
            output_tokens_per_s=float(np.asarray(self.step_tokens)[inside].sum()) / span,
            requests_per_s=served,
            queue_first_half=q1,
            queue_second_half=q2,
            queue_max=int(max(self.queue_n)),
            stable=not grows,
            mean_decode_batch=self.batch_time / self.decode_time if self.decode_time else 0.0,
            steps=self.steps,
            events=self.events,
            preemptions=self.preemptions,
            simulated_time=self.now,
            finish_order=tuple(self.finish_order),
            first_admission=tuple(self.admitted),
            spec_tokens_per_step=self.spec_emitted / self.spec_slots if self.spec_slots else math.nan,
        )


def queue_halves(t: Any, q: Any, t0: float, t1: float) -> tuple[float, float]:
    """Time averages of the step function ``q`` (value ``q[k]`` from ``t[k]`` to ``t[k+1]``) over the
    two halves of ``[t0, t1]``; both the value at ``t0`` when the window is empty."""
    import numpy as np

    if t1 <= t0:
        k = max(int(np.searchsorted(t, t0, side="right")) - 1, 0)
        return float(q[k]), float(q[k])
    mid = (t0 + t1) / 2
    out = []
    for a, b in ((t0, mid), (mid, t1)):
        edges = np.clip(np.append(t, np.inf), a, b)
        out.append(float(np.sum(q * np.diff(edges))) / (b - a))
    return out[0], out[1]
