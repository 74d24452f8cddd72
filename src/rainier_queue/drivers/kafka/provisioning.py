# SPDX-License-Identifier: MIT
"""Making each queue's topics, and saying what is missing: the Kafka side of `Provisionable`.

A push never creates a topic (the queue's `push_creates_resources` is
False), because a topic's partition count is how many of the queue's jobs
run at once, and a broker that creates topics on demand picks its own
default for it. So the count is written down once, as the connection's
`partitions` option, and `rainier-queue provision` makes the topics:

- the queue's topic with `partitions` partitions, and its `.failed` topic
  with one (failed jobs are written once and read only to be listed);
- `replication` replicas each, or, when that is not set, three or every
  broker of a smaller cluster, so a laptop's single broker and a
  three-broker cluster both get what their owner would pick;
- a topic with fewer partitions than `partitions` is grown (Kafka's
  CreatePartitions). Growing moves keys: jobs that share a unique key and
  were pushed before the growth may run beside, or after, ones pushed
  since. Kafka cannot take partitions away, so a topic with more is left
  as it is.

What provisioning cannot change without losing jobs, a topic's
replication, is reported by the check with the step a person takes.
The check reads metadata with automatic creation off, so asking about a
topic never makes one, even on a broker that would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from aiokafka import errors as kx

from ...errors import BrokerRejected
from ...queue import Finding
from .connection import KafkaClients, TopicShape, translated
from .names import failed_topic_name, topic_name
from .settings import MOST_REPLICAS, KafkaSettings

if TYPE_CHECKING:  # imported when provisioning runs: 5 ms a worker never needs
    from aiokafka.admin import AIOKafkaAdminClient

FAILED_PARTITIONS = 1
"""Partitions of a failed topic `provision` creates."""

_ALREADY_EXISTS = 36
"""Kafka's TOPIC_ALREADY_EXISTS: another process created it first, which is fine."""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "s")


class Topics:
    """Creates, grows and checks the topics of a connection's queues."""

    def __init__(self, clients: KafkaClients, settings: KafkaSettings) -> None:
        self._clients = clients
        self._settings = settings

    def _wanted(self, queues: Sequence[str]) -> list[tuple[str, str, int]]:
        """(queue, topic, partitions wanted) for each topic the queues need, queue's first."""
        prefix = self._settings.topic_prefix
        wanted: list[tuple[str, str, int]] = []
        for queue in dict.fromkeys(queues):
            wanted.append((queue, topic_name(prefix, queue), self._settings.partitions))
            wanted.append((queue, failed_topic_name(prefix, queue), FAILED_PARTITIONS))
        return wanted

    async def check(self, queues: Sequence[str]) -> list[Finding]:
        """What is missing or short, topic by topic."""
        findings: list[Finding] = []
        for queue, topic, partitions in self._wanted(queues):
            shape = await self._clients.shape(topic)
            findings += self._judge(queue, topic, partitions, shape)
        return findings

    def _judge(self, queue: str, topic: str, partitions: int, shape: TopicShape) -> list[Finding]:
        subject = f"topic `{topic}`"
        if not shape.exists:
            return [Finding(subject=subject, queue=queue, problem="does not exist")]
        found: list[Finding] = []
        if shape.partitions < partitions:
            found.append(
                Finding(
                    subject=subject,
                    queue=queue,
                    problem=(
                        f"has {_plural(shape.partitions, 'partition')}, and `partitions` "
                        f"asks for {partitions}"
                    ),
                    fix="growing it moves keys: jobs sharing a unique key may run out of order "
                    "until those pushed before are done",
                )
            )
        wanted = self._settings.replication
        if wanted is not None and shape.replicas < wanted:
            found.append(
                Finding(
                    subject=subject,
                    queue=queue,
                    problem=(
                        f"has {_plural(shape.replicas, 'replica')}, and `replication` asks "
                        f"for {wanted}"
                    ),
                    provisioning_fixes=False,
                    fix="add replicas with Kafka's own kafka-reassign-partitions tool; "
                    "provisioning never moves a topic's data",
                )
            )
        return found

    async def provision(self, queues: Sequence[str]) -> list[str]:
        """Create the missing topics, then grow the short ones; what was done, line by line.

        Every missing topic is created before any is grown, so a broker that
        refuses to grow one (`BrokerRejected`) has still had the rest made.
        """
        done: list[str] = []
        short: list[tuple[str, int, int]] = []
        admin: AIOKafkaAdminClient | None = None
        try:
            for _queue, topic, partitions in self._wanted(queues):
                shape = await self._clients.shape(topic)
                if shape.exists:
                    if shape.partitions < partitions:
                        short.append((topic, shape.partitions, partitions))
                    continue
                admin = admin or await self._admin()
                replicas = self._replicas(shape)
                await _create(admin, topic, partitions, replicas)
                self._clients.forget(topic)
                done.append(
                    f"created topic `{topic}` with {_plural(partitions, 'partition')} "
                    f"and {_plural(replicas, 'replica')}"
                )
            for topic, has, partitions in short:
                admin = admin or await self._admin()
                await _grow(admin, topic, has, partitions)
                self._clients.forget(topic)
                done.append(f"grew topic `{topic}` from {has} to {partitions} partitions")
        finally:
            if admin is not None:
                async with translated("close the admin client"):
                    await admin.close()
        return done

    def _replicas(self, shape: TopicShape) -> int:
        if self._settings.replication is not None:
            return self._settings.replication
        return max(1, min(MOST_REPLICAS, shape.brokers))

    async def _admin(self) -> AIOKafkaAdminClient:
        from aiokafka.admin import AIOKafkaAdminClient

        args: dict[str, Any] = self._settings.client_arguments()
        admin = AIOKafkaAdminClient(**args)
        async with translated("connect an admin client to the brokers"):
            await admin.start()
        return admin


async def _create(admin: AIOKafkaAdminClient, topic: str, partitions: int, replicas: int) -> None:
    from aiokafka.admin import NewTopic

    async with translated(f"create topic {topic!r}"):
        answer = await admin.create_topics([NewTopic(topic, partitions, replicas)])
        for entry in answer.topic_errors:  # (topic, code) or (topic, code, message)
            code = entry[1]
            if code and code != _ALREADY_EXISTS:
                raise kx.for_code(code)(f"topic {topic!r}: {entry[2] if len(entry) > 2 else ''}")


async def _grow(admin: AIOKafkaAdminClient, topic: str, has: int, wanted: int) -> None:
    from aiokafka.admin import NewPartitions

    async with translated(f"add partitions to topic {topic!r}"):
        try:
            await admin.create_partitions({topic: NewPartitions(wanted)})
        except kx.IncompatibleBrokerVersion as exc:
            raise BrokerRejected(
                f"this Kafka broker cannot add partitions to a topic (it does not offer "
                f"CreatePartitions), so topic {topic!r} keeps its {has}: grow it with the "
                f"broker's own tools, or set `partitions` to {has}"
            ) from exc


__all__ = ["FAILED_PARTITIONS", "Topics"]
