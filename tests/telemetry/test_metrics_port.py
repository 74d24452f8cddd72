# SPDX-License-Identifier: MIT
"""What the metrics count from port calls: pushes, lost leases and broker errors.

In-process, on real drivers: a manager and a worker given `Metrics`'
observer, read back through the registry as a scrape would read it.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from rainier_queue import QueueManager
from rainier_queue.connections import open_queue
from rainier_queue.errors import BrokerUnavailable, LeaseLost
from rainier_queue.instrument import JobRun, instrumented
from rainier_queue.telemetry.metrics import Metrics

from .metrics_app import Doomed, Fine, registry
from .scraping import Samples, value


def read(metrics: Metrics) -> Samples:
    from prometheus_client.parser import text_string_to_metric_families

    samples: Samples = {}
    for family in text_string_to_metric_families(generate_latest(metrics.registry).decode()):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


async def test_each_pushed_job_is_counted_by_name_and_queue(tmp_path: Path) -> None:
    metrics = Metrics()
    queue = open_queue(f"sqlite:///{tmp_path / 'jobs.db'}")
    async with QueueManager(queue, registry=registry, observers=[metrics.observe]) as manager:
        await manager.dispatch_many([Fine(), Fine(), Doomed()])
        await manager.pending(Fine()).on_queue("other").send()
    samples = read(metrics)
    pushed = "rainier_queue_jobs_pushed_total"
    assert value(samples, pushed, job="fine", queue="default") == 2
    assert value(samples, pushed, job="doomed", queue="default") == 1
    assert value(samples, pushed, job="fine", queue="other") == 1


async def test_a_settle_refused_as_stale_is_a_lease_loss(tmp_path: Path) -> None:
    metrics = Metrics()
    queue = open_queue(f"sqlite:///{tmp_path / 'jobs.db'}?lease=200ms")
    port = instrumented(queue, [metrics.observe])
    try:
        async with QueueManager(queue, registry=registry) as manager:
            await manager.dispatch(Fine())
            [stale] = await port.reserve("default")
            fresh: list[object] = []
            while not fresh:  # the lease lapses, and the job is reserved anew
                fresh = list(await port.reserve("default"))
            with pytest.raises(LeaseLost):
                await port.acknowledge(stale)
    finally:
        await queue.aclose()
    samples = read(metrics)
    assert value(samples, "rainier_queue_lease_losses_total", job="fine", queue="default") == 1
    assert value(samples, "rainier_queue_broker_errors_total", operation="acknowledge") == 0


async def test_a_broker_that_does_not_answer_is_a_broker_error_by_operation() -> None:
    pytest.importorskip("redis", reason="the redis extra")
    metrics = Metrics()
    queue = open_queue("redis://127.0.0.1:1/0?socket_connect_timeout=2")
    try:
        async with QueueManager(queue, registry=registry, observers=[metrics.observe]) as manager:
            with pytest.raises(BrokerUnavailable):
                await manager.dispatch(Fine())
    finally:
        await queue.aclose()
    samples = read(metrics)
    assert value(samples, "rainier_queue_broker_errors_total", operation="push") == 1
    assert value(samples, "rainier_queue_jobs_pushed_total", job="fine", queue="default") == 0


def test_a_scope_that_raises_is_left_out_and_the_others_still_run() -> None:
    """An instrument never fails the job it watches (`instrument.quietly`)."""
    from rainier_queue.envelope import QueuedJob
    from rainier_queue.instrument import quietly

    metrics = Metrics()
    left: list[str] = []

    def broken(run: JobRun) -> AbstractContextManager[None]:
        raise RuntimeError("an instrument's bug")

    class Watch:
        def __init__(self, run: JobRun) -> None:
            self.run = run

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            left.append(str(self.run.outcome))

    run = JobRun(job=QueuedJob.create("fine", None))
    with quietly([broken, metrics.job_scope, Watch], run):
        run.outcome = "succeeded"
    assert left == ["succeeded"]
    samples = read(metrics)
    assert value(samples, "rainier_queue_jobs_succeeded_total", job="fine", queue="default") == 1


def test_each_outcome_of_a_run_is_counted_under_its_own_name() -> None:
    from rainier_queue.envelope import QueuedJob
    from rainier_queue.instrument import Outcome, quietly

    metrics = Metrics()
    outcomes: list[Outcome] = ["succeeded", "retried", "failed", "interrupted", "cancelled"]
    for outcome in outcomes:
        run = JobRun(job=QueuedJob.create("fine", None))
        with quietly([metrics.job_scope], run):
            run.outcome = outcome
    run = JobRun(job=QueuedJob.create("fine", None))
    with quietly([metrics.job_scope], run):
        run.outcome = "lost"  # counted where the lease was found lost, not here

    samples = read(metrics)
    for outcome in outcomes:
        assert (
            value(samples, f"rainier_queue_jobs_{outcome}_total", job="fine", queue="default") == 1
        )
    assert value(samples, "rainier_queue_jobs_started_total", job="fine", queue="default") == 6


def test_wait_time_starts_when_the_job_falls_due() -> None:
    from rainier_queue.envelope import QueuedJob
    from rainier_queue.telemetry.metrics import waited

    assert waited(QueuedJob.create("fine", None, delay=timedelta(hours=1))) == 0.0
    past = QueuedJob.create("fine", None).with_changes(
        available_at=QueuedJob.create("fine", None).available_at - timedelta(minutes=5)
    )
    assert 300 <= waited(past) < 3600
