# SPDX-License-Identifier: MIT
"""The producer side of tracing: a push that fails, and a job that dispatches another.

The parent/child relation across a push and a worker is held on every
driver by the contract suite (`tests/contract/test_tracing.py`); these are
the two producer cases it does not cover, on real drivers.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the tests' SDK comes with the dev extra")

import itertools

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from rainier_queue import (
    Dependencies,
    Job,
    JobContext,
    JobRegistry,
    QueueManager,
    Worker,
    WorkerOptions,
)
from rainier_queue.connections import open_queue
from rainier_queue.errors import BrokerUnavailable
from rainier_queue.telemetry.tracing import Tracing

from .metrics_app import Fine


def traced() -> tuple[Tracing, InMemorySpanExporter]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(tracer_provider=provider), exporter


async def test_a_push_that_fails_records_the_error_on_its_send_span_once() -> None:
    pytest.importorskip("redis", reason="the redis extra")
    tracing, exporter = traced()
    queue = open_queue("redis://127.0.0.1:1/0?socket_connect_timeout=2")
    manager = QueueManager(queue, registry=JobRegistry([Fine]), push_scopes=[tracing.push_scope])
    async with manager:
        with pytest.raises(BrokerUnavailable):
            await manager.dispatch(Fine())
    [send] = exporter.get_finished_spans()
    assert send.kind is SpanKind.PRODUCER
    assert send.status.status_code is StatusCode.ERROR
    assert [event.name for event in send.events] == ["exception"]


class Parent(Job):
    """Dispatches a `Fine` job from inside its run."""

    name = "parent"

    async def handle(self, ctx: JobContext) -> None:
        await ctx.resolve(QueueManager).dispatch(Fine())


async def test_a_job_dispatched_by_a_handler_continues_the_trace_under_its_run() -> None:
    tracing, exporter = traced()
    queue = open_queue("memory://")
    registry = JobRegistry([Parent, Fine])
    manager = QueueManager(queue, registry=registry, push_scopes=[tracing.push_scope])
    await manager.dispatch(Parent())
    worker = Worker(
        queue,
        registry,
        WorkerOptions(stop_when_empty=True, drain_wait=timedelta(seconds=5)),
        dependencies=Dependencies([manager]),
        job_scopes=[tracing.job_scope],
    )
    stats = await worker.run()
    assert stats.processed == 2
    spans = {(s.name, s.attributes["rainier_queue.job.name"] if s.attributes else ""): s
             for s in exporter.get_finished_spans()}  # fmt: skip
    first_send = spans[("send default", "parent")]
    parent_run = spans[("process default", "parent")]
    second_send = spans[("send default", "fine")]
    child_run = spans[("process default", "fine")]
    chain = [first_send, parent_run, second_send, child_run]
    assert len({span.context.trace_id for span in chain if span.context}) == 1
    for parent, child in itertools.pairwise(chain):
        assert child.parent is not None
        assert parent.context is not None
        assert child.parent.span_id == parent.context.span_id
    await manager.aclose()
