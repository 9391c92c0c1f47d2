"""A discrete-event simulator for an LLM serving fleet and for the plain M/M/c queue.

How is this designed, and why?
==============================

The analytic side of concur (``littles_law`` and ``queueing`` packs, :mod:`concur.maths.erlang`)
states steady-state averages.  This module checks them by brute force, and shows what the
averages hide: the spread of latencies and a queue that never drains.

**State.**  One heap of pending events ``(time, seq, kind, payload)``; ``seq`` breaks ties
so runs are deterministic for a seed.  Two models share the loop's bookkeeping:

* ``LLMFleet`` -- Poisson arrivals at ``arrival_rate`` into ``replicas`` replicas, each
  running continuous batching.  A request is admitted to the least-loaded replica that has
  fewer than ``max_batch`` requests, else waits in one FIFO queue in front of the fleet.
  Once admitted it holds its slot for ``ttft`` (prefill, a fixed delay) and then needs
  ``output_tokens`` decode steps.  A replica with ``b`` admitted requests (prefilling
  ones included: they hold KV and count in the batch, exactly as ``batch =
  in_flight/replicas`` in the pack) takes ``t_step = step_time_base +
  step_time_per_seq·b`` per step.  Tokens are treated as a fluid: between two events
  ``b`` is constant and every decoding request advances at ``1/t_step(b)`` tokens per
  second.  Each replica keeps one *virtual token clock* V (tokens every decoding sequence
  has received since the replica started) and a heap of finishing marks ``V_join +
  output_tokens``, so an event costs O(log n) however large the batch -- no per-step loop.
* ``MMcQueue`` -- Poisson arrivals, ``servers`` servers, exponential (or deterministic)
  service, FIFO: the model Erlang C solves exactly, used to validate the loop itself.

**Statistics.**  Time averages (in flight, queued) are integrated exactly between events
over ``[warmup, duration)``.  Per-request figures (latency, wait, P(wait)) use requests
*arriving* in that window; arrivals continue after ``duration`` until every recorded
request has finished (at most until ``2·duration``), so the last arrivals are not censored.
Confidence intervals are 95 % **batch means**: the window is cut into ``batches`` equal
slices and Student's t is applied to the slice means (Law & Kelton, ch. 9).

Worked example.  50 request/s, 10 replicas, 400 output tokens, ttft 0.5 s, t_step =
0.02 s + 0.0005 s × batch.  Saturation is replicas/(output_tokens·k) = 10/(400·0.0005)
= 50 request/s: this fleet sits exactly at saturation, and the plot of queue length
against time is a ramp, not a plateau.  At 30 request/s the fixed point is L =
λ(ttft + osl·a)/(1 − λ·osl·k/R) = 30·8.5/(1 − 0.6) = 637.5 in flight, W = 21.25 s, and a
600 s run (about 0.5 s of CPU here) agrees within its confidence interval.

Consequences: results are reproducible bit for bit for a seed and model; the CI is honest
only when the run is long against the system's relaxation time (see
:func:`concur.maths.erlang.mm1_run_length` for how long that is near saturation); a saturated
system reports a positive ``queue_growth`` (request/s) rather than a meaningless mean.

Non-goals: prefill/decode interference inside a step, preemption and KV eviction, routing
policies other than least-loaded, non-Poisson arrivals, discrete step granularity (a
request's latency is off by at most one step).  Measured against SimPy 4 on the same
M/M/c model (67,000 customers) this loop runs 1.6× faster, statistics included
(see ``docs/t4-littles-law.md``); SimPy has no cheap way to express the fluid batch.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..errors import UsageError
from .plot import pyplot, save_png

__all__ = [
    "MAX_ARRIVALS",
    "MAX_BATCHES",
    "MAX_UNITS",
    "Estimate",
    "LLMFleet",
    "MMcQueue",
    "SimResult",
    "fixed_point",
    "plot_timeseries",
    "simulate",
]

_ARRIVE, _PREFILLED, _DEPART = 0, 1, 2


def _positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    ok = isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        raise UsageError(
            f"{name} must be a finite number {'>= 0' if allow_zero else '> 0'}, got {value!r}",
            variable=name,
        )


MAX_BATCHES = 1_000
"""Batch-means slices: each must span many arrivals for its mean to be a sample (a run holds at most
:data:`MAX_ARRIVALS`). The recorder keeps two lists of ``batches`` floats and walks every slice
boundary: ``--batches 100000000`` built lists of 10^8 floats and never ended."""
MAX_UNITS = 1_000_000
"""Replicas or servers: the loop keeps a few slots per unit."""


def _units(name: str, value: int) -> None:
    """Replicas or servers: a whole number within :data:`MAX_UNITS`."""
    _whole(name, value)
    if value > MAX_UNITS:
        raise UsageError(f"{value:,} {name} is more than a simulation holds ({MAX_UNITS:,})", variable=name)


def _whole(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UsageError(f"{name} must be a whole number >= 1, got {value!r}", variable=name)


@dataclass(frozen=True)
class LLMFleet:
    """Continuous-batching fleet.  Times in seconds, rate in request/s."""

    arrival_rate: float
    replicas: int
    output_tokens: float
    ttft: float
    step_time_base: float
    step_time_per_seq: float
    max_batch: int = 256

    def __post_init__(self) -> None:
        _positive("arrival_rate", self.arrival_rate)
        _units("replicas", self.replicas)
        _positive("output_tokens", self.output_tokens)
        _positive("ttft", self.ttft, allow_zero=True)
        _positive("step_time_base", self.step_time_base, allow_zero=True)
        _positive("step_time_per_seq", self.step_time_per_seq, allow_zero=True)
        _whole("max_batch", self.max_batch)
        if self.step_time_base == 0 and self.step_time_per_seq == 0:
            raise UsageError(
                "step_time_base and step_time_per_seq cannot both be 0",
                variable="step_time_base",
                hint="a decode step takes time",
            )

    @property
    def saturation_rate(self) -> float:
        """Arrival rate (request/s) past which the fleet cannot keep up: the smaller of where the
        fixed point diverges, R/(osl·k), and what the batch cap lets it serve, R·B/W(B) with
        W(B) = ttft + osl·(a + k·B) the residence at a full batch B = ``max_batch`` (Little's law per
        replica). The simulation caps batches the same way, so both columns agree on it."""
        uncapped = (
            math.inf if self.step_time_per_seq == 0 else self.replicas / (self.output_tokens * self.step_time_per_seq)
        )
        full = self.ttft + self.output_tokens * (self.step_time_base + self.step_time_per_seq * self.max_batch)
        return min(uncapped, self.replicas * self.max_batch / full)


@dataclass(frozen=True)
class MMcQueue:
    """Poisson arrivals into ``servers`` FIFO servers; ``service`` exponential or
    deterministic with mean ``service_time`` (same time unit as 1/arrival_rate)."""

    arrival_rate: float
    service_time: float
    servers: int
    service: Literal["exponential", "deterministic"] = "exponential"

    def __post_init__(self) -> None:
        _positive("arrival_rate", self.arrival_rate)
        _positive("service_time", self.service_time)
        _units("servers", self.servers)
        if self.service not in ("exponential", "deterministic"):
            raise UsageError(
                f"service must be 'exponential' or 'deterministic', got {self.service!r}", variable="service"
            )


def fixed_point(fleet: LLMFleet) -> dict[str, float]:
    """The littles_law pack's closed form for ``fleet``: ``in_flight = λ(ttft + osl·a)/(1 − λ·osl·k/R)``;
    ``inf`` at or past :attr:`LLMFleet.saturation_rate` (which counts the batch cap: below it the
    fixed point's batch stays under the cap, so the closed form needs no queue)."""
    lam, osl = fleet.arrival_rate, fleet.output_tokens
    denom = 1 - lam * osl * fleet.step_time_per_seq / fleet.replicas
    if denom <= 0 or lam >= fleet.saturation_rate:
        return {
            "in_flight": math.inf,
            "residence_time": math.inf,
            "t_step": math.inf,
            "saturation_rate": fleet.saturation_rate,
        }
    in_flight = lam * (fleet.ttft + osl * fleet.step_time_base) / denom
    t_step = fleet.step_time_base + fleet.step_time_per_seq * in_flight / fleet.replicas
    return {
        "in_flight": in_flight,
        "residence_time": in_flight / lam,
        "t_step": t_step,
        "saturation_rate": fleet.saturation_rate,
    }


_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    12: 2.179,
    15: 2.131,
    20: 2.086,
    25: 2.060,
    30: 2.042,
}


