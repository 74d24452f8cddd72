# SPDX-License-Identifier: MIT
"""What this connection's driver cannot show or do, in the words the library uses.

Why one place: every page degrades the same way on a driver that cannot
list failed jobs, keep heartbeats, pause a queue or look a job up (a log,
a broker). Each reason is the library's own: the capability flag decides,
and where the library has a refusal for it (`pausable`, `workers`), its
message is shown as it is, so the dashboard and the CLI say the same thing.
"""

from __future__ import annotations

from ..errors import UnsupportedOperation
from ..lookup import lookup_of
from ..queue import FailedJobListing, FailedJobStore, Queue
from ..steering import pausable


def no_failed_listing(queue: Queue) -> str | None:
    """Why failed jobs cannot be listed here; None when they can."""
    if queue.capabilities.failed_listing and isinstance(queue, FailedJobListing):
        return None
    return (
        f"the {queue.describe()} connection keeps no failed jobs, so there is nothing to "
        "list, retry or forget"
    )


def no_failed_store(queue: Queue) -> str | None:
    """Why failed jobs cannot be retried, forgotten or flushed here; None when they can."""
    if queue.capabilities.failed_store and isinstance(queue, FailedJobStore):
        return None
    return no_failed_listing(queue) or (
        f"the {queue.describe()} connection lists its failed jobs but cannot retry, forget or "
        f"flush them: it keeps them where they cannot be changed (see the {queue.name} "
        "driver's documentation); to run one again, dispatch it anew with its payload"
    )


def no_pause(queue: Queue) -> str | None:
    """Why queues cannot be paused here (the manager's own refusal); None when they can."""
    try:
        pausable(queue)
    except UnsupportedOperation as exc:
        return str(exc)
    return None


def no_lookup(queue: Queue) -> str | None:
    """Why a job cannot be found by id in storage here; None when it can."""
    if lookup_of(queue) is not None:
        return None
    return (
        f"the {queue.name} driver cannot look a job up by id (a log or a broker hands "
        "messages out, it does not find them); a job's state is `unknown` unless a worker "
        "recorded its success"
    )


__all__ = ["no_failed_listing", "no_failed_store", "no_lookup", "no_pause"]
