# SPDX-License-Identifier: MIT
"""A NATS worker's idle wait: one pull request per wake-up, and no delivery lost to a cancel.

`wait_and_reserve` waits in one pull request on the server (`no_wait` with
`expires`), which the server answers, once a message comes, with what it
has up to the worker's free slots. It used to wait for one message and then
ask for the rest in a second request: a round trip more between a push and
its job starting on an idle worker, the pickup latency `make bench` showed.

A worker cancels that wait whenever it stops waiting (a slot freed, a
stop). Messages that came before the cancel must be kept for the next
reserve: dropped, the server holds each as delivered, nobody runs it, and
after the ack wait it comes back counted as an attempt no handler made
(seen in the thread-overrun fault test: a job's attempts went 1, then 3).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import nats
import pytest
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, RetentionPolicy, StreamConfig

from rainier_queue.connections import open_queue
from rainier_queue.drivers.nats import NATSQueue
from rainier_queue.drivers.nats.connection import NATSConnection
from rainier_queue.drivers.nats.fetching import Fetcher
from rainier_queue.drivers.nats.settings import NATSSettings
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import BrokerUnavailable, OutcomeUnknown

from ..contract.backends import BACKENDS  # first: it imports every backend_*.py in turn

# isort: split
from ..contract.backend_nats import SERVER, _Private, check, cleanup, prepare

assert "nats" in BACKENDS


@pytest.fixture
async def namespace(tmp_path: Path) -> AsyncIterator[str]:
    check()
    name = "rqw" + uuid.uuid4().hex[:10]
    prepare(tmp_path, name, ["default"])
    yield name
    await cleanup(tmp_path, name)


def nats_queue(namespace: str) -> NATSQueue:
    queue = open_queue(f"{SERVER}/?prefix={namespace}")
    assert isinstance(queue, NATSQueue)
    return queue


async def test_a_wait_that_finds_jobs_brings_up_to_its_limit_in_one_request(
    namespace: str,
) -> None:
    queue = nats_queue(namespace)
    try:
        jobs = [QueuedJob.create("noop", {"n": n}) for n in range(3)]
        for job in jobs:
            await queue.push(job)
        fetcher = (await queue._serve("default")).fetcher  # its delay mover's first pass is over
        # Counted where the fetcher sends them, not by a spy subscribed to the API subject:
        # such spies heard nothing twice in CI, once through a whole 20 s wait the server
        # did answer (the dropped-connection test below).
        asked_before = fetcher._count

        got = await queue.wait_and_reserve("default", timedelta(seconds=5), limit=3)

        assert sorted(r.job.id for r in got) == sorted(j.id for j in jobs)
        requests = fetcher._count - asked_before
        assert requests == 1, f"the wait took {requests} pull requests"
        await queue.acknowledge_many(got)
    finally:
        await queue.aclose()


async def test_a_wait_cancelled_after_its_message_came_keeps_it_for_the_next_reserve(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    queue = nats_queue(namespace)
    try:
        job = QueuedJob.create("noop", {})
        jobs = (await queue._serve("default")).fetcher  # not the delay movers' fetchers
        came = asyncio.Event()
        original = Fetcher._arrived

        async def arrived_without_the_end(self: Fetcher, msg: Msg) -> None:
            if self is jobs and msg.headers and "Status" in msg.headers:
                return  # the request's end never comes: the wait holds its message
            await original(self, msg)
            if self is jobs:
                came.set()

        monkeypatch.setattr(Fetcher, "_arrived", arrived_without_the_end)
        waiting = asyncio.create_task(
            queue.wait_and_reserve("default", timedelta(seconds=5), limit=2)
        )
        await queue.push(job)
        await asyncio.wait_for(came.wait(), 10)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        monkeypatch.setattr(Fetcher, "_arrived", original)

        got = await queue.reserve("default")
        assert [r.job.id for r in got] == [job.id], "the delivery the wait brought was dropped"
        assert got[0].job.attempts == 1, "a delivery nobody ran was counted as an attempt"
        await queue.acknowledge(got[0])
    finally:
        await queue.aclose()


async def test_a_wait_the_server_refuses_at_once_waits_on_for_its_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A `no_wait` request meets a 408 at once while other requests wait for messages the
    server has but may not hand out yet; the wait goes on in a plain request, instead of
    coming back empty for its worker to ask again at once, and again."""
    check()
    name = "rqr" + uuid.uuid4().hex[:10]
    subject = f"{name}.jobs"
    other = await nats.connect(SERVER)
    connection = NATSConnection(NATSSettings.read(f"{SERVER}/?prefix={name}", {}, who="test")[0])
    js = other.jetstream()
    try:
        await js.add_stream(
            StreamConfig(name=name, subjects=[subject], retention=RetentionPolicy.WORK_QUEUE)
        )
        # One delivery in flight at most: the second message waits on the server.
        await js.add_consumer(
            name,
            ConsumerConfig(
                durable_name="c",
                ack_policy=AckPolicy.EXPLICIT,
                filter_subject=subject,
                ack_wait=30,
                max_ack_pending=1,
            ),
        )
        await js.publish(subject, b"first")
        await js.publish(subject, b"second")
        fetcher = Fetcher(connection, name, "c")
        [first] = await fetcher.take(1)

        api = f"$JS.API.CONSUMER.MSG.NEXT.{name}.c"
        waits_on = asyncio.Event()
        ask = fetcher._ask

        async def asking(request: dict[str, object]) -> str:
            if "no_wait" not in request:
                waits_on.set()  # a request the server keeps until it expires
            return await ask(request)

        # Seen where the fetcher sends it, not by a spy on the API subject, which heard
        # nothing in CI twice (tests above).
        monkeypatch.setattr(fetcher, "_ask", asking)
        # Another client waits for more than the server has to give (the 408's cause).
        ended = asyncio.Event()

        async def its_end(msg: Msg) -> None:
            ended.set()

        inbox = other.new_inbox()
        await other.subscribe(inbox, cb=its_end)
        await other.publish(api, json.dumps({"batch": 5, "expires": int(1e9)}).encode(), inbox)
        await other.flush()

        waiting = asyncio.create_task(fetcher.wait(20.0))
        kept = asyncio.create_task(waits_on.wait())
        await asyncio.wait([waiting, kept], timeout=10, return_when=asyncio.FIRST_COMPLETED)
        assert not waiting.done(), f"the wait came back at once, with {waiting.result()}"
        assert kept.done(), "the wait sent no request the server keeps"
        await asyncio.wait_for(ended.wait(), 10)  # the other request is gone
        await first.msg.ack()  # the second message may be handed out now

        got = await asyncio.wait_for(waiting, 30)
        assert [a.msg.data for a in got] == [b"second"], "the wait came back without its job"
        await got[0].msg.ack()
        await fetcher.aclose()
    finally:
        await js.delete_stream(name)
        await other.close()
        await connection.aclose()


