# SPDX-License-Identifier: MIT
"""Encrypted payloads on every driver (docs/encryption.md): rotation, storage, bad seals.

A connection with an `encryption` key ring seals each payload at dispatch
and its workers open them, so the promises are the driver's only in where
the bytes go: what storage holds must not show a payload, a rotation must
leave every job runnable, and a payload that will not open must reach the
failed store, still sealed, with an error naming its key id. A rotation
moves stored jobs to the new key where the driver can change a stored job
(`RewritesStoredJobs`); where it cannot (a log, a broker), the old key
stays in the ring until its jobs drain: both ways are held here.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from rainier_queue import Job, JobContext, JobRegistry, QueueManager
from rainier_queue.context import Dependencies
from rainier_queue.encryption import key_ring_from_config, reencrypt
from rainier_queue.envelope import QueuedJob
from rainier_queue.envelope.sealing import SEALED
from rainier_queue.errors import UnsupportedOperation
from rainier_queue.queue import FailedJobListing, FailedJobStore, Queue, RewritesStoredJobs
from rainier_queue.worker import Worker, WorkerOptions

from .backends import Backend
from .conftest import OpenQueue

KEYS = {kid: base64.urlsafe_b64encode(os.urandom(32)).decode() for kid in ("k1", "k2", "k9")}
"""Fresh keys for this test process: a key text found anywhere it should not be is a leak."""

RUN_WITHIN = 120
"""Seconds a worker run may take on a loaded machine: a liveness bound, not a latency."""


def ring(*ids: str) -> dict[str, Any]:
    """An `encryption` option holding these keys, the last one current."""
    return {"keys": {kid: KEYS[kid] for kid in ids}}


class Ledger:
    def __init__(self) -> None:
        self.ran: list[str] = []


class Note(Job):
    name = "sealed-note"
    text: str

    async def handle(self, ctx: JobContext) -> None:
        ctx.resolve(Ledger).ran.append(self.text)


REGISTRY = JobRegistry([Note])


async def dispatch(queue: Queue, *texts: str, on: str = "default") -> None:
    """Dispatch through a manager over `queue`, as an application does."""
    manager = QueueManager(queue, registry=REGISTRY)
    for text in texts:
        await manager.pending(Note(text=text)).on_queue(on).send()


async def run(queue: Queue, count: int, *, on: str = "default") -> tuple[list[str], int]:
    """Run `count` jobs (processed or failed) from `on`; what ran, and how many failed."""
    ledger = Ledger()
    options = WorkerOptions(queues=(on,), max_jobs=count, concurrency=1)
    worker = Worker(queue, REGISTRY, options, dependencies=Dependencies([ledger]))
    stats = await asyncio.wait_for(worker.run(), RUN_WITHIN)
    return sorted(ledger.ran), stats.failed


def rekeyed(queue: Queue, *ids: str) -> Queue:
    """`queue` given another key ring, as a restart with another `encryption` option would
    (one queue object throughout, so the in-process memory driver keeps its jobs)."""
    queue.payload_keys = key_ring_from_config(ring(*ids))
    return queue


async def test_a_rotation_leaves_every_job_runnable(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> None:
    """Push with key 1, add key 2, workers read both; then reencrypt and drop key 1 where the
    driver can rewrite stored jobs, or drain key 1's jobs first where it cannot."""
    backend.setup(tmp_path, namespace, ["default", "emails", "reports", "keep"])
    queue = open_queue(encryption=ring("k1"))
    await dispatch(queue, "a1")
    rekeyed(queue, "k1", "k2")  # key 2 added, and current
    await dispatch(queue, "b1")
    assert await run(queue, 2) == (["a1", "b1"], 0)  # one ring reads both keys

    await dispatch(rekeyed(queue, "k1"), "a2")  # a producer not yet given the new key
    await dispatch(rekeyed(queue, "k1", "k2"), "b2")
    if not isinstance(queue, RewritesStoredJobs):
        with pytest.raises(UnsupportedOperation, match="keep the older keys in the ring"):
            await reencrypt(queue)
        assert await run(queue, 2) == (["a2", "b2"], 0)  # drained while key 1 is in the ring
        await dispatch(rekeyed(queue, "k2"), "c1")
        assert await run(queue, 1) == (["c1"], 0)
        return

    # Key 1's jobs in every state: failed (a retry after the rotation must open it),
    # delayed, and held by a worker while the rewrite runs.
    old = rekeyed(queue, "k1")
    await dispatch(old, "f1", on="emails")
    later = QueueManager(old, registry=REGISTRY).pending(Note(text="d1")).on_queue("keep")
    await later.delay(timedelta(hours=1)).send()
    await dispatch(old, "h1", on="reports")
    [failed] = await queue.reserve("emails")
    await queue.fail(failed, "failed on purpose")
    [busy] = await queue.reserve("reports")

    done = await reencrypt(rekeyed(queue, "k1", "k2"))
    assert done.failures == []
    # a2, f1, d1 and h1 (b2 has key 2 already), but for a job a worker holds where the
    # driver cannot change it under the worker (Redis): left, counted, and moved later.
    assert done.in_flight in (0, 1)
    assert done.count == sum(done.moved.values()) == 4 - done.in_flight
    assert set(done.moved) == {"k1"}
    await queue.release(busy, count_attempt=False)
    again = await reencrypt(queue)
    assert (again.count, again.in_flight) == (done.in_flight, 0)

    rekeyed(queue, "k2")  # key 1 dropped
    assert await run(queue, 2) == (["a2", "b2"], 0)
    assert await run(queue, 1, on="reports") == (["h1"], 0)
    assert isinstance(queue, FailedJobStore)
    assert await queue.retry_failed(failed.job.id)
    assert await run(queue, 1, on="emails") == (["f1"], 0)
    assert (await reencrypt(queue)).count == 0  # nothing left under another key


