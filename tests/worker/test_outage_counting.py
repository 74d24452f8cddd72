# SPDX-License-Identifier: MIT
"""One outage is one broker error, however many operations it caught at once."""

from __future__ import annotations

from datetime import timedelta

from rainier_queue.errors import BrokerUnavailable
from rainier_queue.worker import WorkerOptions, WorkerStats
from rainier_queue.worker.outage import Outage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


DOWN = BrokerUnavailable("the server restarted (injected)")


def test_settles_failing_together_in_one_blip_count_once_and_retry_together() -> None:
    clock = Clock()
    options = WorkerOptions(sleep=timedelta(seconds=1), max_consecutive_errors=20)
    stats = WorkerStats()
    outage = Outage(options, stats, clock=clock)

    first = outage.failed(DOWN, "settle")
    waits = []
    for _ in range(23):  # 24 jobs finished in the same moment as the restart
        clock.now += 0.001
        waits.append(outage.failed(DOWN, "settle"))

    assert first is not None
    assert all(wait is not None for wait in waits), "one blip never ends the worker"
    assert outage.consecutive == 1
    assert stats.broker_errors == 24, "every failed call is still counted in the stats"
    longest = max(w.total_seconds() for w in waits if w is not None)
    assert longest <= first.total_seconds() * 1.1, "none waits longer than the first one"


def test_a_broker_that_stays_down_is_counted_once_per_round_and_given_up_on() -> None:
    clock = Clock()
    options = WorkerOptions(sleep=timedelta(seconds=1), max_consecutive_errors=3)
    outage = Outage(options, WorkerStats(), clock=clock)

    waits = []
    for _ in range(3):
        wait = outage.failed(DOWN, "settle")
        waits.append(wait)
        if wait is not None:
            clock.now += wait.total_seconds()  # the retry comes when the wait ends

    assert waits[-1] is None, "three rounds in a row give up"
    assert outage.gave_up_after == 3


def test_a_success_ends_the_outage() -> None:
    clock = Clock()
    outage = Outage(WorkerOptions(max_consecutive_errors=2), WorkerStats(), clock=clock)

    wait = outage.failed(DOWN)
    assert wait is not None
    clock.now += wait.total_seconds()
    outage.succeeded()
    clock.now += 0.001

    assert outage.failed(DOWN) is not None, "a new outage starts its count again"
    assert outage.consecutive == 1
