# SPDX-License-Identifier: MIT
"""Which SQS queue a queue name is: the documented rule, and the failed queue beside it.

SQS takes 1 to 80 letters, digits, `-` and `_` for a queue's name (a FIFO
queue's ends in `.fifo`, within the 80), while a queue name here is any
printable text. So:

- a name that SQS takes as it is, with the connection's `prefix` before it,
  is used as it is: `prefix=app-` and `emails` is the SQS queue `app-emails`;
- any other name (a space, a dot, an accent, too long, or ending in
  `-failed`, which is the failed queues' mark) is written with its other
  characters as `_`, cut short to fit, and ended by `-h` and twelve hex
  digits of its SHA-256, so two names never meet on one SQS queue;
- the failed jobs of every queue of the connection are kept in one failed
  queue, `{prefix}rq-failed` (`.fifo` added on a FIFO connection), where
  each record names its queue; no queue name meets it, since a name ending
  in `-failed` is always written the hashed way;
- on a FIFO connection each queue has a standard *delay queue* beside it
  (`delays.py` says why): the work queue's name without `.fifo`, then
  `-delay` (`app-emails-delay` beside `app-emails.fifo`), or, where that
  passes 80 characters, the name cut short with `-h`, twelve hex digits of
  its SHA-256 and `-delay`. No work queue of the connection meets it (on a
  FIFO connection every work queue ends in `.fifo`), but a *standard*
  connection with the same prefix would put a queue `emails-delay` there:
  give FIFO and standard connections prefixes of their own;
- a name given an explicit URL (the `queue_urls` option) uses that queue,
  and has no delay queue (its delayed jobs are carried in it, as before).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

MAX_NAME = 80
FAILED = "-failed"
FIFO = ".fifo"
DELAY = "-delay"
_PLAIN = re.compile(r"^[A-Za-z0-9_-]+$")
_OTHER = re.compile(r"[^A-Za-z0-9_-]")


class Names:
    """The SQS names (and explicit URLs) of one connection's queues."""

    def __init__(self, prefix: str, *, fifo: bool, urls: Mapping[str, str]) -> None:
        self.prefix = prefix
        self.fifo = fifo
        self.urls = dict(urls)

    def work(self, queue: str) -> str:
        """The SQS queue name that holds `queue`'s jobs."""
        explicit = self.urls.get(queue)
        if explicit is not None:
            return explicit.rstrip("/").rsplit("/", 1)[-1]
        return self._named(self._stem(queue))

    def failed(self) -> str:
        """The SQS queue name that holds the connection's failed jobs."""
        return self._named(self.prefix + "rq" + FAILED)

    def delay(self, queue: str) -> str | None:
        """The standard SQS queue that holds `queue`'s delayed jobs on a FIFO connection, or
        None (a standard connection delays on the queue itself; an explicit URL is carried)."""
        if not self.fifo or queue in self.urls:
            return None
        stem = self._stem(queue)
        if len(stem) + len(DELAY) <= MAX_NAME:
            return stem + DELAY
        digest = "-h" + hashlib.sha256(stem.encode("utf-8")).hexdigest()[:12]
        return stem[: MAX_NAME - len(DELAY) - len(digest)] + digest + DELAY

    def url_of(self, queue: str) -> str | None:
        """The explicit URL given for `queue`, if any."""
        return self.urls.get(queue)

    def _room(self) -> int:
        return MAX_NAME - len(self.prefix) - (len(FIFO) if self.fifo else 0)

    def _stem(self, queue: str) -> str:
        room = self._room()
        if _PLAIN.match(queue) and len(queue) <= room and not queue.endswith(FAILED):
            return self.prefix + queue
        digest = "-h" + hashlib.sha256(queue.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        return self.prefix + _OTHER.sub("_", queue)[: max(0, room - len(digest))] + digest

    def _named(self, stem: str) -> str:
        return stem + FIFO if self.fifo else stem


def check_prefix(value: object) -> str:
    """A prefix begins every SQS queue name: letters, digits, `-` and `_`, at most 40."""
    text = "" if value is None else str(value)
    if not re.match(r"^[A-Za-z0-9_-]{0,40}$", text):
        raise ValueError(
            "the sqs `prefix` begins every SQS queue name, which takes letters, digits, `-` "
            f"and `_`, so it takes at most 40 of those; {text!r} has something else"
        )
    return text


__all__ = ["DELAY", "FAILED", "FIFO", "MAX_NAME", "Names", "check_prefix"]
