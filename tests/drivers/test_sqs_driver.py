# SPDX-License-Identifier: MIT
"""What only the SQS driver has, against moto in server mode (tests/moto_server.py).

Pins the upstream SQS checklist's live items (a push returns the job id, a
reserve hands the job out with its attempt and a readable handle, an
acknowledge works, a job not reserved here cannot be acknowledged, the body
is the envelope) and the issue's: the 256 KiB limit, raw bodies, FIFO
deduplication, carried delays, the 12-hour renewal limit, the purge limit,
and a cancelled wait that strands nothing.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

pytest.importorskip("aiobotocore")

from rainier_queue.drivers.sqs import SQSQueue, delays
from rainier_queue.drivers.sqs.leases import Delivery
from rainier_queue.errors import (
    BrokerRejected,
    BrokerUnavailable,
    LeaseLost,
    NotProvisioned,
    PayloadError,
    UnsupportedOperation,
)
from rainier_queue.job import ORDERING_KEY
from rainier_queue.queue import QueueCounts, Reservation

from ..contract.jobs import a_job, reserve_eventually, reserve_one
from ..worker.jobs import eventually
from .conftest import SQSOpener as Opener


async def provisioned(queue: SQSQueue, *queues: str) -> SQSQueue:
    await queue.provision(list(queues) or ["default"])
    return queue


async def test_a_live_round_trip_returns_the_job_id_counts_the_attempt_and_acknowledges(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs())
    job = a_job(payload={"n": 1})

    assert await queue.push(job) == job.id, "the job's id, never SQS's message id"
    reservation = await reserve_one(queue)

    assert reservation.job.id == job.id
    assert reservation.job.attempts >= 1
    assert isinstance(reservation.handle, Delivery)
    assert reservation.handle.receipt, "the receipt handle is readable on the reservation"
    assert reservation.handle.body == job.to_json(), "the body is the envelope, nothing else"
    await queue.acknowledge(reservation)
    assert await queue.size("default") == 0


async def test_a_job_not_reserved_from_this_queue_cannot_be_acknowledged(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs())
    stranger = Reservation(job=a_job(), token="not-ours", lease_until=None, lease=None)

    with pytest.raises(LeaseLost, match="not reserved from this queue"):
        await queue.acknowledge(stranger)


async def test_a_body_over_the_limit_is_a_payload_error_naming_size_and_limit(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs())
    big = a_job(payload="x" * (256 * 1024))

    with pytest.raises(PayloadError, match=r"\d+ bytes as JSON, over the 262144 bytes"):
        await queue.push(big)
    with pytest.raises(PayloadError, match="262144"):
        await queue.push_many([a_job(), big])
    assert await queue.size("default") == 0, "nothing was sent"


async def test_a_raw_push_sends_the_bare_body_which_a_reserve_then_quarantines(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs())

    await queue.push_raw("default", "plain text for another consumer")

    assert await queue.reserve("default") == []
    [failed] = await queue.failed_jobs()
    assert (
        failed.job.payload == {"raw": "plain text for another consumer"} or "JSON" in failed.error
    )
    assert await queue.size("default") == 0


async def test_a_push_to_a_queue_never_provisioned_is_refused_naming_the_command(
    open_sqs: Opener,
) -> None:
    queue = open_sqs()

    with pytest.raises(NotProvisioned, match="rainier-queue provision --queue default"):
        await queue.push(a_job())


async def test_on_a_fifo_queue_a_push_repeated_with_the_same_job_is_stored_once(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs(fifo=True))
    job = a_job()

    await queue.push(job)
    await queue.push(job)  # as after an OutcomeUnknown

    got = await queue.reserve("default", limit=10)
    assert [r.job.id for r in got] == [job.id]
    assert await queue.reserve("default", limit=10) == []


async def test_a_carried_delay_is_held_until_due_and_its_early_receive_is_no_attempt(
    open_sqs: Opener,
) -> None:
    # A job with an ordering key stays in its key's message group on a FIFO queue, which
    # takes no per-message delay: its delay is carried (delays.py says why).
    queue = await provisioned(open_sqs(fifo=True))
    made = time.monotonic()
    await queue.push(a_job(delay=timedelta(seconds=2), headers={ORDERING_KEY: "k"}))

    early = await queue.reserve("default")
    if time.monotonic() - made < 2:
        assert early == [], "received early, it is hidden until due"
    reservation = early[0] if early else await reserve_eventually(queue)

    assert reservation.job.attempts == 1
    assert queue._connection.calls["change_message_visibility_batch"] >= (0 if early else 1)


async def test_on_a_fifo_queue_a_delayed_job_waits_in_its_delay_queue_counted_as_delayed(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs(fifo=True))
    made = time.monotonic()
    await queue.push(job := a_job(delay=timedelta(seconds=2)))

    counts = await queue.counts("default")
    early = await queue.reserve("default")

    if time.monotonic() - made < 2:
        assert (counts.waiting, counts.delayed, counts.reserved) == (0, 1, 0)
        assert early == []
    reservation = early[0] if early else await reserve_eventually(queue)
    assert reservation.job.id == job.id
    assert reservation.job.attempts == 1, "its move to the FIFO queue was no attempt"
    await queue.acknowledge(reservation)
    assert await queue.counts("default") == QueueCounts(waiting=0, delayed=0, reserved=0)


async def test_on_a_fifo_queue_a_delay_past_fifteen_minutes_is_carried_in_the_delay_queue(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs(fifo=True))
    await queue.push(a_job(delay=timedelta(hours=2)))

    counts = await queue.counts("default")

    assert (counts.waiting, counts.delayed) == (0, 1), "held by SQS for its first 900 s"
    assert await queue.reserve("default") == []


async def test_a_job_released_with_a_delay_on_fifo_comes_back_under_a_fresh_deduplication_id(
    open_sqs: Opener,
) -> None:
    """Pushed under its id, and moved back within SQS's 5 minutes of deduplication: the
    move must not be dropped as a repeat of the push."""
    queue = await provisioned(open_sqs(fifo=True))
    await queue.push(job := a_job())
    first = await reserve_one(queue)

    await queue.release(first, delay=timedelta(seconds=1))

    counts = await queue.counts("default")
    assert (counts.delayed, counts.reserved) == (1, 0), "delayed, in the delay queue"
    again = await reserve_eventually(queue)
    assert again.job.id == job.id
    assert again.job.attempts == 2


async def test_a_move_repeated_after_a_crash_between_its_send_and_delete_is_one_job(
    open_sqs: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The move sends to the FIFO queue first, then deletes from the delay queue: a mover
    that dies between the two leaves the message to be moved again, under the same
    deduplication id, which SQS drops as a repeat. The job is neither lost nor doubled."""
    monkeypatch.setattr(delays, "MOVE_LEASE", 1)  # the dead mover's message back in 1 s
    queue = await provisioned(open_sqs(fifo=True))
    await queue.push(job := a_job(delay=timedelta(seconds=1)))
    await asyncio.sleep(1.2)
    real = queue._connection.call

    async def dies_before_the_delete(operation: str, what: str, **args: Any) -> Any:
        if operation == "delete_message_batch" and "delay queue" in what:
            raise BrokerUnavailable("the mover died here")
        return await real(operation, what, **args)

    monkeypatch.setattr(queue._connection, "call", dies_before_the_delete)
    with pytest.raises(BrokerUnavailable):
        await queue._mover.move("default", 0)
    monkeypatch.setattr(queue._connection, "call", real)
    await asyncio.sleep(1.2)  # the delay queue shows the message again
    assert await queue._mover.move("default", 0) == 1, "moved again"

    got = await queue.reserve("default", limit=10)
    assert [r.job.id for r in got] == [job.id]
    await queue.acknowledge(got[0])
    assert await queue.counts("default") == QueueCounts(waiting=0, delayed=0, reserved=0)
    assert await queue.reserve("default", limit=10) == [], "the second move was no second job"