async def test_a_wait_out_when_the_connection_drops_is_an_outage_not_an_empty_queue(
    tmp_path: Path,
) -> None:
    """The server forgets a pull request whose connection drops. A wait that went on for
    its answer once the client had reconnected returned nothing, so an outage passed by as
    an idle queue (the busy-worker restart fault test on NATS once saw no outage at all)."""
    (tmp_path / "server").mkdir()
    server = _Private(tmp_path / "server", None)
    namespace = "rqw" + uuid.uuid4().hex[:10]
    queue = open_queue(server.url(tmp_path, namespace))
    assert isinstance(queue, NATSQueue)
    try:
        fetcher = (await queue._serve("default")).fetcher
        asked_before = fetcher._count  # the pull requests it has sent
        waiting = asyncio.ensure_future(
            queue.wait_and_reserve("default", timedelta(seconds=20), limit=1)
        )
        # The request is out on the server once the fetcher has sent it and the queue's own
        # connection has been flushed behind it (the server answers the PING after the
        # PUB). Not a spy subscribed to the API subject: CI once saw a spy hear nothing in
        # the whole 20 s wait. A loaded machine can take seconds, so the bound is wide, and
        # a wait that ended first says how it ended instead of timing out.
        for _ in range(3000):
            if fetcher._count > asked_before or waiting.done():
                break
            await asyncio.sleep(0.01)
        if waiting.done():
            pytest.fail(
                f"the wait ended before the crash: {waiting.exception() or waiting.result()}"
            )
        assert fetcher._count > asked_before, "the wait sent no pull request in 30 s"
        await (await queue._connection.client()).flush()
        server.crash()
        server.start()  # same port, same store: the client reconnects on its own

        with pytest.raises(BrokerUnavailable, match="the connection dropped"):
            await asyncio.wait_for(waiting, 15)

        job = QueuedJob.create("noop", {})
        for _ in range(50):  # the worker's backoff: ask again until the client is back
            try:
                await queue.push(job)
                break
            except (BrokerUnavailable, OutcomeUnknown):
                await asyncio.sleep(0.2)
        got = await queue.wait_and_reserve("default", timedelta(seconds=5), limit=1)
        assert [r.job.id for r in got] == [job.id]
        await queue.acknowledge(got[0])
    finally:
        await queue.aclose()
        server.remove()
