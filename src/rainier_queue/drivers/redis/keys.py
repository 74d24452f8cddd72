# SPDX-License-Identifier: MIT
"""Where a queue's data lives in Redis: one hash-tagged key family per queue.

Every key of one queue shares the hash tag `{<encoded name>}`, so on a
cluster the whole queue (stream, delayed set, lease and delivery hashes,
failed list) sits on one slot and each Lua script touches a single slot.
Queue names are percent-encoded before they become part of a key, so a
name with `{`, `}`, `*`, `?`, `[`, `:` or spaces can neither break the hash
tag nor be read as a pattern.

A queue that holds jobs with an ordering key has three keys more, in the
same slot (`ordering.py`): the key that each ordering key's running or next
job holds, the later jobs of every key in one line, and their bodies.

Namespace-wide keys (the wake-up list, the dataset marker, the set of
queues that have failed jobs) are hash-tagged `{_}`: they live on a slot
of their own and are only ever used with single-key commands.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import quote, unquote

DEFAULT_PREFIX = "rq:"
GROUP = "workers"
"""The one consumer group per stream: workers share its entries, not fan out."""


def check_prefix(given: object) -> str:
    """A prefix may not carry a hash tag of its own (it would pin every queue to one slot)."""
    prefix = str(given)
    if "{" in prefix or "}" in prefix:
        raise ValueError(f"a Redis key prefix may not contain `{{` or `}}`: {prefix!r}")
    return prefix


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """The keys of one queue."""

    stream: str
    delayed: str
    leases: str
    """Entry id -> the token of its current delivery."""
    deliveries: str
    """Entry id -> how many times the entry was delivered."""
    cursor: str
    """Where the next XAUTOCLAIM scan of the pending list starts."""
    failed: str
    heads: str
    """Ordering key -> the id of the one job of that key that is out of the line: waiting in
    the stream, delayed (a retry's backoff) or running. The key's later jobs wait for it."""
    line: str
    """The later jobs of every ordering key, one sorted set read by range of key: members
    `<length of key>:<key>:<sequence>`, all scored 0, so a key's jobs sort in push order."""
    held: str
    """Line member -> the held job: `<due ms>|<length of id>|<id><body>`."""
    sequence: str
    """A counter that numbers the line's members."""

    def all(self) -> list[str]:
        return [
            self.stream,
            self.delayed,
            self.leases,
            self.deliveries,
            self.cursor,
            self.failed,
            self.heads,
            self.line,
            self.held,
            self.sequence,
        ]

    @property
    def ordered_acknowledge_keys(self) -> list[str]:
        """The keys of `ordered_scripts.ACKNOWLEDGE`, in its order."""
        return [
            self.stream,
            self.leases,
            self.deliveries,
            self.delayed,
            self.heads,
            self.line,
            self.held,
        ]

    @property
    def ordered_keys(self) -> list[str]:
        """The keys a script that moves a key's line touches beyond its own, in this order."""
        return [self.heads, self.line, self.held, self.sequence]

    @property
    def reserve_keys(self) -> list[str]:
        """The keys the reserve script touches, in the order it takes them."""
        return [self.stream, self.delayed, self.leases, self.deliveries, self.cursor]


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names for one namespace (prefix)."""

    prefix: str = DEFAULT_PREFIX

    def queue(self, name: str) -> QueueKeys:
        return _queue_keys(self.prefix, name)

    @property
    def wake(self) -> str:
        """A list a push appends a token to; idle workers BLPOP it."""
        return f"{self.prefix}{{_}}:wake"

    @property
    def marker(self) -> str:
        """Holds a random epoch; gone means the dataset under us was wiped."""
        return f"{self.prefix}{{_}}:epoch"

    @property
    def failed_queues(self) -> str:
        """The names of the queues that have (or had) failed jobs."""
        return f"{self.prefix}{{_}}:failed-queues"

    @property
    def paused(self) -> str:
        """The names of the paused queues (`rainier-queue pause`)."""
        return f"{self.prefix}{{_}}:paused"

    @staticmethod
    def decode_queue(encoded: str) -> str:
        return unquote(encoded)


@functools.lru_cache(maxsize=1024)
def _queue_keys(prefix: str, name: str) -> QueueKeys:
    """One queue's keys; made once per name, since every call to Redis needs them."""
    base = f"{prefix}{{{quote(name, safe='')}}}:"
    return QueueKeys(
        stream=base + "stream",
        delayed=base + "delayed",
        leases=base + "leases",
        deliveries=base + "deliveries",
        cursor=base + "cursor",
        failed=base + "failed",
        heads=base + "ordered:heads",
        line=base + "ordered:line",
        held=base + "ordered:held",
        sequence=base + "ordered:sequence",
    )


__all__ = ["DEFAULT_PREFIX", "GROUP", "Keys", "QueueKeys", "check_prefix"]
