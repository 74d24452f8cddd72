# SPDX-License-Identifier: MIT
"""moto's SQS calls without four of its own costs, most growing with the queue; answers unchanged.

Why: a receive on moto 5.2 cost about as much as reading every message of
the queue some ninety times over, so a backlog of thousands of messages
took seconds a receive (bench/studies/moto_queue_cost.py measures it), and
a test that drains 20,000 jobs would take hours (a send, too, took 50 ms
at 2,000). SQS's cost a call does not grow with the queue. Four things in moto
make it so or make each walk dear, and none is in what a call answers:

- checking a received message against the queue's retention period reads
  the period through `get_queue_attributes`, which builds every attribute
  of the queue, the approximate counts among them (a walk over every
  message each), three times for one number; here it reads the queue's own
  `message_retention_period`, the number those walks return beside;
- a send reads whether the queue deduplicates by content through the same
  every-attribute build, up to four times, and a batch twice more for each
  of its messages before sending (on a FIFO queue some eighteen walks of
  the queue for one message); here, while a send is under way in a
  request's thread, the three counts build as 0 for that thread alone (the
  send reads only that one attribute, and no answer carries them);
- building the attributes turns each attribute's name into a Python one
  (`camelcase_to_underscores`, some 0.1 ms each, eighteen names a build);
  here each name's answer is kept after its first;
- moto's clock (`unix_time`, `unix_time_millis`), asked twice for each
  message a walk looks at, builds two datetimes to subtract them; here it
  is `time.time()`, the same seconds since the epoch.

What stays: every walk over a queue's messages that moto makes to answer
(visibility, delays, FIFO groups, deletes by receipt handle), so a call
still costs in proportion to the queue, only with a far smaller factor.

Applied by tests/moto_atomic.py when it serves the tests.
"""

from __future__ import annotations

import datetime
import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from moto.core import utils
from moto.sqs import models

_unix_time = utils.unix_time


def unix_time(dt: datetime.datetime | None = None) -> float:
    """Seconds since the epoch, as moto's own, without a datetime when none is given."""
    return time.time() if dt is None else _unix_time(dt)


def unix_time_millis(dt: datetime.datetime | None = None) -> float:
    return unix_time(dt) * 1000.0


def _within_retention(self: models.SQSBackend, queue_name: str, message: models.Message) -> bool:
    """moto's own test, the period read off the queue rather than out of all its attributes."""
    period = int(self.get_queue(queue_name).message_retention_period)  # type: ignore[attr-defined]
    return period + message.sent_timestamp / 1000 > unix_time()  # type: ignore[operator]


_sending = threading.local()

COUNTS = (
    "approximate_number_of_messages",
    "approximate_number_of_messages_delayed",
    "approximate_number_of_messages_not_visible",
)


def _uncounted_while_sending(count: property) -> property:
    def counted(queue: models.Queue) -> int:
        return 0 if getattr(_sending, "now", False) else int(count.fget(queue))  # type: ignore[misc]

    return property(counted)


def _sending_flagged(send: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(send)
    def sending(*args: Any, **kwargs: Any) -> Any:
        before = getattr(_sending, "now", False)  # a batch's sends run inside its own
        _sending.now = True
        try:
            return send(*args, **kwargs)
        finally:
            _sending.now = before

    return sending


def patch() -> None:
    """Apply the four (idempotent)."""
    if getattr(models.SQSBackend, "_rainier_fast", False):
        return
    for name in COUNTS:
        setattr(models.Queue, name, _uncounted_while_sending(getattr(models.Queue, name)))
    for name in ("send_message", "send_message_batch"):
        setattr(models.SQSBackend, name, _sending_flagged(getattr(models.SQSBackend, name)))
    models.camelcase_to_underscores = functools.cache(models.camelcase_to_underscores)  # type: ignore[attr-defined]
    models.unix_time = unix_time  # type: ignore[attr-defined]
    models.unix_time_millis = unix_time_millis  # type: ignore[attr-defined]
    models.SQSBackend.is_message_valid_based_on_retention_period = _within_retention  # type: ignore[method-assign]
    models.SQSBackend._rainier_fast = True  # type: ignore[attr-defined]