def _t975(df: int) -> float:
    """Two-sided 95 % Student t quantile (table, then Cornish–Fisher beyond 30 dof)."""
    if df in _T975:
        return _T975[df]
    if df < 30:
        lower = max(k for k in _T975 if k < df)
        return _T975[lower]  # conservative: the next smaller tabulated dof
    z = 1.959964
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


@dataclass(frozen=True)
class Estimate:
    """A point estimate with its 95 % batch-means half-width (``nan`` if undefined)."""

    mean: float
    half_width: float

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width

    def contains(self, value: float, slack: float = 0.0) -> bool:
        """True when ``value`` lies in the interval widened by ``slack`` (absolute)."""
        return self.low - slack <= value <= self.high + slack

    @staticmethod
    def of(values: list[float]) -> Estimate:
        vals = [v for v in values if not math.isnan(v)]
        if not vals:
            return Estimate(math.nan, math.nan)
        mean = sum(vals) / len(vals)
        if len(vals) < 2:
            return Estimate(mean, math.nan)
        var = sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)
        return Estimate(mean, _t975(len(vals) - 1) * math.sqrt(var / len(vals)))


@dataclass(frozen=True)
class SimResult:
    """What one run measured.  Times in the model's unit; counts in requests."""

    model: LLMFleet | MMcQueue
    duration: float
    warmup: float
    seed: int
    latency: Estimate  # arrival to completion
    wait: Estimate  # time in the FIFO queue before admission
    p_wait: Estimate  # share of requests that queued at all
    in_flight: Estimate  # time-average admitted (in service / in a batch)
    in_queue: Estimate  # time-average waiting in the queue
    throughput: float  # completions per unit time in the window
    latency_p50: float
    latency_p99: float
    recorded: int  # requests arriving in the window
    unfinished: int  # of those, not finished by 2·duration
    queue_growth: float  # least-squares slope of queue length, second half (1/time)
    series_t: tuple[float, ...] = field(repr=False)
    series_queue: tuple[int, ...] = field(repr=False)
    series_in_flight: tuple[int, ...] = field(repr=False)

    @property
    def in_system(self) -> float:
        """Time-average number in the system (admitted + queued)."""
        return self.in_flight.mean + self.in_queue.mean

    def as_dict(self) -> dict[str, object]:
        """JSON-ready summary (no time series)."""

        def est(e: Estimate) -> dict[str, float]:
            return {"mean": e.mean, "ci95": e.half_width}

        return {
            "model": type(self.model).__name__,
            "params": vars(self.model).copy(),
            "duration": self.duration,
            "warmup": self.warmup,
            "seed": self.seed,
            "latency": est(self.latency),
            "latency_p50": self.latency_p50,
            "latency_p99": self.latency_p99,
            "wait": est(self.wait),
            "p_wait": est(self.p_wait),
            "in_flight": est(self.in_flight),
            "in_queue": est(self.in_queue),
            "throughput": self.throughput,
            "recorded": self.recorded,
            "unfinished": self.unfinished,
            "queue_growth": self.queue_growth,
        }