async def test_clearing_a_fifo_queue_empties_its_delay_queue_too(open_sqs: Opener) -> None:
    queue = await provisioned(open_sqs(fifo=True))
    await queue.push(a_job())
    await queue.push(a_job(delay=timedelta(minutes=5)))

    assert await queue.clear("default") == 2

    assert await queue.counts("default") == QueueCounts(waiting=0, delayed=0, reserved=0)


async def test_an_idle_wait_hands_out_the_job_a_settle_let_go_from_behind_its_key(
    open_sqs: Opener,
) -> None:
    """One receive brought both jobs of a key; the second waits in this process, holding its
    message group, so no poll of SQS can bring it: the settle of the first ends the wait."""
    queue = await provisioned(open_sqs(fifo=True))
    await queue.push_many([a_job(payload=n, headers={ORDERING_KEY: "k"}) for n in (1, 2)])
    [first] = await queue.reserve("default", limit=10)
    assert first.job.payload == 1
    waiting = asyncio.create_task(queue.wait_and_reserve("default", timedelta(seconds=5), limit=5))
    await asyncio.sleep(0.2)  # the wait is under way

    await queue.acknowledge(first)

    [second] = await waiting
    assert second.job.payload == 2
    assert second.job.attempts == 1


async def test_a_standard_queue_refuses_a_job_with_an_ordering_key_naming_fifo(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs())

    with pytest.raises(UnsupportedOperation, match="fifo=true"):
        await queue.push(a_job(headers={ORDERING_KEY: "account-1"}))
    assert await queue.size("default") == 0


