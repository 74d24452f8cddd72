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
And a FIFO message group is held only by messages still in flight, as on
SQS: moto 5.2 counts a group held by every message it handed out that has
not been received again since, so when several messages of one group lapse
together (one receive brought them, and their worker died), its receive
passes over the first, still counted as holding the group, frees it as it
goes, and hands out the *last* first: a key's jobs ran out of order
(tests/faults/test_ordering.py, a worker killed mid-job, on `sqs_fifo`).
Each receive first lets go of the messages whose visibility timeout ended,
so the group's head comes back first. Everything else (receive counts,
redrive, deduplication) is moto's own code, unchanged.

The tests' server also takes tests/moto_fast.py's four repairs of moto's
cost a call (none of them changes an answer).

Run as moto's own `moto_server`: `python tests/moto_atomic.py -H 127.0.0.1 -p PORT`.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

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


def _let_lapsed_go(queue: Any) -> None:
    """Messages whose visibility timeout ended hold their FIFO group no longer (SQS's rule)."""
    pending = queue.pending_messages
    for message in [m for m in pending if m.visible]:
        pending.discard(message)


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
                _let_lapsed_go(self.get_queue(queue_name))
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


def patch() -> None:
    """Make moto's SQS backend's message calls atomic (idempotent)."""
    backend = models.SQSBackend
    if getattr(backend, "_rainier_atomic", False):
        return
    for name in ATOMIC:
        if hasattr(backend, name):
            setattr(backend, name, _atomic(getattr(backend, name)))
    backend.receive_message = _receiving(backend.receive_message)  # type: ignore[method-assign]
    backend._rainier_atomic = True  # type: ignore[attr-defined]


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests import moto_fast

    patch()
    moto_fast.patch()  # calls whose cost does not climb with the queue as moto's own did
    main()