class _Recorder:
    """Integrates the time averages per batch and samples the time series."""

    def __init__(
        self,
        warmup: float,
        duration: float,
        batches: int,
        samples: int,
        progress: Callable[[float, float], None] | None = None,
    ) -> None:
        self.warmup, self.end, self.nb = warmup, duration, batches
        self.progress = progress  # told (simulated time, duration) at each sample of the series
        self.width = (duration - warmup) / batches
        self.area_flight = [0.0] * batches
        self.area_queue = [0.0] * batches
        self.last = 0.0
        self.grid = [duration * i / (samples - 1) for i in range(samples)]
        self.gi = 0
        self.st: list[float] = []
        self.sq: list[int] = []
        self.sf: list[int] = []

    def advance(self, now: float, in_flight: int, queued: int) -> None:
        """Account for the constant state on ``[last, now)`` before it changes."""
        while self.gi < len(self.grid) and self.grid[self.gi] <= now:
            self.st.append(self.grid[self.gi])
            self.sq.append(queued)
            self.sf.append(in_flight)
            self.gi += 1
            if self.progress is not None:
                self.progress(min(now, self.end), self.end)
        t0, t1 = max(self.last, self.warmup), min(now, self.end)
        while t0 < t1:
            b = min(int((t0 - self.warmup) / self.width), self.nb - 1)
            edge = min(t1, self.warmup + (b + 1) * self.width)
            self.area_flight[b] += in_flight * (edge - t0)
            self.area_queue[b] += queued * (edge - t0)
            t0 = edge if edge > t0 else t1
        self.last = now


