# SPDX-License-Identifier: MIT
"""What a job's AMQP message carries besides its envelope, written and read in one place.

A push and every republish (a release, a tier's next round, a job handed
back at a stop) must write the same properties, and a reserve reads back
the two things the broker or a tier adds: how often it was delivered and
how much of its delay is left. Kept apart from queue.py so that the port's
methods read as what they do, not as header bookkeeping.
"""

from __future__ import annotations

from datetime import timedelta

from aiormq.abc import DeliveredMessage
from pamqp import commands as spec

PERSISTENT = 2
DUE_SLACK = timedelta(milliseconds=5)
"""A job due within this is handed out rather than sent round a delay tier again."""
DUE_IN = "x-rq-due-in"
"""The header of a job on its way through a delay tier: the milliseconds of its delay still
left once that tier has held it. Time in a tier is the server's, so a delay never depends
on the clock of the producer or of the worker (`due_on_server_clock`)."""


def properties(job_id: str, due_in: int | None = None) -> spec.Basic.Properties:
    """A job's message: persistent JSON, its id, and what is left of its delay if any."""
    return spec.Basic.Properties(
        delivery_mode=PERSISTENT,
        content_type="application/json",
        message_id=job_id,
        headers=None if due_in is None else {DUE_IN: due_in},
    )


def due_in(message: DeliveredMessage) -> timedelta:
    """The delay a job has left after the tier it came out of (none for any other message)."""
    left = (message.header.properties.headers or {}).get(DUE_IN, 0)
    return timedelta(milliseconds=left) if isinstance(left, int) and left > 0 else timedelta(0)


def deliveries(message: DeliveredMessage, *, classic: bool = False) -> int:
    """How often the broker delivered this message before: `x-delivery-count` (absent: 0), or
    on a classic queue, which counts nothing, 1 if it is marked redelivered (a channel closed
    with it unsettled), which the reader folds into the job before it runs (queue.py)."""
    if classic:
        return 1 if getattr(message.delivery, "redelivered", False) else 0
    headers = message.header.properties.headers or {}
    count = headers.get("x-delivery-count", 0)
    return count if isinstance(count, int) and count >= 0 else 0


__all__ = ["DUE_IN", "DUE_SLACK", "deliveries", "due_in", "properties"]
