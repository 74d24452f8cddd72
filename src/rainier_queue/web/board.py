# SPDX-License-Identifier: MIT
"""What one dashboard is built over: a manager's connection, its queues, and its settings.

Why a value of its own: every page and action needs the same few things
(the queue port of the connection shown, which queues to list, whether
actions are allowed, the scheduler if there is one, the depth history),
and they are decided once, when the app is built, not per request.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..manager import QueueManager
from ..queue import Queue
from ..scheduling import Scheduler
from ..unresolved import UnresolvedQueue
from .history import History
from .security import AuthHook


@dataclass(slots=True, kw_only=True)
class Board:
    manager: QueueManager
    auth: AuthHook
    connection: str | None = None
    """The connection shown (the manager's default one when None)."""
    queues: Sequence[str] = ()
    """Queues always listed, beside those the registry, workers and failed jobs name."""
    scheduler: Scheduler | None = None
    read_only: bool = False
    poll_seconds: float = 5.0
    title: str = "rainier-queue"
    history: History = field(default_factory=History)

    @property
    def queue(self) -> Queue:
        """The connection's queue port; the configuration error if it cannot be opened."""
        queue = self.manager.connection(self.connection)
        if isinstance(queue, UnresolvedQueue):
            raise queue.error()
        return queue

    @property
    def connection_name(self) -> str:
        return self.connection or self.manager.default_connection

    def named_queues(self) -> list[str]:
        """The queues every overview lists, before those found in the store."""
        names = dict.fromkeys(self.queues)
        names.update(dict.fromkeys(self.manager.default_queues()))
        names.update(dict.fromkeys(self.manager.registry.queues()))
        return list(names)


__all__ = ["Board"]