def simulate(
    model: LLMFleet | MMcQueue,
    duration: float,
    *,
    seed: int = 1,
    warmup: float | None = None,
    batches: int = 20,
    samples: int = 400,
    progress: Callable[[float, float], None] | None = None,
) -> SimResult:
    """Run ``model`` for ``duration`` time units and return a :class:`SimResult`.

    ``warmup`` is excluded from every statistic; by default ``duration/10``, raised for
    an ``LLMFleet`` to three relaxation times of the fixed point (at most half the run);
    ``batches`` (>= 2) slices for the batch-means CIs; ``samples`` points of the time series.
    Deterministic for a given ``seed``.  ``progress(simulated, duration)`` is called at each of the
    ``samples`` points of the time series (a few hundred calls).  Raises :class:`UsageError` for bad arguments.
    """
    _positive("duration", duration)
    warm = _default_warmup(model, duration) if warmup is None else warmup
    _positive("warmup", warm, allow_zero=True)
    if warm >= duration:
        raise UsageError(f"warmup ({warm}) must be shorter than duration ({duration})", variable="warmup")
    if not isinstance(batches, int) or batches < 2:
        raise UsageError(f"batches must be a whole number >= 2, got {batches!r}", variable="batches")
    if batches > MAX_BATCHES:
        raise UsageError(f"{batches:,} batches is more than a simulation slices ({MAX_BATCHES:,})", variable="batches")
    if not isinstance(samples, int) or samples < 2:
        raise UsageError(f"samples must be a whole number >= 2, got {samples!r}", variable="samples")
    if not isinstance(model, (LLMFleet, MMcQueue)):
        raise UsageError(f"model must be an LLMFleet or MMcQueue, got {type(model).__name__}")
    _require_bounded(model, duration)
    rec = _Recorder(warm, duration, batches, samples, progress)
    rng = random.Random(seed)
    arrive: list[float] = []
    admit: list[float] = []
    done: list[float] = []
    _run(model, duration, rng, rec, arrive, admit, done)
    return _summarise(model, duration, warm, seed, batches, rec, arrive, admit, done)


MAX_ARRIVALS = 600_000
"""Expected arrivals of one run, ``arrival_rate x 2 x duration`` (arrivals go on until the recorded
requests finish, at most until twice the duration): some 13 us of CPU each for a fleet, so a run
ends within 10 s on a small machine. A count, checked before the run."""


