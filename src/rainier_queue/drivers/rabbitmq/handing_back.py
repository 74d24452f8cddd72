# SPDX-License-Identifier: MIT
"""What a stopping worker gives back: the jobs the broker pushed to it that it never started.

A worker's consumer is sent jobs ahead of its free slots. When it stops,
closing the channel would put them back too, but RabbitMQ counts that as a
delivery of each, and a job never started would lose one of its tries (and
with one try, be failed unrun). So each is republished as it came, with
the deliveries it had before folded in, and then all are acknowledged.
The consumers are cancelled first, once nothing can be on its way to them
(consuming.py, `Consumer.stop`), so nothing arrives after this has run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta

from ...envelope import QueuedJob
from ...envelope.reading import read_envelope
from .consuming import Consumer
from .messages import deliveries, due_in

Publish = Callable[[QueuedJob, bytes | None, timedelta], Awaitable[None]]
"""Publish a job (as these bytes, when given) due after this delay."""


async def give_back(consumer: Consumer, publish: Publish, *, classic: bool) -> None:
    """Republish what was pushed to `consumer` and nobody took, then acknowledge it all.

    The acknowledgement is one `multiple=True` frame, not one per job: of a
    burst of single acknowledgements written just before the channel
    closed, RabbitMQ 3.10 lost some on a quorum queue, whose jobs came back
    counted beside their copies (4 closes in 30, 24 to 67 of 100 jobs; none
    with one frame, nor with 0.5 s between the last acknowledgement and the
    close: bench/studies/amqp_cancel_race.py). A crash part way leaves a job
    twice, never nowhere: the copy, and the original the closed channel
    puts back.
    """
    published: list[int] = []
    try:
        for message in consumer.leftovers():
            before = deliveries(message, classic=classic)
            read = read_envelope(message.body, delivered=before)
            if isinstance(read, QueuedJob):
                await publish(read, message.body if before == 0 else None, due_in(message))
            published.append(int(message.delivery_tag or 0))
    finally:
        if published:
            await consumer.ack(published)


__all__ = ["give_back"]
