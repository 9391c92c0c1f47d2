"""Erlang B, Erlang C and the M/M/c family, computed stably in pure Python.

How is this designed, and why?
==============================

State.  Nothing: every function here is a pure function of its arguments.  The
engine's expression language calls :func:`erlang_b` and :func:`erlang_c` with
``(servers, load)``; the queueing pack, the simulator's analytic column and the
tests call the rest.

The core is the Erlang B recurrence, which never forms a factorial::

    B(0, A) = 1
    B(c, A) = A·B(c−1, A) / (c + A·B(c−1, A))

Every intermediate value is a probability in (0, 1], so the loop neither
overflows nor loses precision: c = 10,000 servers at A = 9,900 erlang costs
10,000 multiply-adds (about 0.5 ms in CPython) and is exact to rounding.  The
textbook form ``(A^c/c!) / Σ A^k/k!`` overflows a double at c ≈ 170.
Erlang C follows from B without another loop::

    C(c, A) = c·B / (c − A·(1 − B))          for A < c

Worked example (the Call Centre Helper case, ``tests/data/queueing_cases.yaml``):
100 calls per 30 minutes with a 180 s handling time is A = λ·s =
(100/1800 s)·180 s = 10 erlang.  With c = 11 agents, B(11, 10) = 0.1632 and
C = 11·0.1632 / (11 − 10·0.8368) = 0.6821: two calls in three wait.  The mean
wait is C·s/(c − A) = 0.6821·180/1 = 122.8 s and the share answered within
20 s is 1 − C·exp(−(c − A)·t/s) = 1 − 0.6821·e^(−1/9) = 0.3896.  With 14
agents C = 0.1741 and the 20 s service level is 0.8884; 14 is the smallest
staff meeting 80 % in 20 s (13 gives 0.7956), which
:func:`servers_for_service_level` finds by carrying the recurrence forward one
server at a time, O(c) in total.

Consequences.

* **Saturation is an answer, not an error.**  When ``load >= servers`` the
  queue never drains: :func:`erlang_c` returns 1.0 (everyone waits), waits and
  queue lengths return ``math.inf``, and the service level returns 0.0.
  Negative, NaN or infinite arguments raise :class:`concur.errors.UsageError`
  (a ``ValueError``).
* **Non-integer servers** are accepted so that a root finder may bracket
  through them: B is *linearly interpolated* in ``servers`` between the two
  neighbouring integers (exact at integers, continuous, monotone, in [0, 1]).
  The analytic continuation through the incomplete gamma function is not used:
  it needs special functions the standard library lacks, and real staffing is
  integer anyway.  C, waits and service level are then derived from that B by
  the usual formulas.
* **Approximations are labelled.**  Kingman (G/G/1) and Allen–Cunneen (G/G/c)
  scale the exact M/M/c wait by ``(ca² + cs²)/2``; they are exact for M/M/c and
  M/G/1 (Pollaczek–Khinchine) but only approximate elsewhere (about 5 % low for
  M/D/3 at ρ = 2/3).  :func:`md_c_wait` is Cosmetatos's M/D/c wait (half the
  M/M/c wait with a correction for deterministic service: within 0.3 % of the
  simulated M/D/3 case, exact for M/D/1).  Halfin–Whitt is the c → ∞ limit of
  Erlang C under square-root staffing.
* **Sweeps** use :func:`erlang_b_array` / :func:`erlang_c_array`, which import
  numpy lazily and run the same recurrence across whole arrays at once.

Non-goals: abandonment (Erlang A), priorities, finite queues other than the
blocking system (Erlang B), time-varying arrival rates.  Units are the
caller's business: ``load`` is in erlang (dimensionless), times share one unit.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..records import record

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np

__all__ = [
    "MMc",
    "allen_cunneen_wait",
    "erlang_b",
    "erlang_b_array",
    "erlang_c",
    "erlang_c_array",
    "halfin_whitt_beta",
    "halfin_whitt_p_wait",
    "kingman_wait",
    "load_for_blocking",
    "md_c_wait",
    "min_stable_servers",
    "mm1",
    "mm1_number_variance",
    "mm1_run_length",
    "mmc",
    "servers_for_blocking",
    "servers_for_mean_wait",
    "servers_for_p_wait",
    "servers_for_service_level",
]

#: Hard ceiling on the servers an inverse search will try before giving up.
MAX_SERVERS = 10_000_000


# --------------------------------------------------------------------------- checks


def _check(name: str, value: float, *, positive: bool = False) -> float:
    """Return ``value`` as float, raising UsageError if it is not a finite number >= 0."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise UsageError(
            f"{name} must be a number, got {value!r}", variable=name, hint="pass a finite number"
        ) from None
    if not math.isfinite(x) or x < 0 or (positive and x == 0):
        bound = "> 0" if positive else ">= 0"
        raise UsageError(
            f"{name} must be a finite number {bound}, got {value!r}",
            variable=name,
            hint=f"pass {name} {bound}",
        )
    return x


