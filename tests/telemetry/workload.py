# SPDX-License-Identifier: MIT
"""A known workload for the metrics tests, and what its metrics must say once it is done."""

from __future__ import annotations

from datetime import timedelta

from rainier_queue import JobRegistry, QueueManager
from rainier_queue.connections import open_queue

from .metrics_app import Doomed, Fine, Flaky, registry
from .scraping import Samples, value

FINE = 6
LATER = 2
"""Jobs delayed an hour: still on the queue when the rest is done, for the depth."""


async def dispatch_workload(url: str) -> None:
    """`FINE` fine jobs, one flaky, one doomed, and `LATER` fine jobs due in an hour."""
    manager = QueueManager(open_queue(url), registry=JobRegistry(list(registry)))
    async with manager:
        await manager.dispatch_many([Fine() for _ in range(FINE)] + [Flaky(), Doomed()])
        for _ in range(LATER):
            await manager.pending(Fine()).delay(timedelta(hours=1)).send()


def done(samples: Samples) -> bool:
    """Every due job ran to its end (the successes, and the doomed job's failure), and the
    queue has recorded the last of them (a run is counted as it ends, before its settle)."""
    succeeded = sum(
        value(samples, "rainier_queue_jobs_succeeded_total", job=name, queue="default")
        for name in ("fine", "flaky")
    )
    failed = value(samples, "rainier_queue_jobs_failed_total", job="doomed", queue="default")
    settled = all(
        value(samples, "rainier_queue_queue_jobs", queue="default", state=state) == 0
        for state in ("waiting", "reserved")
    )
    return succeeded == FINE + 1 and failed == 1 and settled


def assert_workload_counted(samples: Samples) -> None:
    """Each count the workload must have left, exactly."""

    def of(metric: str, job: str) -> float:
        return value(samples, f"rainier_queue_{metric}", job=job, queue="default")

    assert (of("jobs_started_total", "fine"), of("jobs_succeeded_total", "fine")) == (FINE, FINE)
    assert of("jobs_retried_total", "fine") == of("jobs_failed_total", "fine") == 0
    assert of("jobs_started_total", "flaky") == 2
    assert (of("jobs_retried_total", "flaky"), of("jobs_succeeded_total", "flaky")) == (1, 1)
    assert of("jobs_failed_total", "flaky") == 0
    assert of("jobs_started_total", "doomed") == 2
    assert (of("jobs_retried_total", "doomed"), of("jobs_failed_total", "doomed")) == (1, 1)
    assert of("jobs_succeeded_total", "doomed") == 0
    for job, runs in (("fine", FINE), ("flaky", 2), ("doomed", 2)):
        assert of("job_duration_seconds_count", job) == runs
        assert of("job_wait_seconds_count", job) == runs
        assert of("jobs_running", job) == 0
        assert of("lease_losses_total", job) == 0
    assert value(samples, "rainier_queue_queue_depth", queue="default") == LATER
    by_state = {
        state: value(samples, "rainier_queue_queue_jobs", queue="default", state=state)
        for state in ("waiting", "delayed", "reserved")
    }
    assert by_state == {"waiting": 0, "delayed": LATER, "reserved": 0}
