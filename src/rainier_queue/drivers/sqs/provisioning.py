# SPDX-License-Identifier: MIT
"""Each queue's SQS queues, made by `provision`, looked up once and remembered.

A queue here is an SQS queue (its work queue), and the connection's queues
share one failed queue (names.py says which names); on a FIFO connection
each queue also has a delay queue beside it, a standard queue (delays.py).
`provision` creates them with the attributes the driver needs (the
visibility timeout of the connection's lease; FIFO and content-based
deduplication off on a FIFO connection, since every job sends its own
deduplication id) and brings the visibility timeout of one that exists to
the lease; it never deletes or purges anything. `check_provisioned` only
reads. A push or reserve looks a queue's URL up once (`GetQueueUrl`) and
keeps it: a queue that does not exist is `NotProvisioned`, naming the
command that makes it.

No redrive policy is set: the worker fails a job after its last attempt
(SQS's receive count is the attempt counter), into a failed queue that
keeps the error with it, which SQS's own dead-lettering would lose.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ...queue import Finding
from .connection import QueueMissing, SQSConnection, not_provisioned
from .leases import visibility
from .names import Names
from .settings import SQSSettings

RETENTION = 1_209_600
"""Seconds SQS keeps a message: its longest, 14 days (its default is 4)."""


class Queues:
    """The URLs of a connection's SQS queues, and the making of them."""

    def __init__(self, connection: SQSConnection, settings: SQSSettings, names: Names) -> None:
        self._connection = connection
        self._settings = settings
        self.names = names
        self._urls: dict[str, str] = {}

    async def url(self, queue: str) -> str:
        """The work queue's URL: `NotProvisioned` if it does not exist."""
        return await self._url(queue, self.names.work(queue), self.names.url_of(queue))

    async def delay_url(self, queue: str) -> str | None:
        """The delay queue's URL (`NotProvisioned` if it does not exist), or None where the
        queue has none (a standard connection, an explicit URL)."""
        name = self.names.delay(queue)
        if name is None:
            return None
        return await self._url(queue, name, None)

    async def failed_url(self, queue: str) -> str:
        """The failed queue's URL (`queue` is named in the error if it does not exist)."""
        return await self._url(queue, self.names.failed(), None)

    async def _url(self, queue: str, name: str, explicit: str | None) -> str:
        known = self._urls.get(name)
        if known is not None:
            return known
        if explicit is not None:
            self._urls[name] = explicit
            return explicit
        try:
            answer = await self._connection.call(
                "get_queue_url", f"look up the SQS queue {name!r}", QueueName=name
            )
        except QueueMissing:
            raise not_provisioned(queue, name) from None
        url = str(answer["QueueUrl"])
        self._urls[name] = url
        return url

    def forget(self, queue: str) -> None:
        """Look the queue up again next time (it was deleted under us)."""
        self._urls.pop(self.names.work(queue), None)
        self._urls.pop(self.names.failed(), None)
        delay = self.names.delay(queue)
        if delay is not None:
            self._urls.pop(delay, None)

    async def exists(self, queue: str) -> str | None:
        """The work queue's URL, or None where it does not exist."""
        try:
            return await self.url(queue)
        except Exception as exc:
            if getattr(exc, "queue", None) == queue:
                return None
            raise

    def _wanted(self, fifo: bool | None = None) -> dict[str, str]:
        attributes = {
            "VisibilityTimeout": str(visibility(self._settings.lease)),
            "MessageRetentionPeriod": str(RETENTION),
        }
        if self.names.fifo if fifo is None else fifo:
            attributes["FifoQueue"] = "true"
            attributes["ContentBasedDeduplication"] = "false"
        return attributes

    async def _attributes(self, name: str) -> dict[str, str] | None:
        try:
            answer = await self._connection.call(
                "get_queue_url", f"look up the SQS queue {name!r}", QueueName=name
            )
        except QueueMissing:
            return None
        url = str(answer["QueueUrl"])
        self._urls[name] = url
        got = await self._connection.call(
            "get_queue_attributes",
            f"read the attributes of SQS queue {name!r}",
            QueueUrl=url,
            AttributeNames=["All"],
        )
        return {str(k): str(v) for k, v in got.get("Attributes", {}).items()}

    async def _existing(self) -> set[str]:
        """The names of the SQS queues under the connection's prefix (one call a thousand)."""
        args: dict[str, Any] = {"MaxResults": 1000}
        if self.names.prefix:
            args["QueueNamePrefix"] = self.names.prefix
        names: set[str] = set()
        while True:
            answer = await self._connection.call("list_queues", "list the SQS queues", **args)
            for url in answer.get("QueueUrls", []):
                name = str(url).rstrip("/").rsplit("/", 1)[-1]
                names.add(name)
                self._urls.setdefault(name, str(url))
            token = answer.get("NextToken")
            if not token:
                return names
            args["NextToken"] = token

    def _names(self, queues: Sequence[str]) -> list[tuple[str, str | None, bool]]:
        """Each SQS queue `queues` need: its name, the queue it serves (None: the failed
        queue) and whether it is a delay queue (a standard queue on a FIFO connection)."""
        out: list[tuple[str, str | None, bool]] = [(self.names.failed(), None, False)]
        for queue in dict.fromkeys(queues):
            if self.names.url_of(queue) is not None:
                continue
            out.append((self.names.work(queue), queue, False))
            delay = self.names.delay(queue)
            if delay is not None:
                out.append((delay, queue, True))
        return out

    async def provision(self, queues: Sequence[str]) -> list[str]:
        existing = await self._existing()
        names = self._names(queues)
        done = await asyncio.gather(
            *(self._provision_one(n, n in existing, delay=d) for n, _, d in names)
        )
        return [line for lines in done for line in lines]

    async def _provision_one(self, name: str, exists: bool, *, delay: bool) -> list[str]:
        wanted = self._wanted(fifo=False) if delay else self._wanted()
        have = await self._attributes(name) if exists else None
        if have is None:
            answer = await self._connection.call(
                "create_queue",
                f"create the SQS queue {name!r}",
                QueueName=name,
                Attributes=wanted,
            )
            self._urls[name] = str(answer["QueueUrl"])
            if delay:
                return [f"created SQS queue {name} (standard: the delayed jobs of a FIFO queue)"]
            return [f"created SQS queue {name} ({self._shape()})"]
        if have.get("VisibilityTimeout") != wanted["VisibilityTimeout"]:
            await self._connection.call(
                "set_queue_attributes",
                f"set the visibility timeout of SQS queue {name!r}",
                QueueUrl=self._urls[name],
                Attributes={"VisibilityTimeout": wanted["VisibilityTimeout"]},
            )
            return [
                f"set the visibility timeout of SQS queue {name} to "
                f"{wanted['VisibilityTimeout']}s (was {have.get('VisibilityTimeout')}s)"
            ]
        return []

    def _shape(self) -> str:
        kind = "FIFO" if self.names.fifo else "standard"
        return f"{kind}, visibility timeout {visibility(self._settings.lease)}s"

    async def check(self, queues: Sequence[str]) -> list[Finding]:
        findings: list[Finding] = []
        wanted = self._wanted()
        existing = await self._existing()
        names = self._names(queues)
        found = await asyncio.gather(
            *(self._attributes(n) if n in existing else _none() for n, _, _ in names)
        )
        for (name, queue, delay), have in zip(names, found, strict=True):
            holds = "the failed jobs of every queue" if queue is None else "its jobs"
            if delay:
                holds = "its delayed jobs until due: a FIFO queue takes no per-message delay"
            if have is None:
                findings.append(
                    Finding(
                        subject=f"SQS queue `{name}`",
                        problem=f"does not exist (it holds {holds})",
                        queue=queue,
                        fix=(
                            "until it exists, a delayed push or a retry with a backoff on "
                            "this queue is refused (`NotProvisioned`); provisioning makes it"
                            if delay
                            else ""
                        ),
                    )
                )
            elif have.get("VisibilityTimeout") != wanted["VisibilityTimeout"]:
                findings.append(
                    Finding(
                        subject=f"SQS queue `{name}`",
                        problem=(
                            f"has a visibility timeout of {have.get('VisibilityTimeout')}s, "
                            f"and the lease is {wanted['VisibilityTimeout']}s"
                        ),
                        queue=queue,
                        fix=(
                            "each receive asks for the lease itself, so jobs are safe; "
                            "provisioning sets the queue's default to match for other consumers"
                        ),
                    )
                )
        return findings


async def _none() -> None:
    return None


__all__ = ["Queues"]
