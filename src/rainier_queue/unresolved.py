# SPDX-License-Identifier: MIT
"""A declared connection whose `${NAME}` variables are not set: kept, and refused only when used.

A web process that pushes only to PostgreSQL should not need the Redis
password the same config file names for another connection. So a missing
variable in one connection's table no longer stops the whole file from
loading: the connection is built as this stand-in, which refuses every use
with the message that names the variable and the file. Asking for the
connection (`QueueConfig.open`, or the CLI's `--connection`) says so at
once; a manager built over the config refuses a dispatch to it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar, NoReturn

from .envelope import QueuedJob
from .errors import ConfigurationError
from .queue import Capabilities, Queue, Reservation


class UnresolvedQueue(Queue):
    """The queue of a connection that cannot be opened in this process; every call refuses."""

    name: ClassVar[str] = "unresolved"
    capabilities: ClassVar[Capabilities] = Capabilities(
        survives_restart=False, shared_between_processes=False
    )

    def __init__(self, connection: str, message: str) -> None:
        self.connection = connection
        self.message = message

    def error(self) -> ConfigurationError:
        """The refusal: the connection's name and the variables it needs."""
        return ConfigurationError(f"queue connection `{self.connection}`: {self.message}")

    def _refuse(self) -> NoReturn:
        raise self.error()

    async def push(self, job: QueuedJob) -> str:
        self._refuse()

    async def reserve(self, queue: str, *, limit: int = 1) -> list[Reservation]:
        self._refuse()

    async def acknowledge(self, reservation: Reservation) -> None:
        self._refuse()

    async def release(
        self,
        reservation: Reservation,
        *,
        delay: timedelta = timedelta(0),
        count_attempt: bool = True,
    ) -> None:
        self._refuse()

    async def fail(self, reservation: Reservation, error: str) -> None:
        self._refuse()

    async def size(self, queue: str) -> int:
        self._refuse()

    async def clear(self, queue: str) -> int:
        self._refuse()

    def describe(self) -> str:
        return "not opened (its environment variables are not set)"


__all__ = ["UnresolvedQueue"]
