# SPDX-License-Identifier: MIT
"""The names of a connection's queues on the broker, and the delivery a reservation holds.

Everything lives under the connection's `prefix`, in three families that no
queue name can make collide, whatever characters it holds:

    {prefix}jobs.{queue}              the work queue (quorum)
    {prefix}delay.{ms}.{queue}        one per delay tier, per queue (quorum, fixed TTL)
    {prefix}failed                    the failed jobs of every queue (quorum)

A queue name is encoded (`encode`): `emails` stays `emails`, `a b` is `a:20b`.
A tier holds its jobs for `ms` milliseconds and then dead-letters them,
through the default exchange, into `{prefix}jobs.{queue}`.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from datetime import timedelta

MAX_NAME_BYTES = 255
"""AMQP 0-9-1's limit on a queue name."""


_PLAIN = frozenset(string.ascii_letters + string.digits + "_-")


def encode(queue: str) -> str:
    """The queue name as the broker sees it: letters, digits, `_` and `-` as they are, every
    other byte of its UTF-8 as `:` and two hex digits (aio-pika's pamqp refuses a queue name
    outside `[A-Za-z0-9_.:-]`, though RabbitMQ itself would take any)."""
    out: list[str] = []
    for char in queue:
        if char in _PLAIN:
            out.append(char)
        else:
            out.extend(f":{byte:02x}" for byte in char.encode("utf-8", "surrogatepass"))
    return "".join(out)


def work_queue(prefix: str, queue: str) -> str:
    return f"{prefix}jobs.{encode(queue)}"


def tier_queue(prefix: str, queue: str, tier: timedelta) -> str:
    return f"{prefix}delay.{milliseconds(tier)}.{encode(queue)}"


def failed_queue(prefix: str) -> str:
    return f"{prefix}failed"


def failed_exchange(prefix: str) -> str:
    """The fanout exchange a work queue dead-letters into (bound to the failed queue)."""
    return f"{prefix}failed"


def milliseconds(tier: timedelta) -> int:
    return max(1, round(tier.total_seconds() * 1000))


def too_long(name: str) -> bool:
    return len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES


@dataclass(frozen=True, slots=True)
class AMQPDelivery:
    """A reservation's handle: which channel delivered the job, and its delivery tag there.

    A delivery tag means something only on the channel that sent it; once that
    channel closes, the broker has put the job back, and the handle is stale.
    """

    channel: int
    """This process's number for the consuming channel (a new one after each reopening)."""
    tag: int
    queue: str


__all__ = [
    "AMQPDelivery",
    "MAX_NAME_BYTES",
    "failed_exchange",
    "failed_queue",
    "milliseconds",
    "tier_queue",
    "too_long",
    "work_queue",
]
