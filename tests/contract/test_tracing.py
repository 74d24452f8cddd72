# SPDX-License-Identifier: MIT
"""Traces across a real push and a real worker, on every driver.

The trace context travels in the job's headers, which every driver keeps
(`test_push_and_reserve`), so every driver must give the same trace: one
producer span for the dispatch, and each attempt a consumer span that is
its child (and links to it), with the handler's own spans under that.
Held with the OpenTelemetry SDK's in-memory exporter.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the tests' SDK comes with the dev extra")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind, StatusCode

from rainier_queue import Job, JobContext, JobRegistry, QueueManager, Worker, WorkerOptions
from rainier_queue.telemetry.tracing import Tracing

from .backends import Backend
from .conftest import OpenQueue

PROVIDER = TracerProvider()
EXPORTER = InMemorySpanExporter()
PROVIDER.add_span_processor(SimpleSpanProcessor(EXPORTER))


class TracedFlaky(Job):
    """Fails its first attempt, succeeds on its second; each run starts a span of its own."""

    name = "traced-flaky"
    tries = 2

    def backoff(self, attempt: int) -> timedelta:
        return timedelta(0)

    async def handle(self, ctx: JobContext) -> None:
        with PROVIDER.get_tracer("the handler").start_as_current_span("inside the handler"):
            if ctx.attempt == 1:
                raise RuntimeError("the first attempt fails")


async def test_each_attempt_is_a_consumer_span_under_the_dispatchs_producer_span(
    backend: Backend, tmp_path: Path, namespace: str, open_queue: OpenQueue
) -> None:
    backend.setup(tmp_path, namespace, ["default"])
    queue = open_queue()
    tracing = Tracing(tracer_provider=PROVIDER)
    registry = JobRegistry([TracedFlaky])
    EXPORTER.clear()
    manager = QueueManager(queue, registry=registry, push_scopes=[tracing.push_scope])
    job_id = await manager.dispatch(TracedFlaky())
    worker = Worker(
        queue,
        registry,
        WorkerOptions(stop_when_empty=True, drain_wait=timedelta(seconds=30)),
        job_scopes=[tracing.job_scope],
    )
    stats = await worker.run()
    assert (stats.processed, stats.released, stats.failed) == (1, 1, 0)

    spans = EXPORTER.get_finished_spans()
    [send] = [s for s in spans if s.kind is SpanKind.PRODUCER]
    runs = sorted(
        (s for s in spans if s.kind is SpanKind.CONSUMER),
        key=lambda s: str(_attribute(s, "rainier_queue.job.attempt")),
    )
    inner = [s for s in spans if s.name == "inside the handler"]
    assert len(runs) == len(inner) == 2

    producer = _context(send)
    assert send.name == "send default"
    assert send.attributes == {
        "messaging.system": "rainier_queue",
        "messaging.destination.name": "default",
        "messaging.message.id": job_id,
        "messaging.operation.name": "send",
        "messaging.operation.type": "send",
        "rainier_queue.job.name": "traced-flaky",
    }
    for attempt, run in enumerate(runs, start=1):
        assert run.name == "process default"
        assert _context(run).trace_id == producer.trace_id  # one trace, retries included
        assert run.parent is not None
        assert run.parent.span_id == producer.span_id
        assert [link.context.span_id for link in run.links] == [producer.span_id]
        assert _attribute(run, "messaging.message.id") == job_id
        assert _attribute(run, "messaging.operation.type") == "process"
        assert _attribute(run, "rainier_queue.job.attempt") == attempt
    first, second = runs
    assert _attribute(first, "rainier_queue.job.outcome") == "retried"
    assert first.status.status_code is StatusCode.ERROR
    assert [event.name for event in first.events] == ["exception"]
    assert _attribute(second, "rainier_queue.job.outcome") == "succeeded"
    assert second.status.status_code is not StatusCode.ERROR
    # The handler's own spans are children of the run they were made in.
    assert sorted(s.parent.span_id for s in inner if s.parent is not None) == sorted(
        _context(run).span_id for run in runs
    )


def _context(span: ReadableSpan) -> SpanContext:
    context = span.get_span_context()
    assert context is not None
    return context


def _attribute(span: ReadableSpan, key: str) -> object:
    assert span.attributes is not None
    return span.attributes[key]