def _require_bounded(model: LLMFleet | MMcQueue, duration: float) -> None:
    """Refuse up front, naming the limit, a run whose expected arrivals are over :data:`MAX_ARRIVALS`."""
    expected = model.arrival_rate * 2 * duration
    if not expected <= MAX_ARRIVALS:
        raise UsageError(
            f"rate x duration makes about {expected:,.0f} arrivals (counting the drain, up to twice the "
            f"duration); a simulation takes at most {MAX_ARRIVALS:,}",
            variable="duration",
            hint=f"give --duration {MAX_ARRIVALS / (2 * model.arrival_rate):.4g} or less",
        )


def _default_warmup(model: LLMFleet | MMcQueue, duration: float) -> float:
    """duration/10, or for a stable LLMFleet 3·τ with τ = W/(1 − λ/λ_sat), the time the
    in-flight count takes to settle after starting empty (linearised fixed point)."""
    if isinstance(model, LLMFleet):
        fp = fixed_point(model)
        if math.isfinite(fp["residence_time"]):
            tau = fp["residence_time"] / (1 - model.arrival_rate / model.saturation_rate)
            return min(duration / 2, max(duration / 10, 3 * tau))
    return duration / 10


def _run(
    model: LLMFleet | MMcQueue,
    duration: float,
    rng: random.Random,
    rec: _Recorder,
    arrive: list[float],
    admit: list[float],
    done: list[float],
) -> None:
    """The event loop.  Fills per-request ``arrive/admit/done`` (nan = not yet)."""
    _EventLoop(model, duration, rng, rec, arrive, admit, done).run()


