# SPDX-License-Identifier: MIT
"""OpenTelemetry traces across the queue: a job's run is a child of its dispatch.

Why: a job is work a request asked for and another process did, often
seconds later. With the request's trace context carried in the job's
headers, the run shows up in the request's trace, and the handler's own
spans (its queries, its HTTP calls) under it.

Two scopes on the instrument seam, using only `opentelemetry-api` (the
application installs and configures the SDK and its exporters; with no
SDK the API's no-op tracer makes all of this nearly free):

- `push_scope`, on a `QueueManager(..., push_scopes=[tracing.push_scope])`:
  a PRODUCER span `send <queue>` around each push, whose context is
  injected into the job's headers by the configured propagator (W3C
  `traceparent` and `tracestate` by default) before the push;
- `job_scope`, on a `Worker(..., job_scopes=[tracing.job_scope])`: the
  context is extracted from the headers and the handler runs inside a
  CONSUMER span `process <queue>` that is the producer span's child and
  also links to it. The span is current while the handler runs (its
  task's context, copied into the thread of a plain `def` handler), so
  spans the handler starts are its children.

Every attempt is a span of its own in the same trace, each a child of the
one producer span; a retry's span says which attempt it was.

Attributes follow OpenTelemetry's messaging semantic conventions:
`messaging.system` (`rainier_queue`), `messaging.destination.name` (the
queue), `messaging.message.id` (the job id), `messaging.operation.name`
and `messaging.operation.type` (`send` / `process`); beside them
`rainier_queue.job.name`, `rainier_queue.job.attempt` and, on a run,
`rainier_queue.job.outcome` (`succeeded`, `retried`, `failed`, ...). A run
whose handler failed, whether it is retried or not, records the exception
and an error status.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from .._version import __version__
from ..envelope import QueuedJob
from ..instrument import JobRun
from .extras import MissingExtra

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - the extra's absence is tested in a clean venv
    raise MissingExtra("OpenTelemetry tracing", "otel", "opentelemetry-api") from exc

SYSTEM = "rainier_queue"
"""`messaging.system`: the queue library, whichever broker it runs on."""


class Tracing:
    """The two scopes, with one tracer (the global provider's unless one is given)."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer(
            "rainier_queue", __version__, tracer_provider=tracer_provider
        )

    @contextmanager
    def push_scope(self, jobs: Sequence[QueuedJob]) -> Iterator[Sequence[QueuedJob]]:
        """A `PushScope`: a producer span per job, its context in the job's headers."""
        spans = []
        stamped = []
        for job in jobs:
            span = self._tracer.start_span(
                f"send {job.queue}",
                kind=SpanKind.PRODUCER,
                attributes=_attributes(job, "send"),
            )
            headers = dict(job.headers)
            propagate.inject(headers, context=trace.set_span_in_context(span))
            spans.append(span)
            stamped.append(job.with_changes(headers=headers))
        try:
            if len(spans) == 1:
                # One job: its span is current across the push, for the driver's own spans.
                with trace.use_span(
                    spans[0],
                    end_on_exit=False,
                    record_exception=False,  # recorded below, once, for every job's span
                    set_status_on_exception=False,
                ):
                    yield tuple(stamped)
            else:
                yield tuple(stamped)
        except BaseException as exc:
            for span in spans:
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"the push failed: {exc}"))
            raise
        finally:
            for span in spans:
                span.end()

    @contextmanager
    def job_scope(self, run: JobRun) -> Iterator[None]:
        """A `JobScope`: the run in a consumer span, child of and linked to its producer."""
        job = run.job
        parent = propagate.extract(job.headers)
        producer = trace.get_current_span(parent).get_span_context()
        links = [Link(producer)] if producer.is_valid else None
        attributes = _attributes(job, "process")
        attributes["rainier_queue.job.attempt"] = job.attempts
        with self._tracer.start_as_current_span(
            f"process {job.queue}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            yield
            if run.outcome is not None:
                span.set_attribute("rainier_queue.job.outcome", run.outcome)
            error = run.error
            if error is not None and run.outcome in ("retried", "failed"):
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))


def _attributes(job: QueuedJob, operation: str) -> dict[str, str | int]:
    return {
        "messaging.system": SYSTEM,
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.id,
        "messaging.operation.name": operation,
        "messaging.operation.type": operation,
        "rainier_queue.job.name": job.name,
    }


__all__ = ["SYSTEM", "Tracing"]