def _check_probability(name: str, value: float) -> float:
    x = _check(name, value)
    if not 0 < x < 1:
        raise UsageError(
            f"{name} must lie strictly between 0 and 1, got {value!r}",
            variable=name,
            hint="give a probability such as 0.8",
        )
    return x


# --------------------------------------------------------------------------- B and C


_FLUID_SIGMAS = 40.0
"""Where the recurrence may start on a large load: ``A - 40 sqrt(A)`` servers (see :func:`_recurrence_start`)."""


def _recurrence_start(c: int, load: float) -> tuple[int, float]:
    """(k0, B(k0, A)) to run the recurrence from, exactly in double precision.

    Below the load the recurrence contracts: B(k) = A B(k-1) / (k + A B(k-1)) passes on an error
    in B(k-1) times A k / (k + A B(k-1))^2, about k / A where B is near its fluid limit 1 - k/A.
    Started 40 sqrt(A) steps below min(c, A) from that limit, the start's error is multiplied by
    at most about exp(-(40 sqrt(A))^2 / (2A)) = exp(-800) by the time k reaches min(c, A): nothing
    is left of it in a double. So a load of a million costs about 40,000 steps instead of a
    million; below 1,600 erlang (k0 <= 0) the recurrence starts at 0 as it always did."""
    k0 = math.floor(min(c, load) - _FLUID_SIGMAS * math.sqrt(load))
    if k0 <= 0:
        return 0, 1.0
    return k0, 1.0 - k0 / load


def _erlang_b_int(c: int, load: float) -> float:
    """B(c, A) for whole ``c`` by the forward recurrence (inputs already checked). It stops where B
    underflows to 0, which it then stays: far above the load it costs about 40 sqrt(A) steps, not c."""
    k0, b = _recurrence_start(c, load)
    for k in range(k0 + 1, c + 1):
        ab = load * b
        b = ab / (k + ab)
        if b == 0.0:
            return 0.0
    return b


def erlang_b(servers: float, load: float) -> float:
    """Blocking probability of an M/M/c/c loss system (Erlang B).

    ``servers`` >= 0 (non-integers interpolate linearly between neighbours),
    ``load`` >= 0 in erlang (arrival rate × service time).  Returns a
    probability in [0, 1]; ``load == 0`` gives 0 unless ``servers == 0``.
    Raises :class:`UsageError` for negative or non-finite arguments.

    >>> round(erlang_b(11, 10), 4)
    0.1632
    """
    c = _check("servers", servers)
    a = _check("load", load)
    lo = math.floor(c)
    b_lo = _erlang_b_int(lo, a)
    frac = c - lo
    if frac == 0:
        return b_lo
    ab = a * b_lo
    b_hi = ab / (lo + 1 + ab)
    return b_lo + frac * (b_hi - b_lo)


def _c_from_b(c: float, a: float, b: float) -> float:
    if a >= c:
        return 1.0
    return c * b / (c - a * (1.0 - b))


