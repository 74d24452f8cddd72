# SPDX-License-Identifier: MIT
"""moto's server, with each SQS call on a queue's messages made atomic, as SQS's are.

Why: moto 5.2 serves each request in a thread of its own and its
`ReceiveMessage` checks that a message is visible, then marks it received,
with nothing held between the two. Two receives at once can both take the
same message, each with a full visibility timeout, so two workers run one
job side by side (`bench.studies.moto_receive_race` shows it on plain
clients, no driver involved). Real SQS never hands out a message under its
visibility timeout; a test that counts runs must not fail for moto's race.

What changes: one lock is held through every call that reads or changes a
queue's messages (receive, send, delete, visibility changes, purge). A long
poll is no longer one call that sleeps inside moto's loop: each pass is a
receive that does not wait, under the lock, and between passes the lock is
let go while the queue's own condition waits (at most a second) for a send.
Everything else (receive counts, redrive, FIFO groups, deduplication) is
moto's own code, unchanged.

And one cost: moto reads the clock through a `datetime` sum for every
message it looks at, and a FIFO send reads the queue's attributes (which
count every message) four times, so a FIFO send cost milliseconds per
message already queued: 300 jobs in 30 calls at once took 11 s on a
machine under some load and 30 s under heavy load, past the 5 s a fault
test allows a call. Its SQS module's clock is read from `time.time()`
here, the same number: the 30 s became 0.65 s. A FIFO send still counts
the queue, so it still grows with the queue's length.

Run as moto's own `moto_server`: `python tests/moto_atomic.py -H 127.0.0.1 -p PORT`.
"""

from __future__ import annotations

import datetime
import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from moto.core.utils import unix_time as _slow_unix_time
from moto.server import main
from moto.sqs import models

_lock = threading.RLock()

PAUSE = 0.02
"""Seconds between passes of a long poll that found messages visible but none to be had."""

ATOMIC = (
    "send_message",
    "send_message_batch",
    "delete_message",
    "delete_message_batch",
    "change_message_visibility",
    "change_message_visibility_batch",
    "purge_queue",
)


def _atomic(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def held(*args: Any, **kwargs: Any) -> Any:
        with _lock:
            return method(*args, **kwargs)

    return held


def _receiving(receive: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(receive)
    def receive_message(
        self: models.SQSBackend,
        queue_name: str,
        count: int,
        wait_seconds_timeout: int,
        visibility_timeout: int,
        message_attribute_names: list[str] | None = None,
    ) -> list[models.Message]:
        end = time.monotonic() + (wait_seconds_timeout or 0)
        while True:
            with _lock:
                got: list[models.Message] = receive(
                    self, queue_name, count, 0, visibility_timeout, message_attribute_names
                )
            left = end - time.monotonic()
            if got or left <= 0:
                return got
            began = time.monotonic()
            self.get_queue(queue_name).wait_for_messages(min(1.0, left))  # type: ignore[arg-type]
            if time.monotonic() - began < PAUSE:  # visible but not to be had (a FIFO group held)
                time.sleep(PAUSE)

    return receive_message


def _unix_time(dt: datetime.datetime | None = None) -> float:
    return time.time() if dt is None else _slow_unix_time(dt)


def _unix_time_millis(dt: datetime.datetime | None = None) -> float:
    return _unix_time(dt) * 1000.0


def patch() -> None:
    """Make moto's SQS backend's message calls atomic, its clock cheap (idempotent)."""
    backend = models.SQSBackend
    if getattr(backend, "_rainier_atomic", False):
        return
    models.unix_time = _unix_time  # type: ignore[attr-defined]
    models.unix_time_millis = _unix_time_millis  # type: ignore[attr-defined]
    for name in ATOMIC:
        if hasattr(backend, name):
            setattr(backend, name, _atomic(getattr(backend, name)))
    backend.receive_message = _receiving(backend.receive_message)  # type: ignore[method-assign]
    backend._rainier_atomic = True  # type: ignore[attr-defined]


if __name__ == "__main__":
    patch()
    main()
