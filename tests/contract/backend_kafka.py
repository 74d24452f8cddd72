# SPDX-License-Identifier: MIT
"""Kafka in the contract suite: Tansu, a topic prefix per namespace, SQLite as the lock store.

The queue never creates topics, so the namespace's topics (one per queue
name the suite uses, and the failed-jobs topic of each) are created when its
URL is first asked for. The lock store is an SQLite file in the test's own
directory: shared between the processes of one machine, which is what the
"another process" test needs, and gone with the test.

One partition per topic keeps the suite's outcomes the same from run to run
(the model test replays sequences and needs that); spreading work over
several partitions and several workers is tested in tests/drivers and
tests/faults.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name

from ..kafka_broker import broker
from .backends import Backend

QUEUES = (
    "default",
    "never-used",
    "emails",
    "reports",
    "émails ✉",
    "a:b/c.d",
    "with space",
    "x" * 150,
    "elsewhere",
    "keep",
    "nothing-here",
    "a",
    "b",
)
"""Every queue name the contract tests push to or read from."""


def url(tmp: Path, namespace: str) -> str:
    running = broker()
    prefix = f"{namespace}."
    running.create_topics_now(
        [topic_name(prefix, q) for q in QUEUES] + [failed_topic_name(prefix, q) for q in QUEUES],
        partitions=1,
    )
    locks = quote(f"sqlite:///{tmp / 'kafka-locks.db'}", safe="")
    # batch_bytes=1: one record per batch, so Tansu's end offsets are right (see kafka_broker).
    return f"kafka://{running.bootstrap}/?topic_prefix={prefix}&batch_bytes=1&locks={locks}"


def check() -> None:
    broker()


BACKEND = Backend(name="kafka", url=url, check=check)