def erlang_c(servers: float, load: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (Erlang C).

    Same arguments as :func:`erlang_b`.  Returns 1.0 when ``load >= servers``
    (the queue never drains, everyone waits) and 0.0 when ``load == 0``.

    >>> round(erlang_c(11, 10), 4)
    0.6821
    """
    c = _check("servers", servers)
    a = _check("load", load)
    if a >= c:
        return 1.0
    return _c_from_b(c, a, erlang_b(c, a))


# --------------------------------------------------------------------------- M/M/c metrics


@record
class MMc:
    """Steady-state metrics of an M/M/c queue (FIFO, infinite waiting room).

    Times share the unit of ``service_time``; counts are customers.  When
    ``load >= servers`` the queue is unstable: ``p_wait`` is 1.0 and every wait
    or queue length is ``math.inf``.
    """

    servers: float
    arrival_rate: float
    service_time: float
    load: float
    utilization: float
    p0: float
    blocking: float
    p_wait: float
    mean_wait: float
    mean_in_queue: float
    mean_in_system: float
    mean_residence: float

    @property
    def stable(self) -> bool:
        """True when the queue drains (load < servers)."""
        return self.load < self.servers

    def service_level(self, target_time: float) -> float:
        """Share of arrivals whose wait is at most ``target_time``:
        ``1 − p_wait·exp(−(c − A)·t/s)``; 0.0 when unstable."""
        t = _check("target_time", target_time)
        return _service_level(self.servers, self.load, self.service_time, t, self.p_wait)


def _service_level(c: float, a: float, s: float, t: float, p_wait: float) -> float:
    if a >= c:
        return 0.0
    return 1.0 - p_wait * math.exp(-(c - a) * t / s)


def _log_p0(c: int, a: float) -> float:
    """ln P(empty) of M/M/c by a log-sum-exp over the Poisson terms (needs a < c)."""
    logs = [k * math.log(a) - math.lgamma(k + 1) for k in range(c)] if a > 0 else [0.0]
    logs.append(c * math.log(a) - math.lgamma(c + 1) - math.log1p(-a / c) if a > 0 else -math.inf)
    top = max(logs)
    return -(top + math.log(sum(math.exp(x - top) for x in logs)))


def mmc(arrival_rate: float, service_time: float, servers: float) -> MMc:
    """All M/M/c metrics for Poisson arrivals at ``arrival_rate`` (per unit time),
    exponential service of mean ``service_time`` and ``servers`` servers.

    >>> q = mmc(arrival_rate=100 / 1800, service_time=180, servers=14)
    >>> round(q.p_wait, 4), round(q.service_level(20), 4)
    (0.1741, 0.8884)
    """
    lam = _check("arrival_rate", arrival_rate)
    s = _check("service_time", service_time, positive=True)
    c = _check("servers", servers, positive=True)
    a = lam * s
    b = erlang_b(c, a)
    rho = a / c
    if a >= c:
        inf = math.inf
        return MMc(c, lam, s, a, rho, 0.0, b, 1.0, inf, inf, inf, inf)
    p_wait = _c_from_b(c, a, b)
    wq = p_wait * s / (c - a)
    lq = lam * wq
    p0 = math.exp(_log_p0(int(c), a)) if c == int(c) else math.nan
    return MMc(c, lam, s, a, rho, p0, b, p_wait, wq, lq, lq + a, wq + s)


def mm1(arrival_rate: float, service_time: float) -> MMc:
    """M/M/1 metrics: ``mmc(arrival_rate, service_time, 1)``; p0 = 1 − ρ, W = s/(1 − ρ).

    >>> round(mm1(24, 1 / 30).mean_in_system, 9)
    4.0
    """
    return mmc(arrival_rate, service_time, 1)


# --------------------------------------------------------------------------- inverses


def min_stable_servers(load: float) -> int:
    """Smallest whole number of servers with ``servers > load`` (M/M/c stability)."""
    a = _check("load", load)
    return math.floor(a) + 1


def _search_servers(load: float, start: int, ok: Any) -> int:
    """Walk c = 1, 2, ... carrying B forward; return the first c >= start with ok(c, b)."""
    b = 1.0
    c = 0
    while c < MAX_SERVERS:
        c += 1
        ab = load * b
        b = ab / (c + ab)
        if c >= start and ok(c, b):
            return c
    raise UsageError(
        f"no server count up to {MAX_SERVERS:,} meets the target at load {load:g} erlang",
        hint="relax the target or check the load",
    )


def servers_for_blocking(load: float, target: float) -> int:
    """Smallest whole servers with Erlang B blocking <= ``target`` (0 < target < 1)."""
    a = _check("load", load)
    p = _check_probability("target", target)
    if a == 0:
        return 0
    return _search_servers(a, 1, lambda c, b: b <= p)


def servers_for_p_wait(load: float, target: float) -> int:
    """Smallest whole servers with Erlang C P(wait) <= ``target`` (0 < target < 1).

    >>> servers_for_p_wait(10, 0.2)
    14
    """
    a = _check("load", load)
    p = _check_probability("target", target)
    return _search_servers(a, min_stable_servers(a), lambda c, b: _c_from_b(c, a, b) <= p)


def servers_for_service_level(load: float, service_time: float, target_time: float, target_level: float) -> int:
    """Smallest whole servers answering at least ``target_level`` of arrivals within
    ``target_time`` (same unit as ``service_time``).

    >>> servers_for_service_level(10, 180, 20, 0.8)
    14
    """
    a = _check("load", load)
    s = _check("service_time", service_time, positive=True)
    t = _check("target_time", target_time)
    level = _check_probability("target_level", target_level)

    def ok(c: int, b: float) -> bool:
        return _service_level(c, a, s, t, _c_from_b(c, a, b)) >= level

    return _search_servers(a, min_stable_servers(a), ok)


def servers_for_mean_wait(load: float, service_time: float, max_wait: float) -> int:
    """Smallest whole servers whose M/M/c mean wait is at most ``max_wait``."""
    a = _check("load", load)
    s = _check("service_time", service_time, positive=True)
    w = _check("max_wait", max_wait)
    return _search_servers(a, min_stable_servers(a), lambda c, b: _c_from_b(c, a, b) * s / (c - a) <= w)


def load_for_blocking(servers: int, target: float, *, rel_tol: float = 1e-12) -> float:
    """Largest offered load (erlang) that ``servers`` circuits carry with Erlang B
    blocking <= ``target``: the classic Erlang B table lookup, by bisection.

    >>> round(load_for_blocking(10, 0.01), 4)
    4.4612
    """
    c = _check("servers", servers, positive=True)
    p = _check_probability("target", target)
    lo, hi = 0.0, max(1.0, c)
    while erlang_b(c, hi) < p:
        hi *= 2.0
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if erlang_b(c, mid) <= p:
            lo = mid
        else:
            hi = mid
    return lo


# --------------------------------------------------------------------------- approximations


def kingman_wait(utilization: float, service_time: float, ca2: float, cs2: float) -> float:
    """Kingman's G/G/1 mean wait (an approximation): ``ρ/(1−ρ)·(ca²+cs²)/2·s``.

    Exact for M/G/1 (ca² = 1: Pollaczek–Khinchine) and M/M/1; ``inf`` when ρ >= 1.

    >>> round(kingman_wait(0.9, 1.0, 1.0, 0.0), 12)  # M/D/1
    4.5
    """
    rho = _check("utilization", utilization)
    s = _check("service_time", service_time, positive=True)
    ca = _check("ca2", ca2)
    cs = _check("cs2", cs2)
    if rho >= 1:
        return math.inf
    return rho / (1 - rho) * (ca + cs) / 2 * s


def allen_cunneen_wait(servers: float, arrival_rate: float, service_time: float, ca2: float, cs2: float) -> float:
    """Allen–Cunneen G/G/c mean wait (an approximation): ``Wq(M/M/c)·(ca²+cs²)/2``."""
    ca = _check("ca2", ca2)
    cs = _check("cs2", cs2)
    return mmc(arrival_rate, service_time, servers).mean_wait * (ca + cs) / 2


def md_c_wait(servers: float, load: float, service_time: float) -> float:
    """Mean wait in an M/D/c queue (an approximation): Cosmetatos's correction of half the M/M/c wait,

    ``Wq(M/D/c) = Wq(M/M/c)/2 · (1 + (1−ρ)(c−1)(√(4+5c) − 2)/(16ρc))``, ``Wq(M/M/c) = C(c, A)·s/(c − A)``,

    with ρ = A/c (G. P. Cosmetatos, "Some approximate equilibrium results for the multi-server queue
    (M/G/r)", Operational Research Quarterly 27(3), 1976, pp. 615-620). One server gives the exact
    M/D/1 (Pollaczek–Khinchine) wait ``ρ·s/(2(1−ρ))``; for M/D/3 at ρ = 2/3 it is 2.331 against a
    simulated 2.336 (``tests/data/queueing_cases.yaml``), where half the M/M/c wait alone is 5 % low.
    ``load`` in erlang, the wait in ``service_time``'s unit; 0 at no load, ``inf`` when ``load >= servers``.

    >>> round(md_c_wait(1, 0.9, 1.0), 12)
    4.5
    """
    c = _check("servers", servers, positive=True)
    a = _check("load", load)
    s = _check("service_time", service_time, positive=True)
    if a >= c:
        return math.inf
    if a == 0:
        return 0.0
    rho = a / c
    correction = 1 + (1 - rho) * (c - 1) * (math.sqrt(4 + 5 * c) - 2) / (16 * rho * c)
    return erlang_c(c, a) * s / (c - a) / 2 * correction


def _phi(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _big_phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def halfin_whitt_p_wait(beta: float) -> float:
    """Halfin–Whitt limit of P(wait) when servers = A + β·√A, A → ∞:
    ``1 / (1 + β·Φ(β)/φ(β))`` (an asymptotic approximation)."""
    b = _check("beta", beta, positive=True)
    return 1.0 / (1.0 + b * _big_phi(b) / _phi(b))


def halfin_whitt_beta(p_wait: float) -> float:
    """Square-root staffing constant β whose Halfin–Whitt P(wait) equals ``p_wait``."""
    p = _check_probability("p_wait", p_wait)
    lo, hi = 1e-12, 40.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if halfin_whitt_p_wait(mid) > p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def mm1_number_variance(utilization: float) -> float:
    """Asymptotic variance constant σ² of the time-average number in an M/M/1
    system (μ = 1): ``2ρ(1+ρ)/(1−ρ)⁴`` (Whitt 1989), for planning run lengths."""
    rho = _check("utilization", utilization, positive=True)
    if rho >= 1:
        return math.inf
    return 2 * rho * (1 + rho) / (1 - rho) ** 4


def mm1_run_length(utilization: float, rel_half_width: float, z: float = 1.96) -> float:
    """Simulated time (in service times) for a confidence half-width of
    ``rel_half_width`` × the mean number in an M/M/1 system:
    ``2z²(1+ρ)/(ρ(1−ρ)²ε²)`` (Whitt 1989).  Shows why high load needs long runs."""
    rho = _check("utilization", utilization, positive=True)
    eps = _check("rel_half_width", rel_half_width, positive=True)
    zz = _check("z", z, positive=True)
    if rho >= 1:
        return math.inf
    return 2 * zz**2 * (1 + rho) / (rho * (1 - rho) ** 2 * eps**2)


# --------------------------------------------------------------------------- vectorised


def erlang_b_array(servers: Any, load: Any) -> np.ndarray:
    """Erlang B over broadcast arrays (numpy, imported here): one pass of the
    recurrence up to ``max(servers)`` for all points; non-integer servers
    interpolate exactly as :func:`erlang_b` does."""
    import numpy as np

    c = np.asarray(servers, dtype=float)
    a = np.asarray(load, dtype=float)
    c, a = np.broadcast_arrays(c, a)
    if np.any(~np.isfinite(c)) or np.any(~np.isfinite(a)) or np.any(c < 0) or np.any(a < 0):
        raise UsageError("servers and load must be finite and >= 0", hint="check the sweep range")
    lo = np.floor(c)
    li = lo.astype(np.int64)
    # each point starts where the scalar recurrence does (_recurrence_start): 40 sqrt(A) below min(c, A)
    k0 = np.maximum(np.floor(np.minimum(lo, a) - _FLUID_SIGMAS * np.sqrt(a)), 0).astype(np.int64)
    safe = np.where(a > 0, a, 1.0)
    b = np.where(k0 > 0, 1.0 - k0 / safe, 1.0)  # right where k0 is the smallest start, overwritten at k0 elsewhere
    at_lo = np.ones(c.shape)
    for k in range(int(k0.min(initial=0)) + 1, int(li.max(initial=0)) + 1):
        ab = a * b
        b = np.where(k0 == k, 1.0 - k / safe, ab / (k + ab))
        hit = li == k
        if hit.any():
            at_lo[hit] = b[hit]
    frac = c - lo
    ab = a * at_lo
    at_hi = ab / (lo + 1 + ab)
    return np.where(frac == 0, at_lo, at_lo + frac * (at_hi - at_lo))


def erlang_c_array(servers: Any, load: Any) -> np.ndarray:
    """Erlang C over broadcast arrays; 1.0 where ``load >= servers``."""
    import numpy as np

    c = np.asarray(servers, dtype=float)
    a = np.asarray(load, dtype=float)
    c, a = np.broadcast_arrays(c, a)
    b = erlang_b_array(c, a)
    stable = a < c
    with np.errstate(divide="ignore", invalid="ignore"):
        val = c * b / (c - a * (1.0 - b))
    return np.where(stable, val, 1.0)
