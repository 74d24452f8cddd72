# SPDX-License-Identifier: MIT
"""A broker call cut short by a cancel leaves no connection open.

aiokafka opens sockets inside its calls (a client's start, a lookup's first
request to a broker). A cancel landing between the socket opening and the
client recording it used to leave a connection that nothing closed, and it
surfaced later as a ResourceWarning in whichever test the garbage collector
happened to run in. The cancel is sent after every number of event-loop
turns up to a bound, so one of them lands inside that window.
"""

from __future__ import annotations

import asyncio
import gc
import warnings

from rainier_queue.drivers.kafka.connection import KafkaClients
from rainier_queue.drivers.kafka.settings import KafkaSettings

from ..kafka_broker import KafkaBroker

TURNS = 40
"""Event-loop turns before the cancel, tried one by one: a start takes more than this."""


async def cancelled_after(clients: KafkaClients, turns: int) -> None:
    starting = asyncio.ensure_future(clients.lookups())
    for _ in range(turns):
        await asyncio.sleep(0)
    starting.cancel()
    await asyncio.gather(starting, return_exceptions=True)


async def test_a_start_cancelled_at_any_point_leaves_no_socket_open(tansu: KafkaBroker) -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", ResourceWarning)
        for turns in range(TURNS):
            clients = KafkaClients(KafkaSettings(brokers=(tansu.bootstrap,)))
            await cancelled_after(clients, turns)
            await clients.aclose()
            del clients
            gc.collect()
    unclosed = [str(w.message) for w in seen if issubclass(w.category, ResourceWarning)]
    assert unclosed == []