@pytest.mark.needs("raw")
async def test_stored_bytes_hold_no_plaintext_payload(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> None:
    assert backend.raw is not None
    backend.setup(tmp_path, namespace, ["default"])
    plain, secret = f"in-the-clear-{uuid.uuid4().hex}", f"sealed-away-{uuid.uuid4().hex}"
    queue = open_queue()
    await dispatch(queue, plain)  # the reader sees what is there...
    await dispatch(rekeyed(queue, "k1"), secret, secret)

    stored = b"\n".join(await backend.raw(tmp_path, namespace, "default"))

    assert plain.encode() in stored
    assert stored.count(SEALED.encode()) >= 2  # ...and the sealed jobs are stored
    assert secret.encode() not in stored
    assert Note.name.encode() in stored  # what a worker routes by stays readable
    assert KEYS["k1"].encode() not in stored


async def bad_seal(
    backend: Backend,
    tmp_path: Path,
    namespace: str,
    open_queue: OpenQueue,
    caplog: pytest.LogCaptureFixture,
    job: QueuedJob,
    says: str,
) -> None:
    """`job` (sealed already) pushed, and run by a worker holding key 1 only: it must go to
    the failed store, still sealed, with an error that says `says`, and no key anywhere."""
    backend.setup(tmp_path, namespace, ["default"])
    queue = open_queue(encryption=ring("k1"))
    await queue.push(job)
    caplog.set_level(logging.DEBUG)
    assert await run(queue, 1) == ([], 1)

    assert isinstance(queue, FailedJobListing)
    [failed] = [f for f in await queue.failed_jobs() if f.job.id == job.id]
    assert says in failed.error
    assert failed.job.payload == job.payload  # kept sealed, to retry once the key is back
    for text in (failed.error, caplog.text, repr(queue), repr(queue.payload_keys)):
        for key in KEYS.values():
            assert key not in text


def sealed(kid: str, text: str = "x") -> QueuedJob:
    """A job sealed with key `kid`."""
    plain = QueuedJob.create(Note.name, {"text": text})
    return key_ring_from_config(ring(kid)).seal(plain)


async def test_a_payload_sealed_with_an_unknown_key_is_failed_naming_the_key_id(
    backend: Backend,
    tmp_path: Path,
    namespace: str,
    open_queue: OpenQueue,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = sealed("k9")
    says = "sealed with key `k9`, which is not in this connection's key ring (`k1`)"
    await bad_seal(backend, tmp_path, namespace, open_queue, caplog, job, says)


async def test_a_tampered_payload_is_failed_naming_the_key_id(
    backend: Backend,
    tmp_path: Path,
    namespace: str,
    open_queue: OpenQueue,
    caplog: pytest.LogCaptureFixture,
) -> None:
    job = sealed("k1")
    data = base64.urlsafe_b64decode(job.payload["data"])
    flipped = data[:-1] + bytes([data[-1] ^ 1])
    tampered = {**job.payload, "data": base64.urlsafe_b64encode(flipped).decode()}
    says = "did not authenticate with key `k1`"
    await bad_seal(
        backend, tmp_path, namespace, open_queue, caplog, job.with_changes(payload=tampered), says
    )


async def test_a_sealed_payload_moved_into_another_job_does_not_open(
    backend: Backend,
    tmp_path: Path,
    namespace: str,
    open_queue: OpenQueue,
    caplog: pytest.LogCaptureFixture,
) -> None:
    other = QueuedJob.create(Note.name, None).with_changes(payload=sealed("k1").payload)
    says = "did not authenticate with key `k1`"
    await bad_seal(backend, tmp_path, namespace, open_queue, caplog, other, says)