class _EventLoop:
    """One run's state and its three events: an arrival, a prefill done (a fleet's request
    starts decoding), a departure.

    A fleet replica decodes its active sequences in lockstep: ``vclock`` counts the tokens each
    has produced since the replica was idle (a virtual clock, advanced by :meth:`sync`), and
    ``finish`` holds, per replica, the virtual mark at which each request is done; the next
    departure is rescheduled whenever the batch changes, and ``version`` discards stale ones.
    """

    def __init__(
        self,
        model: LLMFleet | MMcQueue,
        duration: float,
        rng: random.Random,
        rec: _Recorder,
        arrive: list[float],
        admit: list[float],
        done: list[float],
    ) -> None:
        self.model, self.duration, self.rng, self.rec = model, duration, rng, rec
        self.arrive, self.admit, self.done = arrive, admit, done
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, seq, kind, where, what)
        self.seq = 0
        self.llm = isinstance(model, LLMFleet)
        self.osl = model.output_tokens if isinstance(model, LLMFleet) else 0.0
        self.units = units = model.replicas if isinstance(model, LLMFleet) else model.servers
        self.cap = model.max_batch if isinstance(model, LLMFleet) else 1
        # a fleet's decode step: base + per_seq x active sequences (read once: the loop is hot)
        self.step_base = model.step_time_base if isinstance(model, LLMFleet) else 0.0
        self.step_per_seq = model.step_time_per_seq if isinstance(model, LLMFleet) else 0.0
        self.active = [0] * units  # admitted requests per replica / server
        self.vclock = [0.0] * units  # virtual tokens produced per decoding sequence
        self.vtime = [0.0] * units  # when vclock was last brought up to date
        self.finish: list[list[tuple[float, int]]] = [[] for _ in range(units)]  # (V mark, request)
        self.version = [0] * units  # invalidates stale departure events
        self.queue: list[int] = []  # FIFO of waiting request ids
        self.qhead = 0
        self.in_flight = 0
        self.pending = 0  # recorded requests not yet finished

    def run(self) -> None:
        """Pop events until the recorded requests are done after ``duration`` (at most until
        twice the duration), accounting the state before each change. An arrival starts on the
        least busy unit with room when nobody waits, else queues; a departure (a fleet's event
        carries a version: stale ones are skipped) frees its unit for the head of the queue.
        (The handlers are inline: this loop runs once per event.)"""
        rec, limit, duration, events, queue = self.rec, 2 * self.duration, self.duration, self.events, self.queue
        active, finish, version, rng = self.active, self.finish, self.version, self.rng
        rate, llm, units = self.model.arrival_rate, self.llm, range(self.units)
        self.push(rng.expovariate(rate), _ARRIVE, 0, 0)
        while events:
            now, _, kind, where, what = heapq.heappop(events)
            if now > limit or (now >= duration and self.pending == 0):
                break
            rec.advance(now, self.in_flight, len(queue) - self.qhead)
            if kind == _ARRIVE:
                req = self.record_arrival(now)
                self.push(now + rng.expovariate(rate), _ARRIVE, 0, 0)
                best = min(units, key=active.__getitem__)
                if active[best] < self.cap and self.qhead == len(queue):
                    self.start(req, best, now)
                else:
                    queue.append(req)
                continue
            r = where
            if kind == _PREFILLED:
                self.sync(r, now)
                heapq.heappush(finish[r], (self.vclock[r] + self.osl, what))
                self.reschedule(r, now)
                continue
            if llm:
                if what != version[r]:
                    continue  # superseded by a later reschedule
                self.sync(r, now)
                _, req = heapq.heappop(finish[r])
                active[r] -= 1
                self.finish_request(req, now)
                self.reschedule(r, now)
            else:
                active[r] -= 1
                self.finish_request(what, now)
            if self.qhead < len(queue):
                self.start_next(r, now)
        rec.advance(max(duration, rec.last), self.in_flight, len(queue) - self.qhead)

    def record_arrival(self, now: float) -> int:
        """A new request's id; it is recorded (pending) when it arrives inside the window."""
        req = len(self.arrive)
        self.arrive.append(now)
        self.admit.append(math.nan)
        self.done.append(math.nan)
        if self.rec.warmup <= now < self.duration:
            self.pending += 1
        return req

    def start_next(self, r: int, now: float) -> None:
        """The head of the queue starts on unit ``r``; the consumed head is dropped now and then."""
        nxt = self.queue[self.qhead]
        self.qhead += 1
        self.start(nxt, r, now)
        if self.qhead > 4096 and self.qhead * 2 > len(self.queue):
            del self.queue[: self.qhead]
            self.qhead = 0

    def push(self, t: float, kind: int, where: int, what: int) -> None:
        """Schedule an event; ``seq`` breaks ties in the order events were pushed."""
        seq = self.seq
        heapq.heappush(self.events, (t, seq, kind, where, what))
        self.seq = seq + 1

    def t_step(self, r: int) -> float:
        """A fleet replica's decode step time at its current batch."""
        return self.step_base + self.step_per_seq * self.active[r]

    def sync(self, r: int, now: float) -> None:
        """Bring replica ``r``'s virtual clock up to ``now`` (it moves only while decoding)."""
        if self.finish[r]:
            self.vclock[r] += (now - self.vtime[r]) / self.t_step(r)
        self.vtime[r] = now

    def reschedule(self, r: int, now: float) -> None:
        """Schedule replica ``r``'s next departure at the current step time (older ones go stale)."""
        self.version[r] += 1
        if self.finish[r]:
            mark = self.finish[r][0][0]
            self.push(now + max(mark - self.vclock[r], 0.0) * self.t_step(r), _DEPART, r, self.version[r])

    def start(self, req: int, r: int, now: float) -> None:
        """Admit request ``req`` on replica (or server) ``r``: a fleet's prefills, a server serves."""
        self.admit[req] = now
        self.in_flight += 1
        model = self.model
        if isinstance(model, LLMFleet):
            self.sync(r, now)
            self.active[r] += 1
            self.reschedule(r, now)
            self.push(now + model.ttft, _PREFILLED, r, req)
        else:
            self.active[r] += 1
            s = model.service_time if model.service == "deterministic" else self.rng.expovariate(1 / model.service_time)
            self.push(now + s, _DEPART, r, req)

    def finish_request(self, req: int, now: float) -> None:
        """Request ``req`` is done at ``now``; a recorded one is no longer pending."""
        self.done[req] = now
        self.in_flight -= 1
        if self.arrive[req] >= self.rec.warmup and self.arrive[req] < self.duration:
            self.pending -= 1


