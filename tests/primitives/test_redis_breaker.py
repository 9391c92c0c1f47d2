"""CircuitBreaker (the Redis limiter's outage guard) on a fake clock: states, back-off, probes."""

from __future__ import annotations

import threading

import pytest

from concur.primitives import CircuitBreaker


def breaker(clock, jitter=0.0, base=0.2, cap=5.0) -> CircuitBreaker:
    return CircuitBreaker(base, cap, clock=clock, jitter=lambda: jitter)


def test_one_failure_opens_for_the_jittered_base(clock):
    b = breaker(clock)  # jitter 0: the lower end, half the back-off
    assert b.state == "closed" and b.allow()
    b.record_failure()
    assert (b.state, b.failures, b.opened) == ("open", 1, 1)
    assert b.retry_in() == pytest.approx(0.1)
    clock.advance(0.099)
    assert not b.allow()
    clock.advance(0.001)
    assert b.allow() and b.state == "half-open" and b.probes == 1


def test_failed_probes_double_the_backoff_up_to_the_cap(clock):
    b = breaker(clock, jitter=0.999999)  # the upper end: the whole back-off
    waits = []
    for _ in range(8):
        assert b.allow()  # the probe (or the first call)
        b.record_failure()
        waits.append(round(b.retry_in(), 3))
        clock.advance(b.retry_in())
    assert waits == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]
    assert b.opened == 1 and b.failures == 8
    assert b.backoff(10_000) == 5.0  # no float overflow for a very long outage


def test_jitter_spreads_between_half_and_all_of_the_backoff(clock):
    for jitter, expected in ((0.0, 0.4), (0.5, 0.6), (0.999999, 0.8)):
        b = breaker(clock, jitter=jitter)
        b.record_failure()
        clock.advance(b.retry_in())
        assert b.allow()
        b.record_failure()  # second failure: back-off ceiling 0.4 s
        assert b.retry_in() == pytest.approx(expected / 2, abs=1e-6)


def test_success_closes_and_resets_the_backoff(clock):
    b = breaker(clock)
    b.record_failure()
    clock.advance(1)
    assert b.allow()
    b.record_failure()
    clock.advance(1)
    assert b.allow()
    b.record_success()
    assert (b.state, b.failures) == ("closed", 0)
    b.record_failure()
    assert b.retry_in() == pytest.approx(0.1)  # back to the first step
    assert b.opened == 2


def test_only_one_probe_while_half_open(clock):
    b = breaker(clock)
    b.record_failure()
    clock.advance(0.1)
    assert b.allow()
    assert [b.allow() for _ in range(5)] == [False] * 5
    assert b.probes == 1


def test_failures_of_calls_started_before_the_opening_do_not_escalate(clock):
    b = breaker(clock)
    b.record_failure()
    for _ in range(7):  # seven more threads were in flight when Redis died
        b.record_failure()
    assert b.failures == 1 and b.retry_in() == pytest.approx(0.1)


def test_a_probe_that_never_reports_is_replaced_after_the_cap(clock):
    b = breaker(clock)
    b.record_failure()
    clock.advance(0.1)
    assert b.allow()  # this probe's thread vanishes without reporting
    clock.advance(4.999)
    assert not b.allow()
    clock.advance(0.001)
    assert b.allow() and b.probes == 2


def test_late_success_from_an_old_call_closes_it(clock):
    b = breaker(clock)
    b.record_failure()
    b.record_success()  # a call sent before the outage was answered: Redis is up
    assert b.state == "closed" and b.allow()


def test_bad_settings_are_refused():
    for base, cap in ((0, 1), (-1, 1), (2, 1), (1, float("inf")), (float("nan"), 1)):
        with pytest.raises(ValueError, match="0 < base <= cap < inf"):
            CircuitBreaker(base, cap)


def test_threads_racing_for_the_probe_get_exactly_one(clock, fast_switching):
    b = breaker(clock)
    b.record_failure()
    clock.advance(1)
    start = threading.Barrier(8)
    allowed = []

    def contend() -> None:
        start.wait(timeout=30)
        allowed.append(sum(b.allow() for _ in range(200)))

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sum(allowed) == 1 and b.probes == 1