async def test_a_delay_beyond_fifteen_minutes_is_carried_on_a_standard_queue(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs())
    await queue.push(a_job(delay=timedelta(hours=2)))

    counts = await queue.counts("default")

    assert (counts.waiting, counts.delayed) == (0, 1), "held by SQS for its first 900 s"
    assert await queue.reserve("default") == []


async def test_a_renewal_past_twelve_hours_from_the_receipt_is_refused(
    open_sqs: Opener,
) -> None:
    queue = await provisioned(open_sqs())
    await queue.push(a_job())
    reservation = await reserve_one(queue)
    await queue.renew(reservation)  # within the 12 hours: fine
    assert isinstance(reservation.handle, Delivery)
    reservation.handle.sent -= 12 * 3600  # as if received 12 hours ago
    reservation.handle.deadline = time.monotonic() + 60

    with pytest.raises(LeaseLost, match="12 hours"):
        await queue.renew(reservation)


async def test_clearing_twice_within_a_minute_explains_sqs_purge_limit(open_sqs: Opener) -> None:
    queue = await provisioned(open_sqs())
    await queue.push_many([a_job() for _ in range(3)])
    assert await queue.clear("default") == 3
    await queue.push(a_job())

    with pytest.raises(BrokerRejected, match="once per queue every 60 seconds|60 seconds"):
        await queue.clear("default")


async def test_a_cancelled_wait_strands_nothing_and_spends_no_attempt(open_sqs: Opener) -> None:
    queue = await provisioned(open_sqs())
    pusher = open_sqs()
    waiting = asyncio.create_task(queue.wait_and_reserve("default", timedelta(seconds=5), limit=5))
    await asyncio.sleep(0.3)  # the long poll is under way

    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await pusher.push(a_job(payload="after the stop"))

    # Whatever the abandoned poll received is handed out by the next reserve, not hidden.
    got = await reserve_eventually(queue)
    assert got.job.payload == "after the stop"
    assert got.job.attempts == 1