def _percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return math.nan
    pos = q * (len(sorted_vals) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def _slope(ts: list[float], ys: list[int]) -> float:
    n = len(ts)
    if n < 2:
        return 0.0
    mt, my = sum(ts) / n, sum(ys) / n
    den = sum((t - mt) ** 2 for t in ts)
    return sum((t - mt) * (y - my) for t, y in zip(ts, ys)) / den if den else 0.0


def _summarise(
    model: LLMFleet | MMcQueue,
    duration: float,
    warm: float,
    seed: int,
    nb: int,
    rec: _Recorder,
    arrive: list[float],
    admit: list[float],
    done: list[float],
) -> SimResult:
    width = rec.width
    lat: list[list[float]] = [[] for _ in range(nb)]
    wait: list[list[float]] = [[] for _ in range(nb)]
    all_lat: list[float] = []
    recorded = unfinished = completions = 0
    for a, s, d in zip(arrive, admit, done):
        if warm <= d < duration:
            completions += 1
        if not warm <= a < duration:
            continue
        recorded += 1
        if math.isnan(d):
            unfinished += 1
            continue
        b = min(int((a - warm) / width), nb - 1)
        lat[b].append(d - a)
        wait[b].append(s - a)
        all_lat.append(d - a)
    mean: Callable[[list[float]], float] = lambda xs: sum(xs) / len(xs) if xs else math.nan
    all_lat.sort()
    half = [i for i, t in enumerate(rec.st) if t >= duration / 2]
    return SimResult(
        model=model,
        duration=duration,
        warmup=warm,
        seed=seed,
        latency=Estimate.of([mean(x) for x in lat]),
        wait=Estimate.of([mean(x) for x in wait]),
        p_wait=Estimate.of([mean([1.0 if w > 0 else 0.0 for w in x]) for x in wait]),
        in_flight=Estimate.of([a / width for a in rec.area_flight]),
        in_queue=Estimate.of([a / width for a in rec.area_queue]),
        throughput=completions / (duration - warm),
        latency_p50=_percentile(all_lat, 0.50),
        latency_p99=_percentile(all_lat, 0.99),
        recorded=recorded,
        unfinished=unfinished,
        queue_growth=_slope([rec.st[i] for i in half], [rec.sq[i] for i in half]),
        series_t=tuple(rec.st),
        series_queue=tuple(rec.sq),
        series_in_flight=tuple(rec.sf),
    )


def plot_timeseries(result: SimResult, path: str | Path, *, title: str | None = None) -> Path:
    """Write a PNG of queue length and in-flight requests against time (matplotlib,
    imported here, Agg backend; the ``plot`` extra).  Returns the path written."""
    plt = pyplot()
    out = Path(path)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    try:
        ax.plot(result.series_t, result.series_in_flight, label="in flight (admitted)")
        ax.plot(result.series_t, result.series_queue, label="waiting in queue")
        ax.axvline(result.warmup, color="grey", linestyle=":", label="end of warm-up")
        m = result.model
        if title is None:
            if isinstance(m, LLMFleet):
                title = (
                    f"{m.arrival_rate:g} request/s into {m.replicas} replicas "
                    f"(saturation {m.saturation_rate:.3g} request/s)"
                )
            else:
                title = f"M/M/{m.servers}: load {m.arrival_rate * m.service_time:g} erlang on {m.servers} servers"
        ax.set_title(title)
        ax.set_xlabel("time (s)" if isinstance(m, LLMFleet) else "time")
        ax.set_ylabel("requests")
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left")
        fig.tight_layout()
        return save_png(fig, out)
    finally:
        plt.close(fig)
