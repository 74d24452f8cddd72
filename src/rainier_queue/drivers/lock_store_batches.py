# SPDX-License-Identifier: MIT
"""Batches on a broker with no store of its own: counted in the lock store its connection names.

    sqs://...?locks=redis%3A%2F%2Fcache%3A6379%2F0       (the store's URL, URL-encoded)
    [connections.jobs]  url = "amqp://..."  locks = "postgresql://db/app"

Why an option of the connection, and not the manager's `locks`: a batch's
count must be the one every process that touches the connection reads and
writes (the one that dispatches it opens it, each worker records its jobs
in it, `rainier-queue batch ID` reads it), and the one thing all of them
share is the connection's settings. A manager's `locks` backs unique jobs
for one application's config, may be a store only its process sees, and a
queue opened on its own (a CLI worker, a script) has none. Kafka's
connection names its lock store the same way. So the queue itself tells
the truth: an SQS or RabbitMQ connection with `locks` keeps batches
(`Capabilities.batches`, counted by `CacheBatches`, callbacks at least
once: a second server), one without refuses a batch at dispatch, naming the
option.

The store must be shared: a memory store counts in one process only, and a
batch whose jobs end in another would never finish, so it is refused here,
when the connection is opened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from ..envelope import QueuedJob
from ..errors import ConfigurationError
from ..locks import Cache
from ..queue import Capabilities
from .cached_batches import CacheBatches

if TYPE_CHECKING:
    from . import DriverContext

OPTION = "locks"
"""The connection option naming the lock store batches are counted in."""


def open_lock_store(url: str, context: DriverContext, driver: str) -> Cache:
    """The shared lock store at `url`, opened through `context`; `ConfigurationError`
    naming `locks` for one that cannot be opened here or is not shared."""
    if context.open_cache is None:
        raise ConfigurationError(
            f"the {driver} connection's `{OPTION}` names a lock store to count batches in, "
            "and this context cannot open one: open the queue with "
            "rainier_queue.connections.open_queue (or a QueueConfig), which can"
        )
    cache = context.open_cache(url)
    if not cache.is_shared:
        raise ConfigurationError(
            f"the {driver} connection's `{OPTION}` store, {cache.name}, is seen by this "
            "process alone: a batch whose jobs end in another process would never finish. "
            "Point it at a Redis or database store every process of the connection shares "
            "(redis://..., postgresql://..., mysql://..., or an SQLite file they all reach), "
            f"or drop `{OPTION}` to go without batches"
        )
    return cache


def keeping_batches(capabilities: Capabilities) -> Capabilities:
    """A broker's flags once it has a lock store: batches, their callbacks at least once."""
    return dataclasses.replace(capabilities, batches=True, batch_callbacks_exactly_once=False)


def lock_store_batches(
    cache: Cache | None,
    prefix: str,
    push_many: Callable[[Sequence[QueuedJob]], Awaitable[object]],
) -> CacheBatches | None:
    """The batch store over `cache`, keys under `prefix`; None without a store."""
    return None if cache is None else CacheBatches(cache, prefix, push_many)


__all__ = ["OPTION", "keeping_batches", "lock_store_batches", "open_lock_store"]
