# SPDX-License-Identifier: MIT
"""An empty queue of its own for every run of the CPU-per-job benchmarks, and its removal.

`bench.worker_cpu` and `bench.worker_instructions` compare runs with each
other, so each run must start from an empty queue that no other run (nor
another helper on the same servers) touches, and must leave nothing behind.
What a fresh queue is depends on the driver, and is made here:

- `memory://`: itself (each process has its own);
- `sqlite`: a new file in the run's temporary folder;
- `kafka`: a Tansu broker of the benchmark's own (started on first use,
  stopped at the end, as `make bench`'s Kafka row starts one), a topic
  prefix per run whose `default` topic has `KAFKA_PARTITIONS` partitions
  (made by the driver's own provisioning), and the partition leases and
  cursors on the local Redis under a key prefix per run, as in `make bench`;
- any other URL (PostgreSQL, MySQL, Redis, RabbitMQ, NATS): the URL with a
  `prefix` of the run's own, whose tables, keys, queues or streams are
  removed afterwards; on RabbitMQ and NATS, whose queues exist only once
  provisioned, the run's `default` queue is provisioned first (on RabbitMQ
  with one delay tier, as `make bench`'s row has).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import quote

from rainier_queue.connections import open_queue
from rainier_queue.queue import Provisionable

from .latency import cleanup

KAFKA_PARTITIONS = 6
"""Partitions of each run's topic: as many as `make bench`'s Kafka row has
(`bench.compare.constants`, not imported: the comparison imports this)."""

KAFKA_LOCKS = "redis://127.0.0.1:6379/0"
"""Where the Kafka runs keep their partition leases and cursors (a key prefix per run)."""


_PREFIX_ENDS = {"redis": ":", "rediss": ":", "amqp": ".", "amqps": ".", "nats": "_"}
"""What ends a run's prefix, by scheme: the separator the driver's names read best with."""

_PROVISIONED = frozenset({"amqp", "amqps", "nats"})
"""Schemes whose queue must be provisioned before a push finds it."""


class Places:
    """Hands out a fresh queue URL per run (`fresh`), and removes them all on exit."""

    def __init__(self, folder: Path, prefix: str = "cpu") -> None:
        self._folder = folder
        self._prefix = prefix
        self._made: list[str] = []
        """Server URLs whose tables or keys are removed at the end."""
        self._broker: Any = None

    def __enter__(self) -> Places:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            for url in self._made:
                with contextlib.suppress(Exception):  # a leftover is not worth a failed run
                    asyncio.run(cleanup(url))
        finally:
            if self._broker is not None:
                self._broker.stop()

    def fresh(self, spec: str) -> str:
        """A URL for an empty queue of `spec`'s driver that no other run uses."""
        if spec.startswith("memory:"):
            return spec  # a process's own: every run starts from an empty one
        tag = self._prefix + uuid.uuid4().hex[:8]
        if spec == "sqlite":
            return f"sqlite:///{self._folder / f'{tag}.db'}"
        if spec == "kafka":
            return self._kafka(tag)
        joiner = "&" if "?" in spec else "?"
        scheme = spec.split(":", 1)[0]
        ending = _PREFIX_ENDS.get(scheme, "_")
        url = f"{spec}{joiner}prefix={tag + ending}"
        if scheme in ("amqp", "amqps"):
            url += "&delays=1s"
        self._made.append(url)
        if scheme in _PROVISIONED:
            asyncio.run(_provision(url))
        return url

    def _kafka(self, tag: str) -> str:
        if self._broker is None:
            from .tansu import Tansu

            self._broker = Tansu.start()
        locks = f"{KAFKA_LOCKS}?prefix={tag}:"
        self._made.append(locks)
        url = (
            f"kafka://{self._broker.bootstrap}/?locks={quote(locks, safe='')}"
            f"&topic_prefix={tag}.&partitions={KAFKA_PARTITIONS}"
        )
        asyncio.run(_provision(url))
        return url


async def _provision(url: str) -> None:
    queue = open_queue(url)
    try:
        assert isinstance(queue, Provisionable)
        await queue.provision(["default"])
    finally:
        await queue.aclose()


def shown(spec: str) -> str:
    """`spec` as a report names it: without its query (which may hold a password or prefix)."""
    return spec.split("?", 1)[0]


__all__ = ["KAFKA_LOCKS", "KAFKA_PARTITIONS", "Places", "shown"]