async def test_a_job_a_given_up_wait_received_counts_as_waiting_here_not_as_running(
    open_sqs: Opener,
) -> None:
    """SQS counts it in flight; a draining worker that took it for a job running elsewhere,
    due back when its lease ends, stopped and handed it back unrun (seen in the tracing test)."""
    queue = await provisioned(open_sqs())
    pusher = open_sqs()
    waiting = asyncio.create_task(queue.wait_and_reserve("default", timedelta(seconds=5), limit=1))
    await eventually(lambda: queue._receiver.polling("default"), "the long poll is under way")
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await pusher.push(job := a_job())
    await eventually(lambda: not queue._receiver.polling("default"), "the given-up poll ended")

    counts = await queue.counts("default")

    assert (counts.waiting, counts.reserved) == (1, 0)
    [got] = await queue.reserve("default")
    assert got.job.id == job.id


async def test_an_idle_wait_of_one_second_asks_sqs_and_finds_the_waiting_job(
    open_sqs: Opener,
) -> None:
    """A worker's default idle wait is 1 s: it must poll, not come back empty at once (a
    worker whose reserve had raced its own release spun so, never receiving the job)."""
    queue = await provisioned(open_sqs())
    await queue.push(job := a_job())

    got = await queue.wait_and_reserve("default", timedelta(seconds=1), limit=1)

    assert [r.job.id for r in got] == [job.id]
    await queue.acknowledge(got[0])
    await queue.push(second := a_job())
    await queue.wait_for_work(["default"], timedelta(seconds=1))
    [kept] = await queue.reserve("default", limit=1)
    assert kept.job.id == second.id, "the wait received it and kept it for the reserve"


async def test_every_call_is_counted_so_a_bench_can_price_a_job(open_sqs: Opener) -> None:
    queue = await provisioned(open_sqs())
    before = queue.api_calls

    await queue.push_many([a_job() for _ in range(20)])
    got = await queue.reserve("default", limit=20)
    await queue.acknowledge_many(got)

    # two batches of ten to send, two receives, two batches of ten to delete
    assert len(got) == 20
    assert queue.api_calls - before == 6


async def test_doctor_finds_a_missing_queue_its_failed_queue_and_a_visibility_off_the_lease(
    open_sqs: Opener,
) -> None:
    queue = open_sqs(lease="30s")

    missing = await queue.check_provisioned(["emails"])
    subjects = sorted(f.subject for f in missing)
    assert len(subjects) == 2
    assert all("does not exist" in f.problem for f in missing)
    assert any("rq-failed" in s for s in subjects), "the failed queue is checked too"

    await queue.provision(["emails"])
    other = open_sqs(lease="90s")  # a worker whose lease differs from the queues' timeout
    findings = await other.check_provisioned(["emails"])
    assert len(findings) == 2, "the queue and the failed queue"
    for finding in findings:
        assert "visibility timeout of 30s" in finding.problem
        assert "90s" in finding.problem
        assert finding.provisioning_fixes
    assert await other.provision(["emails"]), "provisioning sets it"
    assert await other.check_provisioned(["emails"]) == []


async def test_doctor_finds_a_fifo_queue_s_missing_delay_queue_and_provisioning_makes_it(
    open_sqs: Opener,
) -> None:
    queue = open_sqs(fifo=True)

    missing = await queue.check_provisioned(["emails"])

    assert len(missing) == 3, "the queue, the failed queue and the delay queue"
    [delay] = [f for f in missing if "-delay" in f.subject]
    assert delay.queue == "emails"
    assert "delayed jobs" in delay.problem
    assert delay.provisioning_fixes
    assert "NotProvisioned" in delay.fix
    with pytest.raises(NotProvisioned, match="rainier-queue provision --queue emails"):
        await queue.push(a_job(queue="emails", delay=timedelta(seconds=5)))
    made = await queue.provision(["emails"])
    assert any("-delay" in line and "standard" in line for line in made)
    assert await queue.check_provisioned(["emails"]) == []
