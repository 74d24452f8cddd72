# SPDX-License-Identifier: MIT
"""Prometheus metrics for a dispatcher and a worker, from the instrument seam.

Why this shape: every number here is one of three things the seam already
shows. Port calls (`PortCall`) give the pushes, the broker errors and the
lost leases; the worker's job scope (`JobRun`) gives each start, its wait
since the job fell due, its run time and what the worker decided; and the
queue's depth and its oldest job's age are read when Prometheus scrapes
(`depth.py`), never per job, so an idle queue costs nothing and a busy one
pays no extra round trip per job. Nothing here reaches into a driver.

    metrics = Metrics()
    manager = QueueManager(queue, observers=[metrics.observe])
    worker = Worker(queue, registry, observers=[metrics.observe],
                    job_scopes=[metrics.job_scope])

`rainier-queue work --metrics-port 9100` does that wiring and serves them;
`docs/observability.md` lists every metric, its labels and its meaning.

The labels are the job's name and its queue: both come from the code
(names are registered, queues declared), so their number stays small.
A job id never becomes a label.

## Several processes

Prometheus's client keeps each metric in its process. A worker run with
`--processes N` records in the client's multi-process mode instead
(`multiprocess=True`, with `PROMETHEUS_MULTIPROC_DIR` set before the
client is imported): each child writes its values to files in a folder
the supervisor made, and the supervisor alone serves them, summed
(`rainier_queue_jobs_running` counts only live processes), with the depth
read once, by the supervisor. One endpoint, whatever N, and a scrape
between restarts loses no count.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..envelope import QueuedJob
from ..errors import BrokerError, LeaseLost
from ..instrument import JobRun, PortCall
from .extras import MissingExtra

try:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
except ImportError as exc:  # pragma: no cover - the extra's absence is tested in a clean venv
    raise MissingExtra("Prometheus metrics", "prometheus", "prometheus-client") from exc

PREFIX = "rainier_queue_"

TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
    10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
)  # fmt: skip
"""Seconds, from a no-op job to an hour-long one, for both run time and wait."""

LABELS = ("job", "queue")


class Metrics:
    """The metrics of one process; `observe` and `job_scope` are its two instruments."""

    def __init__(
        self, registry: CollectorRegistry | None = None, *, multiprocess: bool = False
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        """Where the metrics are registered: serve this one (`prometheus_client`'s
        `start_http_server(port, registry=...)`, or `generate_latest(registry)`)."""

        def counter(name: str, doc: str, labels: tuple[str, ...] = LABELS) -> Counter:
            return Counter(PREFIX + name, doc, labels, registry=self.registry)

        def histogram(name: str, doc: str) -> Histogram:
            return Histogram(
                PREFIX + name, doc, LABELS, registry=self.registry, buckets=TIME_BUCKETS
            )

        self.pushed = counter("jobs_pushed", "Jobs pushed to a queue (dispatched).")
        self.started = counter("jobs_started", "Runs of a job's handler started (attempts).")
        self.succeeded = counter("jobs_succeeded", "Runs that succeeded.")
        self.retried = counter("jobs_retried", "Runs that failed with attempts left.")
        self.failed = counter(
            "jobs_failed", "Jobs that failed for good (moved to the failed store)."
        )
        self.interrupted = counter(
            "jobs_interrupted", "Runs stopped by a worker's shutdown, handed back unfinished."
        )
        self.cancelled = counter(
            "jobs_cancelled",
            "Jobs cancelled (`rainier-queue cancel`): stopped while they ran, or taken"
            " and dropped before their run; neither failed nor retried.",
        )
        self.lease_losses = counter(
            "lease_losses",
            "Reservations lost: a renew or settle refused because another worker had the job.",
        )
        self.broker_errors = counter(
            "broker_errors", "Calls to the broker that failed, by operation.", ("operation",)
        )
        self.duration = histogram("job_duration_seconds", "How long each run's handler took.")
        self.wait = histogram(
            "job_wait_seconds",
            "Queue wait: from when the job fell due (available_at) to its run starting.",
        )
        self.running = Gauge(
            PREFIX + "jobs_running",
            "Handlers running now.",
            LABELS,
            registry=self.registry,
            multiprocess_mode="livesum" if multiprocess else "all",
        )
        self._children: dict[tuple[str, str], _Children] = {}
        """Each job and queue's labelled series, looked up once: `labels()` takes a lock
        and builds a key on every call, a third of what a run's metrics cost."""

    def _of(self, job: QueuedJob) -> _Children:
        key = (job.name, job.queue)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = _Children(
                started=self.started.labels(*key),
                wait=self.wait.labels(*key),
                running=self.running.labels(*key),
                duration=self.duration.labels(*key),
                outcomes={
                    "succeeded": self.succeeded.labels(*key),
                    "retried": self.retried.labels(*key),
                    "failed": self.failed.labels(*key),
                    "interrupted": self.interrupted.labels(*key),
                    "cancelled": self.cancelled.labels(*key),
                    # "lost": the lost lease was counted where it was found
                },
            )
        return children

    # -- the port observer -----------------------------------------------------------------

    def observe(self, call: PortCall) -> None:
        """A `QueueObserver`: pushes, broker errors and lost leases."""
        error = call.error
        if error is None:
            if call.operation == "push":
                for job in call.jobs:
                    self.pushed.labels(job.name, job.queue).inc()
        elif isinstance(error, LeaseLost):
            for job in call.jobs:
                self.lease_losses.labels(job.name, job.queue).inc()
        elif isinstance(error, BrokerError):
            self.broker_errors.labels(call.operation).inc()

    # -- the job scope ------------------------------------------------------------------

    def job_scope(self, run: JobRun) -> _RunMetrics:
        """A `JobScope`: the start, the wait before it, the run time and the outcome."""
        return _RunMetrics(run, self._of(run.job))


class _RunMetrics:
    """One run's metrics, as a context manager (a plain class: no generator per job)."""

    __slots__ = ("_began", "_children", "_run")

    def __init__(self, run: JobRun, children: _Children) -> None:
        self._run = run
        self._children = children
        self._began = 0.0

    def __enter__(self) -> None:
        children = self._children
        children.started.inc()
        children.wait.observe(waited(self._run.job))
        children.running.inc()
        self._began = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        children = self._children
        children.duration.observe(time.perf_counter() - self._began)
        children.running.dec()
        outcome = self._run.outcome
        if outcome is not None and (counter := children.outcomes.get(outcome)) is not None:
            counter.inc()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Children:
    """One job name and queue's series."""

    started: Counter
    wait: Histogram
    running: Gauge
    duration: Histogram
    outcomes: dict[str, Counter]


def waited(job: QueuedJob) -> float:
    """Seconds since `job` fell due; 0 for a job started before (a clock a little behind)."""
    return max(0.0, time.time() - job.available_at.timestamp())


__all__ = ["LABELS", "PREFIX", "TIME_BUCKETS", "Metrics", "waited"]
