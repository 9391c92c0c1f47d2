"""The engine simulator for a disaggregated fleet: a prefill pool, a decode pool, KV transfers between.

How is this designed, and why?
==============================

Disaggregated serving (DistServe, Splitwise; SGLang PD, Dynamo, llm-d, vLLM's KV connectors)
runs prompts on *prefill workers* and generation on *decode workers*, and moves each request's
KV cache from one to the other. The same step physics as :mod:`concur.analysis.enginesim`
(:class:`~concur.analysis.step_model.StepModel`, each pool with its own GPU, TP and engine
limits) is scheduled as follows.

**Prefill pool** (``P`` workers). An arrival goes to the prefill worker with the fewest requests
waiting or prefilling (ties: lowest index). A worker runs prefill-only steps back to back: the
chunks of prompts it has started, then FIFO admissions while the step's token budget, its batch
cap and its KV pool allow; admission reserves the prompt's blocks, which stay held until the
prompt's KV has left for a decode worker (a decode pool that cannot take requests thus backs up
into the prefill pool, as it does in the engines).

**Hand-off.** A finished prompt goes to the decode worker with the fewest requests (waiting,
arriving or running) and waits in its FIFO until the worker can reserve the request's whole
context (prompt + output, and the draft's look-ahead) under its batch cap -- the decode side
allocates, then pulls (vLLM's NIXL connector, SGLang's Mooncake transfer). The transfer then
moves ``kv_bytes_per_token x prompt tokens`` (sliding-window layers only their window) over the
**link**. Model choice: *transfers from one prefill worker serialize, FIFO, on that worker's
links*, one at a time at the full rate; a transfer uses ``min(prefill tp, decode tp)`` GPU links
in parallel (each GPU sends its shard over its own NIC), so it takes ``latency + bytes /
(lanes x bandwidth)``. The receiving side is not a bottleneck (each decode worker has as many
links as GPUs). When the KV has arrived the prefill worker frees its blocks and the request joins
the decode worker's batch at its next step.

**Decode pool** (``D`` workers): decode-only steps of every running sequence (one token each, or
with speculative decoding ``step.spec`` the drawn acceptances, as in the aggregated simulator).
The first token is the decode worker's first step, so **TTFT = prefill queue + prefill + hand-off
wait + transfer + first decode step** (vLLM's disaggregated proxy streams the first token from
the decode instance), the quantity llm_disagg's ``ttft`` counts too (its ``decode_first_step``:
half a step's wait for the step boundary, then the step); TPOT and inter-token gaps as in the
aggregated simulator. Reserving the whole context at admission means a decode worker never
preempts.

**Load, statistics, effort** as in :func:`~concur.analysis.enginesim.simulate_engine`: open or
closed loop, ``warmup`` requests not recorded, the waiting queue (requests waiting for a prefill
worker or for a decode worker's admission) averaged over the two halves of the recorded
arrivals' window and **unstable** when it grows by more than one request and 1 % of the recorded
ones; events (arrivals, prefill steps, transfers, decode steps) are counted and stop at
``max_events`` with a :class:`~concur.errors.BudgetError`. No wall clock.

Worked example: Llama-3.1-70B bf16, 1P (tp 4) + 1D (tp 4) H100, 1,000-token prompts: the KV is
1,000 x 320 KiB = 328 MB; over 4 lanes of a 50 GB/s link with 10 us latency the transfer is about
1.6 ms, small beside the 70-ms-class prefill.

Identical decode steps are **coalesced** into one event, as in the aggregated simulator (a group
stops before anything could join it: see :meth:`_Disagg.coalesced`); speculative steps never are.

Non-goals: preemption on the decode side, routing
other than least-loaded, transfers that overlap with the prefill (layer-by-layer streaming).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import ConcurError, InfeasibleError, UsageError
from ..lang.library import get_catalog
from ..lang.units import parse_quantity, unit_info
from .enginesim import COALESCE_MAX, DEFAULT_MAX_EVENTS, EventLoop, Stream, queue_halves
from .enginesim_result import DisaggStats, EngineSimResult, Percentiles, StepRecord
from .step_model import EngineLimits, StepModel, solve_engine

__all__ = [
    "DEFAULT_LINK",
    "KVLink",
    "Pool",
    "catalog_link",
    "kv_bytes_per_token",
    "question_link",
    "simulate_disagg",
    "solve_pools",
]

_ARRIVE, _PREFILL_END, _XFER_END, _DECODE_END = 0, 1, 2, 3


@dataclass(frozen=True)
class KVLink:
    """The link KV caches cross: ``bandwidth`` bytes/s per GPU (one direction), ``latency`` s per transfer."""

    bandwidth: float
    latency: float

    def __post_init__(self) -> None:
        for name, value, low in (("link_bandwidth", self.bandwidth, False), ("link_latency", self.latency, True)):
            ok = isinstance(value, (int, float)) and math.isfinite(value) and (value >= 0 if low else value > 0)
            if not ok:
                raise UsageError(
                    f"{name} must be a finite number {'>= 0' if low else '> 0'}, got {value!r}", variable=name
                )


@dataclass(frozen=True)
class Pool:
    """``workers`` identical workers of ``tp`` GPUs, each timed by ``step`` and held to ``limits``."""

    step: StepModel
    limits: EngineLimits
    workers: int
    tp: int = 1

    def __post_init__(self) -> None:
        for name, value in (("workers", self.workers), ("tp", self.tp)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"a pool's {name} must be a whole number >= 1, got {value!r}", variable=name)


def kv_bytes_per_token(values: Mapping[str, float], byte: float) -> float:
    """Bytes of KV one prompt token hands over, the whole model's (every layer, every KV head once):
    one GPU's ``kv_per_token`` times the shards it is split into. ``byte``: one byte in the values'
    base unit (the packs count bytes in bits)."""
    per_gpu = values["kv_per_token"] / byte
    layers = values["layers"]
    stage_layers = math.ceil(layers / values.get("pp", 1.0))
    heads, on_gpu = values.get("kv_heads", 0.0), values.get("kv_heads_per_gpu", 0.0)
    head_shards = heads / on_gpu if values.get("attention", 0.0) == 0 and on_gpu > 0 else 1.0  # MLA: replicated
    return per_gpu * head_shards * layers / stage_layers


@dataclass
class _PWorker:
    free: int
    waiting: deque[int] = field(default_factory=deque)
    prefilling: list[int] = field(default_factory=list)
    busy: bool = False
    work: list[tuple[int, int]] = field(default_factory=list)
    link_free: float = 0.0  # when its link is next idle
    link_busy: float = 0.0  # seconds it sent recorded requests' KV


@dataclass
class _DWorker:
    free: int
    waiting: deque[int] = field(default_factory=deque)
    incoming: int = 0  # admitted, KV in transfer
    ready: list[int] = field(default_factory=list)  # KV arrived: join at the next step
    running: list[int] = field(default_factory=list)
    busy: bool = False
    work: tuple[Any, float, Any, float] | None = None  # decode ids, duration, coalesced ends (or None), start


def simulate_disagg(
    prefill: Pool,
    decode: Pool,
    link: KVLink,
    source: Stream,
    *,
    kv_bytes: float,
    requests: int,
    warmup: int = 0,
    concurrency: int | None = None,
    max_events: int = DEFAULT_MAX_EVENTS,
    seed: int = 1,
    observe: Callable[[StepRecord], None] | None = None,
    coalesce: bool = True,
) -> EngineSimResult:
    """Run a disaggregated fleet until the ``requests`` after the first ``warmup`` have finished (see the
    module essay). ``kv_bytes``: bytes of KV per prompt token (:func:`kv_bytes_per_token`). Step records
    name prefill workers 0..P-1 and decode workers P..P+D-1. Raises :class:`UsageError`,
    :class:`InfeasibleError` (a request a pool can never hold), :class:`BudgetError` (past ``max_events``).
    ``coalesce=False`` runs every decode step as its own event (the same results, more events)."""
    for name, value, low in (("requests", requests, 1), ("warmup", warmup, 0), ("max_events", max_events, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise UsageError(f"{name} must be a whole number >= {low}, got {value!r}", variable=name)
    if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
        raise UsageError(f"concurrency must be a whole number >= 1, got {concurrency!r}", variable="concurrency")
    if not (math.isfinite(kv_bytes) and kv_bytes >= 0):
        raise UsageError(f"kv_bytes must be a finite number >= 0, got {kv_bytes!r}", variable="kv_bytes")
    sim = _Disagg(prefill, decode, link, source, kv_bytes, requests, warmup, concurrency, max_events, observe)
    sim.rng = sim.np.random.default_rng(seed)
    sim.coalesce = coalesce
    sim.run()
    return sim.result()


class _Disagg(EventLoop):
    """The event loop of :func:`simulate_disagg` (one instance per run)."""

    def __init__(
        self,
        prefill: Pool,
        decode: Pool,
        link: KVLink,
        source: Stream,
        kv_bytes: float,
        requests: int,
        warmup: int,
        concurrency: int | None,
        max_events: int,
        observe: Callable[[StepRecord], None] | None,
    ) -> None:
        super().__init__(source, requests, warmup, concurrency, max_events, observe)
        self.P, self.D, self.link = prefill, decode, link
        self.rate = link.bandwidth * min(prefill.tp, decode.tp)  # bytes/s of one transfer
        self.kv_bytes = kv_bytes
        self.pw = [_PWorker(prefill.limits.kv_blocks) for _ in range(prefill.workers)]
        self.dw = [_DWorker(decode.limits.kv_blocks) for _ in range(decode.workers)]
        self.where_p: list[int] = []  # per request: its prefill worker, decode worker, blocks held on each
        self.where_d: list[int] = []
        self.pblocks: list[int] = []
        self.dblocks: list[int] = []
        self.prompt_done: list[float] = []
        self.kv_in: list[float] = []
        self.xfer: list[float] = []
        self.min_prefill = prefill.step.time(0, 0.0, 1, 1.0, 1.0)  # no prefill step is quicker
        spec = decode.step.spec
        self.verify = 1 if spec is None else spec.verify
        self.prefill_tokens = self.prefill_steps = 0

    # -- events -----------------------------------------------------------------------------------
    def on_event(self, kind: int, where: int) -> None:
        if kind == _PREFILL_END:
            self.end_prefill(where)
        elif kind == _XFER_END:
            self.end_transfer(where)
        else:
            self.end_decode(where)

    def blocks(self, tokens: int, limits: EngineLimits) -> int:
        return -(-tokens // limits.block_size)

    def arrive(self, t: float) -> None:
        if self.closed is not None:
            nxt = self.source.next()
            if nxt is None:
                return
            _, inp, out = nxt
        else:
            _, inp, out = self.pending_arrival
        i = self.req.n
        for pool, tokens, name in ((self.P, inp, "prefill"), (self.D, inp + out - 2 + self.verify, "decode")):
            if self.blocks(tokens, pool.limits) > pool.limits.kv_blocks:
                raise InfeasibleError(
                    f"request {i} needs {tokens:,} tokens of KV cache; one {name} worker's pool holds "
                    f"{pool.limits.kv_tokens:,} tokens",
                    hint=f"shorter requests, more memory per {name} worker (tp), or an fp8 KV cache",
                )
        self.req.add(t, inp, out, self.first_rec <= i < self.end_rec)
        for lst, v in ((self.where_p, -1), (self.where_d, -1), (self.pblocks, 0), (self.dblocks, 0)):
            lst.append(v)
        for lst2 in (self.prompt_done, self.kv_in, self.xfer):
            lst2.append(math.nan)
        w = min(range(len(self.pw)), key=lambda k: len(self.pw[k].waiting) + len(self.pw[k].prefilling))
        self.where_p[i] = w
        self.pw[w].waiting.append(i)
        self.waiting_total += 1
        if not self.pw[w].busy:
            self.start_prefill(w)

    # -- the prefill pool -------------------------------------------------------------------------
    def start_prefill(self, w: int) -> None:
        worker, lim, req = self.pw[w], self.P.limits, self.req
        budget = lim.token_budget
        chunks: list[tuple[int, int]] = []
        for i in worker.prefilling:
            if budget <= 0:
                break
            c = min(int(req.inp[i] - req.ctx[i]), budget)
            chunks.append((i, c))
            budget -= c
        new: list[int] = []
        while worker.waiting and budget > 0 and len(worker.prefilling) < lim.max_num_seqs:
            i = worker.waiting[0]
            need = self.blocks(int(req.inp[i]), lim)
            if need > worker.free:
                break
            worker.waiting.popleft()
            self.waiting_total -= 1
            worker.free -= need
            self.pblocks[i] = need
            worker.prefilling.append(i)
            c = min(int(req.inp[i]), budget)
            chunks.append((i, c))
            new.append(i)
            budget -= c
        worker.busy, worker.work = bool(chunks), chunks
        if not chunks:
            return
        pairs = pre_ctx = 0.0
        for i, c in chunks:
            p = int(req.ctx[i])
            pairs += c * p + c * (c + 1) / 2
            pre_ctx += float(self.P.step.kv_tokens(p + c))
        tokens = sum(c for _, c in chunks)
        duration = self.P.step.time(0, 0.0, tokens, pairs, pre_ctx)
        self.prefill_tokens += tokens
        self.prefill_steps += 1
        self.push(self.now + duration, _PREFILL_END, w)
        if self.observe is not None:
            used = lim.kv_blocks - worker.free
            self.observe(
                StepRecord(
                    w, self.now, self.now + duration, (), tuple(chunks), tuple(new), used, len(worker.prefilling)
                )
            )

    def end_prefill(self, w: int) -> None:
        worker, req = self.pw[w], self.req
        for i, c in worker.work:
            req.ctx[i] += c
            if req.ctx[i] >= req.inp[i]:
                worker.prefilling.remove(i)
                self.prompt_done[i] = self.now
                d = min(range(len(self.dw)), key=self.decode_load)
                self.where_d[i] = d
                self.dw[d].waiting.append(i)
                self.waiting_total += 1
                self.admit_decode(d)
        worker.work = []
        self.start_prefill(w)

    # -- the hand-off -----------------------------------------------------------------------------
    def decode_load(self, d: int) -> int:
        x = self.dw[d]
        return len(x.waiting) + x.incoming + len(x.ready) + len(x.running)

    def admit_decode(self, d: int) -> None:
        """FIFO admission on decode worker ``d`` (whole context reserved), each starting its transfer."""
        worker, lim, req = self.dw[d], self.D.limits, self.req
        while worker.waiting and worker.incoming + len(worker.ready) + len(worker.running) < lim.max_num_seqs:
            i = worker.waiting[0]
            need = self.blocks(int(req.inp[i] + req.out[i]) - 2 + self.verify, lim)
            if need > worker.free:
                break
            worker.waiting.popleft()
            self.waiting_total -= 1
            worker.free -= need
            self.dblocks[i] = need
            worker.incoming += 1
            sender = self.pw[self.where_p[i]]
            size = self.kv_bytes * float(self.P.step.kv_tokens(float(req.inp[i])))
            took = self.link.latency + size / self.rate
            end = max(self.now, sender.link_free) + took
            sender.link_free = end
            self.xfer[i] = took
            if req.rec[i]:
                sender.link_busy += took
            self.push(end, _XFER_END, i)

    def end_transfer(self, i: int) -> None:
        w, d = self.where_p[i], self.where_d[i]
        sender, worker = self.pw[w], self.dw[d]
        sender.free += self.pblocks[i]
        self.pblocks[i] = 0
        if not sender.busy:
            self.start_prefill(w)
        worker.incoming -= 1
        worker.ready.append(i)
        self.kv_in[i] = self.now
        if not worker.busy:
            self.start_decode(d)

    # -- the decode pool --------------------------------------------------------------------------
    def start_decode(self, d: int) -> None:
        worker, step = self.dw[d], self.D.step
        worker.running.extend(worker.ready)
        worker.ready.clear()
        if not worker.running:
            worker.busy, worker.work = False, None
            return
        dec = self.np.fromiter(worker.running, dtype=self.np.int64, count=len(worker.running))
        context = float(step.kv_tokens(self.req.ctx[dec] + 1).sum())
        duration = step.time(len(dec), context, 0, 0.0, 0.0, self.verify)
        if step.spec is not None:
            duration += step.spec.draft_time(len(dec), context)
        ends = self.coalesced(d, dec, context, duration) if self.coalesce else None
        end = self.now + duration if ends is None else float(ends[-1])
        worker.busy, worker.work = True, (dec, duration, ends, self.now)
        self.push(end, _DECODE_END, d)
        if self.observe is not None:
            used = self.D.limits.kv_blocks - worker.free
            ids = tuple(int(i) for i in dec)
            repeat = 1 if ends is None else len(ends)
            record = StepRecord(self.P.workers + d, self.now, end, ids, (), (), used, len(dec), repeat)
            self.observe(record)

    def coalesced(self, d: int, dec: Any, context: float, first: float) -> Any:
        """End times of the identical decode steps from now on, or None for one step. Nothing but
        their contexts changes until a sequence finishes or a request joins; a join needs a transfer
        to end, so the steps up to the first ending at or after :meth:`horizon` are timed at once,
        with the arithmetic of :meth:`StepModel.decode_times` (exactly the one-by-one steps' times)."""
        np, req, step = self.np, self.req, self.D.step
        if step.spec is not None or step.window_share > 0:
            return None  # drawn acceptances, or contexts that are not a sum over the batch
        m = min(int((req.out[dec] - req.gen[dec]).min()), COALESCE_MAX)
        if m < 2:
            return None
        contexts = context + np.arange(m) * float(len(dec))
        durations = step.decode_times(len(dec), contexts)
        durations[0] = first
        ends = np.cumsum(np.concatenate(([self.now], durations)))[1:]
        m = min(m, int(np.searchsorted(ends, self.horizon(d), side="left")) + 1)
        return ends[:m] if m >= 2 else None

    def horizon(self, d: int) -> float:
        """A time before which no request can join decode worker ``d``. A join is a transfer to ``d``
        ending: one under way ends when the heap says; a new one starts when a prompt finishes (a
        prefill step's end) and lasts at least the link's latency; a prompt not yet prefilling
        needs a prefill step first, which something in the heap must start (an arrival, a transfer
        freeing prefill blocks, a finish whose client sends its next request). In an open loop
        another decode worker with nobody waiting for it starts nothing by its step ends."""
        latency = self.link.latency
        lag = latency + self.min_prefill
        bound = math.inf
        for t, _, kind, where in self.heap:
            if kind == _XFER_END and self.where_d[where] == d:
                bound = min(bound, t)
            elif kind == _PREFILL_END:
                bound = min(bound, t + latency)
            elif kind == _DECODE_END and where != d and self.closed is None and not self.dw[where].waiting:
                continue
            else:
                bound = min(bound, t + lag)
        return bound

    def end_decode(self, d: int) -> None:
        worker, req, np, now = self.dw[d], self.req, self.np, self.now
        assert worker.work is not None
        dec, _, ends, start = worker.work
        m = 1 if ends is None else len(ends)
        self.steps += m
        self.batch_time += len(dec) * (now - start)
        self.decode_time += now - start
        adv: Any = np.full(len(dec), m, dtype=np.int64)
        if self.D.step.spec is not None:
            adv = np.minimum(self.D.step.spec.draw(self.rng, len(dec)), req.out[dec] - req.gen[dec])
            self.spec_emitted += int(adv.sum())
            self.spec_slots += len(dec)
        self.tokens_out(dec, ends)
        req.gen[dec] += adv
        req.ctx[dec] += adv
        req.last[dec] = now
        done = [int(i) for i in dec[req.gen[dec] >= req.out[dec]]]
        if done:
            gone = set(done)
            worker.running = [i for i in worker.running if i not in gone]
            for i in done:
                req.finish[i] = now
                worker.free += self.dblocks[i]
                self.dblocks[i] = 0
                self.finish_order.append(i)
                if req.rec[i]:
                    self.pending -= 1
        if ends is not None:
            self.step_end.extend(ends[:-1].tolist())
            self.step_tokens.extend([len(dec)] * (m - 1))
            self.step_done.extend([0] * (m - 1))
        self.step_end.append(now)
        self.step_tokens.append(int(adv.sum()) if ends is None else len(dec))
        self.step_done.append(len(done))
        worker.work = None
        if self.closed is not None and self.pending > 0:
            for _ in done:
                self.arrive(now)
        self.admit_decode(d)
        self.start_decode(d)

    def tokens_out(self, dec: Any, ends: Any) -> None:
        """First tokens of the sequences new to the batch, and the recorded sequences' gaps."""
        req, np = self.req, self.np
        first_end = self.now if ends is None else float(ends[0])
        fresh = req.gen[dec] == 0
        req.first[dec[fresh]] = first_end
        rec = req.rec[dec]
        later = dec[~fresh & rec]
        if len(later):
            self.gaps.append(first_end - req.last[later])
            self.gap_weights.append(np.ones(len(later)))
        if ends is not None and rec.any():
            self.gaps.append(np.diff(ends))
            self.gap_weights.append(np.full(len(ends) - 1, float(rec.sum())))

    def unfinished_steps(self) -> None:
        """Count the coalesced steps of every decode worker that ended before the run stopped."""
        groups = (w.work for w in self.dw if w.work is not None and w.work[2] is not None)
        self.count_unfinished((dec, ends, start) for dec, _, ends, start in groups)

    # -- statistics -------------------------------------------------------------------------------
    def result(self) -> EngineSimResult:
        self.unfinished_steps()
        np, req = self.np, self.req
        rec = np.flatnonzero(req.rec[: req.n])
        arrival, first, finish, out = req.arrival[rec], req.first[rec], req.finish[rec], req.out[rec]
        multi = out > 1
        t0, t1, t_end = float(arrival.min()), float(arrival.max()), float(finish.max())
        ends = np.asarray(self.step_end)
        inside = (ends > t0) & (ends <= t_end)
        span = max(t_end - t0, 1e-12)
        q1, q2 = queue_halves(np.asarray(self.queue_t), np.asarray(self.queue_n, dtype=float), t0, t1)
        done_at, kv_in, took = (np.asarray(x)[rec] for x in (self.prompt_done, self.kv_in, self.xfer))
        stats = DisaggStats(
            prefill_workers=self.P.workers,
            decode_workers=self.D.workers,
            handoff=Percentiles.of(kv_in - done_at),
            transfer=Percentiles.of(took),
            link_utilization=max(w.link_busy for w in self.pw) / span,
            prefill_batch=self.prefill_tokens / self.prefill_steps if self.prefill_steps else 0.0,
        )
        return EngineSimResult(
            engine="disagg",
            replicas=self.P.workers + self.D.workers,
            recorded=len(rec),
            ttft=Percentiles.of(first - arrival),
            tpot=Percentiles.of((finish[multi] - first[multi]) / (out[multi] - 1)),
            itl_gap=Percentiles.of(
                np.concatenate(self.gaps) if self.gaps else np.zeros(0),
                np.concatenate(self.gap_weights) if self.gaps else np.zeros(0),
            ),
            output_tokens_per_s=float(np.asarray(self.step_tokens)[inside].sum()) / span,
            requests_per_s=float(np.asarray(self.step_done)[inside].sum()) / span,
            queue_first_half=q1,
            queue_second_half=q2,
            queue_max=int(max(self.queue_n)),
            stable=not (self.closed is None and q2 - q1 > max(1.0, 0.01 * len(rec))),
            mean_decode_batch=self.batch_time / self.decode_time if self.decode_time else 0.0,
            steps=self.steps + self.prefill_steps,
            events=self.events,
            preemptions=0,
            simulated_time=self.now,
            finish_order=tuple(self.finish_order),
            first_admission=(),
            spec_tokens_per_step=self.spec_emitted / self.spec_slots if self.spec_slots else math.nan,
            disagg=stats,
        )


def solve_pools(
    given: Mapping[str, Any], prefill: Mapping[str, Any], decode: Mapping[str, Any], **override: Any
) -> tuple[Pool, Pool, float, dict[str, float]]:
    """The two pools of a disaggregated fleet from one configuration (``given``: model, dtypes, engine,
    lengths, speculation) and each pool's ``{"gpu", "tp", "workers"}`` (gpu and tp default to
    ``given``'s; the prefill pool's gpu to ``given``'s ``prefill_gpu`` first, as in llm_disagg);
    also the KV bytes per prompt token and the decode pool's solved values. The prefill pool never
    speculates; ``override`` (max_num_seqs, token_budget, ...) applies to both pools."""
    solved: list[tuple[StepModel, EngineLimits, dict[str, float], Any]] = []
    for n, side in enumerate((prefill, decode)):
        cfg = {k: v for k, v in given.items() if k != "prefill_gpu"}
        if n == 0 and given.get("prefill_gpu") is not None:
            cfg["gpu"] = given["prefill_gpu"]
        for key in ("gpu", "tp"):
            if side.get(key) is not None:
                cfg[key] = side[key]
        step, limits, values = solve_engine(cfg, **override)
        solved.append((step, limits, values, side.get("workers")))
    (ps, pl, pv, pn), (ds, dl, dv, dn) = solved
    p = Pool(replace(ps, spec=None), pl, pn, round(pv["tp"]))
    d = Pool(ds, dl, dn, round(dv["tp"]))
    return p, d, kv_bytes_per_token(pv, unit_info("B").factor), dv


DEFAULT_LINK = "ib-ndr-400g"  # the link a disaggregated plan row assumes when the question names none


def catalog_link(name: str) -> KVLink:
    """The link ``name`` of the ``links`` catalog (``kv_link_bandwidth`` per GPU and direction,
    ``kv_link_latency``) as a :class:`KVLink` in bytes/s and s."""
    try:
        catalog = get_catalog("links")
    except ConcurError:
        raise UsageError(
            "no links catalog is installed", variable="kv_link", hint="give kv_link_bandwidth and kv_link_latency"
        ) from None
    entry = catalog.entries.get(str(name))
    if entry is None or not {"kv_link_bandwidth", "kv_link_latency"} <= set(entry.values):
        raise UsageError(
            f"unknown link '{name}'", variable="kv_link", hint=f"known: {', '.join(sorted(catalog.entries))}"
        )
    bw = float(entry.values["kv_link_bandwidth"][0]) * catalog.fields["kv_link_bandwidth"].unit.factor
    lat = float(entry.values["kv_link_latency"][0]) * catalog.fields["kv_link_latency"].unit.factor
    return KVLink(bw / unit_info("B/s").factor, lat)


def _base(raw: Any, unit: str, name: str) -> float:
    """``raw`` (a number in ``unit``, or a "number unit" text of the same dimension) in base units."""
    want = unit_info(unit)
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return float(raw) * want.factor
    try:
        number, info = parse_quantity(str(raw), variable=name)
    except (ValueError, ConcurError) as exc:
        raise UsageError(f"{name}: {exc}", variable=name) from None
    if info.text and info.dims != want.dims:
        raise UsageError(f"{name}: '{raw}' is not in {unit} or a unit like it", variable=name)
    return number * (info.factor if info.text else want.factor)


def question_link(question: Mapping[str, Any]) -> tuple[KVLink, str]:
    """The KV link a question names -- ``kv_link_bandwidth`` (bare: GB/s per GPU and direction) with
    ``kv_link_latency`` (bare: us), or ``kv_link`` (a catalog id), else :data:`DEFAULT_LINK` -- and
    its name."""
    bw, lat = question.get("kv_link_bandwidth"), question.get("kv_link_latency")
    if bw is not None or lat is not None:
        if bw is None or lat is None:
            missing = "kv_link_latency" if lat is None else "kv_link_bandwidth"
            raise UsageError(f"{missing} is missing: a link needs its bandwidth and its latency", variable=missing)
        per_byte = unit_info("B/s").factor
        return KVLink(
            _base(bw, "GB/s", "kv_link_bandwidth") / per_byte, _base(lat, "us", "kv_link_latency")
        ), "as given"
    name = str(question.get("kv_link") or DEFAULT_LINK)
    return catalog_link(name), name
