# SPDX-License-Identifier: MIT
"""Making a connection's stream, failed stream and each queue's consumers: `Provisionable`.

A push never makes anything (the queue's `push_creates_resources` is
False): the stream's storage and replicas, and each consumer's ack wait and
delivery limit, are decisions, written down as the connection's options and
made by `rainier-queue provision`:

- the work-queue stream `<prefix>-jobs` (subjects `<prefix>.jobs.*` and
  `<prefix>.delayed.*`), with `storage`, `replicas` and `duplicate_window`;
- the failed stream `<prefix>-failed` (limits retention: kept until retried,
  forgotten or flushed);
- per queue, the durable pull consumer `q-<token>` on its jobs subject
  (`ack_wait` = `lease`, `max_deliver`, no cap on jobs in flight, so jobs
  waiting out a retry's backoff never hold up the rest), and `d-<token>` on
  its delayed subject (delays.py).

What is editable on the server (a consumer's ack wait, delivery limit and
cap; a stream's replicas and duplicate window) provisioning brings up to
date; what is not (a stream's storage or retention, a consumer's subject)
comes back from the check as a `Finding` with the step a person takes.
Nothing is deleted or purged here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import nats.js.errors as jx
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamInfo,
)

from ...queue import Finding
from .connection import NATSConnection, translated
from .names import Names
from .settings import NATSSettings

DELAY_ACK_WAIT = 30.0
"""Seconds a delayed job stays with a mover that took it and fell silent."""
UNLIMITED = -1


@dataclass(frozen=True, slots=True)
class Wanted:
    """One consumer as provisioning makes it."""

    queue: str
    name: str
    subject: str
    ack_wait: float
    max_deliver: int


def _differs(a: float | None, b: float) -> bool:
    return a is None or abs(a - b) > 1e-3


class Provisioning:
    """Creates, updates and checks what a connection's queues need on the server."""

    def __init__(self, connection: NATSConnection, settings: NATSSettings, names: Names) -> None:
        self._connection = connection
        self._settings = settings
        self._names = names

    def _streams(self) -> list[StreamConfig]:
        s = self._settings
        storage = StorageType.MEMORY if s.lossy else StorageType.FILE
        common = {
            "storage": storage,
            "num_replicas": s.replicas,
            "duplicate_window": s.duplicate_window.total_seconds(),
        }
        return [
            StreamConfig(
                name=self._names.stream,
                subjects=self._names.stream_subjects,
                retention=RetentionPolicy.WORK_QUEUE,
                **common,  # type: ignore[arg-type]
            ),
            StreamConfig(
                name=self._names.failed_stream,
                subjects=self._names.failed_subjects,
                retention=RetentionPolicy.LIMITS,
                **common,  # type: ignore[arg-type]
            ),
        ]

    def consumers(self, queue: str) -> list[Wanted]:
        n = self._names
        return [
            Wanted(
                queue,
                n.consumer(queue),
                n.jobs(queue),
                self._settings.lease.total_seconds(),
                self._settings.max_deliver,
            ),
            Wanted(queue, n.delay_consumer(queue), n.delayed(queue), DELAY_ACK_WAIT, UNLIMITED),
        ]

    @staticmethod
    def config(wanted: Wanted) -> ConsumerConfig:
        return ConsumerConfig(
            durable_name=wanted.name,
            filter_subject=wanted.subject,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=wanted.ack_wait,
            max_deliver=wanted.max_deliver,
            max_ack_pending=UNLIMITED,
        )

    async def _stream(self, name: str) -> StreamInfo | None:
        js = await self._connection.jetstream()
        try:
            async with translated(f"read stream {name!r}"):
                return await js.stream_info(name)
        except jx.NotFoundError:
            return None

    async def consumer(self, name: str) -> ConsumerInfo | None:
        """The consumer as the server has it, or None if it does not exist."""
        js = await self._connection.jetstream()
        try:
            async with translated(f"read consumer {name!r}"):
                info: ConsumerInfo = await js.consumer_info(self._names.stream, name)
                return info
        except jx.NotFoundError:
            return None

    # -- checking -------------------------------------------------------------------

    async def check(self, queues: Sequence[str]) -> list[Finding]:
        findings: list[Finding] = []
        for wanted in self._streams():
            assert wanted.name is not None
            found = await self._stream(wanted.name)
            findings += self._judge_stream(wanted, found)
        for queue in dict.fromkeys(queues):
            for consumer in self.consumers(queue):
                findings += self._judge_consumer(consumer, await self.consumer(consumer.name))
        return findings

    def _judge_stream(self, wanted: StreamConfig, found: StreamInfo | None) -> list[Finding]:
        subject = f"stream `{wanted.name}`"
        if found is None:
            return [Finding(subject=subject, problem="does not exist")]
        have = found.config
        out: list[Finding] = []
        if have.retention != wanted.retention:
            out.append(
                Finding(
                    subject=subject,
                    problem=(
                        f"has {have.retention} retention, and this driver needs {wanted.retention}"
                    ),
                    provisioning_fixes=False,
                    fix="a stream's retention cannot change: move its messages elsewhere, delete "
                    "it (`nats stream rm`) and provision again",
                )
            )
        if have.storage != wanted.storage:
            out.append(
                Finding(
                    subject=subject,
                    problem=(
                        f"keeps its messages in {have.storage}, and `storage` asks for "
                        f"{wanted.storage}"
                    ),
                    provisioning_fixes=False,
                    fix="a stream's storage cannot change: drain it, delete it (`nats stream rm`) "
                    "and provision again, or set `storage` to what it has",
                )
            )
        if have.num_replicas != wanted.num_replicas:
            out.append(
                Finding(
                    subject=subject,
                    problem=(
                        f"has {have.num_replicas} replicas, and `replicas` asks for "
                        f"{wanted.num_replicas}"
                    ),
                )
            )
        if _differs(have.duplicate_window, wanted.duplicate_window):
            out.append(
                Finding(
                    subject=subject,
                    problem=f"drops duplicates within {have.duplicate_window}s, and "
                    f"`duplicate_window` asks for {wanted.duplicate_window}s",
                )
            )
        missing = set(wanted.subjects or ()) - set(have.subjects or ())
        if missing:
            out.append(
                Finding(subject=subject, problem=f"does not take subjects {sorted(missing)}")
            )
        return out

    def _judge_consumer(self, wanted: Wanted, found: ConsumerInfo | None) -> list[Finding]:
        subject = f"consumer `{wanted.name}` of stream `{self._names.stream}`"
        if found is None:
            return [Finding(subject=subject, queue=wanted.queue, problem="does not exist")]
        have = found.config
        if have.filter_subject != wanted.subject or have.ack_policy != AckPolicy.EXPLICIT:
            return [
                Finding(
                    subject=subject,
                    queue=wanted.queue,
                    problem=f"reads {have.filter_subject!r} with {have.ack_policy} acks, and the "
                    f"queue needs {wanted.subject!r} with explicit acks",
                    provisioning_fixes=False,
                    fix=f"stop the queue's workers, delete it (`nats consumer rm "
                    f"{self._names.stream} {wanted.name}`; its jobs stay in the stream) and "
                    "provision again",
                )
            ]
        out: list[Finding] = []
        if _differs(have.ack_wait, wanted.ack_wait):
            out.append(
                Finding(
                    subject=subject,
                    queue=wanted.queue,
                    problem=(
                        f"has an ack wait of {have.ack_wait}s, and the lease is {wanted.ack_wait}s"
                    ),
                    fix="workers fence their settles at the shorter of the two",
                )
            )
        if have.max_deliver != wanted.max_deliver or have.max_ack_pending != UNLIMITED:
            out.append(
                Finding(
                    subject=subject,
                    queue=wanted.queue,
                    problem=f"allows {have.max_deliver} deliveries and {have.max_ack_pending} "
                    f"in flight, and the queue asks for {wanted.max_deliver} and no cap",
                )
            )
        return out

    # -- provisioning ---------------------------------------------------------------

    async def provision(self, queues: Sequence[str]) -> list[str]:
        done: list[str] = []
        js = await self._connection.jetstream()
        for wanted in self._streams():
            assert wanted.name is not None
            found = await self._stream(wanted.name)
            if found is None:
                async with translated(f"create stream {wanted.name!r}"):
                    await js.add_stream(wanted)
                done.append(
                    f"created stream `{wanted.name}` ({self._settings.storage} storage, "
                    f"{self._settings.replicas} replica(s))"
                )
            elif [f for f in self._judge_stream(wanted, found) if f.provisioning_fixes]:
                update = StreamConfig.from_response(found.config.as_dict())
                update.subjects = sorted(
                    set(found.config.subjects or ()) | set(wanted.subjects or ())
                )
                update.num_replicas = wanted.num_replicas
                update.duplicate_window = wanted.duplicate_window
                async with translated(f"update stream {wanted.name!r}"):
                    await js.update_stream(update)
                done.append(f"updated stream `{wanted.name}`")
        for queue in dict.fromkeys(queues):
            for consumer in self.consumers(queue):
                found_consumer = await self.consumer(consumer.name)
                if found_consumer is None:
                    verb = "created"
                elif [
                    f
                    for f in self._judge_consumer(consumer, found_consumer)
                    if f.provisioning_fixes
                ]:
                    if not all(
                        f.provisioning_fixes for f in self._judge_consumer(consumer, found_consumer)
                    ):
                        continue
                    verb = "updated"
                else:
                    continue
                async with translated(f"make consumer {consumer.name!r}"):
                    await js.add_consumer(self._names.stream, self.config(consumer))
                done.append(
                    f"{verb} consumer `{consumer.name}` for queue {queue!r} "
                    f"(ack wait {consumer.ack_wait:g}s)"
                )
        return done


__all__ = ["Provisioning", "Wanted"]
