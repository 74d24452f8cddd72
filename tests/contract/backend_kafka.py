# SPDX-License-Identifier: MIT
"""Kafka in the contract suite: Tansu, a topic prefix per namespace, SQLite as the lock store.

A push never creates a topic, so the namespace's topics (one per queue name
the suite uses, and the failed-jobs topic of each) are made when its URL is
first asked for, by the driver's own provisioning, as `rainier-queue
provision` makes them. The lock store is an SQLite file in the test's own
directory: shared between the processes of one machine, which is what the
"another process" test needs, and gone with the test.

One partition per topic (the driver's default) keeps the suite's outcomes
the same from run to run (the model test replays sequences and needs that);
spreading work over several partitions and several workers is tested in
tests/drivers and tests/faults.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rainier_queue.connections import open_queue
from rainier_queue.drivers.kafka.names import topic_name
from rainier_queue.queue import Provisionable

from ..foreign.planting import envelope_bodies
from ..kafka_broker import broker
from ..kafka_foreign import produce_foreign
from .backends import SECRET, Backend, closed_port
from .raw_storage import kafka_raw

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


_provisioned: set[tuple[str, str]] = set()
"""(namespace, queue) pairs already provisioned, so reopening a namespace costs nothing."""


def prepare(tmp: Path, namespace: str, queues: Sequence[str]) -> None:
    """Make the topics of these queues (and of their failed jobs) in the namespace."""
    wanted = [q for q in queues if (namespace, q) not in _provisioned]
    if not wanted:
        return

    async def provision() -> None:
        queue = open_queue(f"kafka://{broker().bootstrap}/?{_query(tmp, namespace)}")
        assert isinstance(queue, Provisionable)
        try:
            await queue.provision(wanted)
        finally:
            await queue.aclose()

    in_a_thread(provision)  # a test may ask for a URL inside its own event loop
    _provisioned.update((namespace, q) for q in wanted)


def in_a_thread(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run `work` to its end on an event loop of its own, whoever calls."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(work())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def _query(tmp: Path, namespace: str) -> str:
    locks = quote(f"sqlite:///{tmp / 'kafka-locks.db'}", safe="")
    # batch_bytes=1: one record per batch, so Tansu's end offsets are right (see kafka_broker).
    return f"topic_prefix={namespace}.&batch_bytes=1&locks={locks}"


def url(tmp: Path, namespace: str) -> str:
    prepare(tmp, namespace, QUEUES)
    return f"kafka://{broker().bootstrap}/?{_query(tmp, namespace)}"


def secret_url(tmp: Path, namespace: str) -> str:
    prepare(tmp, namespace, QUEUES)
    return f"kafka://app:{SECRET}@{broker().bootstrap}/?{_query(tmp, namespace)}"


def unreachable_url(tmp: Path, namespace: str) -> str:
    return f"kafka://127.0.0.1:{closed_port()}/?{_query(tmp, namespace)}"


async def _produce(
    tmp: Path, namespace: str, queue: str, entries: Sequence[tuple[str, Any]]
) -> None:
    """Produce each entry as a plain producer would: its name as the key, its body as the value."""
    records = [
        (name.encode(), body.encode() if isinstance(body, str) else body) for name, body in entries
    ]
    await produce_foreign(broker(), topic_name(f"{namespace}.", queue), records)


def _listed(record: Mapping[str, Any]) -> str | None:
    key = record["payload"].get("key")  # a record that is not a job keeps its key
    return str(key) if key is not None else None


def check() -> None:
    broker()


BACKEND = Backend(
    name="kafka",
    url=url,
    check=check,
    prepare=prepare,
    secret_url=secret_url,
    unreachable_url=unreachable_url,
    raw=kafka_raw,
    plant=envelope_bodies(
        _produce, bad={"no-value": (None, "no value")}, listed=_listed
    ),  # and a record with a key alone
    lacks={
        "ordered_retries": (
            "a log cannot skip one record and come back to it: a retry with a backoff is"
            " produced again at the end of its partition, behind the later jobs of its key,"
            " which run before it (docs/flow-control.md)"
        ),
        "ordering_across_queues": (
            "each queue is a topic of its own, and a record key orders records within one"
            " partition of one topic (docs/flow-control.md)"
        ),
        "cut": (
            "a Kafka client bootstraps through the URL's address, then connects to the"
            " address the broker advertises, so a relay in the URL never carries the produce"
        ),
        "private_server": (
            "the suite's Tansu keeps its log in memory (bench/compare/tansu.py): restarted, it"
            " would come back empty, a loss no driver can ride out"
        ),
        "tls": (
            "the suite's Tansu has no TLS listener, so no certificate can be shown to a client;"
            " `tls=true` (the system's authorities, the host checked) is read in"
            " tests/drivers/test_kafka_settings.py, and there is no `insecure_skip_verify` yet"
        ),
        "backlog": (
            "the contract's topics have one partition, so one job runs at a time;"
            " tests/faults/test_kafka_workers.py runs a backlog over six partitions"
        ),
        "shared_backlog": (
            "the contract's topics have one partition, held by one worker at a time, so"
            " three workers cannot share a batch of 10,000 (nor the one to be killed be sure"
            " to hold it); the batch fault tests that kill a worker in each gap of a record"
            " run on Kafka instead"
        ),
    },
)
