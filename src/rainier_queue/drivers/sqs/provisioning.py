# SPDX-License-Identifier: MIT
"""Each queue's two SQS queues, made by `provision`, looked up once and remembered.

A queue here is an SQS queue (its work queue), and the connection's queues
share one failed queue (names.py says which names). `provision` creates both with the attributes
the driver needs (the visibility timeout of the connection's lease; FIFO
and content-based deduplication off on a FIFO connection, since every job
sends its own deduplication id) and brings the visibility timeout of one
that exists to the lease; it never deletes or purges anything.
`check_provisioned` only reads. A push or reserve looks a queue's URL up
once (`GetQueueUrl`) and keeps it: a queue that does not exist is
`NotProvisioned`, naming the command that makes it.

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

    async def exists(self, queue: str) -> str | None:
        """The work queue's URL, or None where it does not exist."""
        try:
            return await self.url(queue)
        except Exception as exc:
            if getattr(exc, "queue", None) == queue:
                return None
            raise

    def _wanted(self) -> dict[str, str]:
        attributes = {
            "VisibilityTimeout": str(visibility(self._settings.lease)),
            "MessageRetentionPeriod": str(RETENTION),
        }
        if self.names.fifo:
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

    def _names(self, queues: Sequence[str]) -> list[str]:
        return [self.names.failed()] + [
            self.names.work(q) for q in dict.fromkeys(queues) if self.names.url_of(q) is None
        ]

    async def provision(self, queues: Sequence[str]) -> list[str]:
        existing = await self._existing()
        names = self._names(queues)
        done = await asyncio.gather(*(self._provision_one(n, n in existing) for n in names))
        return [line for lines in done for line in lines]

    async def _provision_one(self, name: str, exists: bool) -> list[str]:
        wanted = self._wanted()
        have = await self._attributes(name) if exists else None
        if have is None:
            answer = await self._connection.call(
                "create_queue",
                f"create the SQS queue {name!r}",
                QueueName=name,
                Attributes=wanted,
            )
            self._urls[name] = str(answer["QueueUrl"])
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
            *(self._attributes(n) if n in existing else _none() for n in names)
        )
        owners = [None, *(q for q in dict.fromkeys(queues) if self.names.url_of(q) is None)]
        for name, have, queue in zip(names, found, owners, strict=True):
            holds = "the failed jobs of every queue" if queue is None else "its jobs"
            if have is None:
                findings.append(
                    Finding(
                        subject=f"SQS queue `{name}`",
                        problem=f"does not exist (it holds {holds})",
                        queue=queue,
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
