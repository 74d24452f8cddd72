# SPDX-License-Identifier: MIT
"""`Slots`: the counting behind `concurrency`, reserving ahead and a stop, without a loop.

The worker tests show these rules through a running worker; here each is
pinned on its own: never more than `concurrency` handlers, held jobs start
oldest first, no more than `concurrency` finished jobs wait to be recorded
before held ones start, and a stop hands every held job back.
"""

from __future__ import annotations

import pytest

from rainier_queue import QueuedJob
from rainier_queue.queue import Reservation
from rainier_queue.worker.leases import Lease
from rainier_queue.worker.slots import Slot, Slots


def slot(n: int) -> Slot:
    job = QueuedJob.create("noop", {"n": n})
    reservation = Reservation(job=job, token=f"t{n}", lease_until=None, lease=None)
    return Slot(reservation=reservation, lease=Lease(reservation=reservation, interval=None))


class Started:
    """The `start` callback: remembers which slots were started, in order."""

    def __init__(self) -> None:
        self.slots: list[Slot] = []

    def __call__(self, slot: Slot) -> None:
        self.slots.append(slot)

    @property
    def tokens(self) -> list[str]:
        return [s.reservation.token for s in self.slots]


@pytest.fixture
def started() -> Started:
    return Started()


def test_no_more_handlers_than_concurrency_and_held_jobs_start_oldest_first(
    started: Started,
) -> None:
    slots = Slots(2, started)
    taken = [slot(n) for n in range(4)]
    for s in taken:
        slots.take(s)
    assert started.tokens == ["t0", "t1"]
    assert slots.handling == 2
    assert [s.reservation.token for s in slots.held] == ["t2", "t3"]
    slots.handler_returned()  # t0's handler returned
    assert started.tokens == ["t0", "t1", "t2"]
    assert slots.handling == 2
    assert len(slots) == 4  # t0 is still held until its result is recorded


def test_held_jobs_wait_while_too_many_results_are_unrecorded(started: Started) -> None:
    slots = Slots(1, started)
    first, second, third = slot(1), slot(2), slot(3)
    for s in (first, second, third):
        slots.take(s)
    slots.handler_returned()  # first returned; its result is on its way
    assert started.tokens == ["t1", "t2"]
    slots.handler_returned()  # second returned too: two results unrecorded, cap is 2 x 1
    assert started.tokens == ["t1", "t2"]
    assert slots.handling == 0
    assert slots.free() <= 0  # nothing more may be reserved either
    slots.finished(first)  # one result recorded: the held job may start
    assert started.tokens == ["t1", "t2", "t3"]


def test_free_counts_reserving_ahead_the_max_jobs_limit_and_reserves_on_their_way(
    started: Started,
) -> None:
    slots = Slots(4, started)
    assert slots.free() == 4
    assert slots.free(ahead=4) == 8
    assert slots.free(limit=3) == 3
    slots.requested = 2
    assert slots.free() == 2
    slots.requested = 0
    slots.take(slot(1))
    assert slots.free() == 3
    assert slots.free(limit=3) == 2


def test_a_stop_hands_back_every_held_job_and_every_later_one_that_finds_no_slot(
    started: Started,
) -> None:
    slots = Slots(1, started)
    running, held = slot(1), slot(2)
    slots.take(running)
    slots.take(held)
    slots.stop()
    assert started.tokens == ["t1", "t2"]
    assert not running.control.is_interrupted()
    assert held.control.is_interrupted()  # started only to be handed back
    late = slot(3)
    slots.take(late)  # a reserve that was on its way when the stop came
    assert late.control.is_interrupted()
    assert started.tokens == ["t1", "t2", "t3"]


def test_a_paused_queue_s_held_jobs_go_back_unstarted_and_the_others_keep_their_order(
    started: Started,
) -> None:
    slots = Slots(1, started)
    on = {0: "other", 1: "held", 2: "other", 3: "held"}
    for n, queue in on.items():
        job = QueuedJob.create("noop", {"n": n}, queue=queue)
        reservation = Reservation(job=job, token=f"t{n}", lease_until=None, lease=None)
        slots.take(
            Slot(reservation=reservation, lease=Lease(reservation=reservation, interval=None))
        )

    returned = slots.hand_back_held(frozenset({"held"}))

    assert returned == 2
    assert started.tokens == ["t0", "t1", "t3"], "t1 and t3 launched only to be handed back"
    assert [s.control.is_interrupted() for s in started.slots] == [False, True, True]
    assert [s.reservation.token for s in slots.held] == ["t2"], "still waiting for its slot"
