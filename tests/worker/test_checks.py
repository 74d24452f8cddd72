# SPDX-License-Identifier: MIT
"""Startup checks: settings that cannot work are named, with the setting to change."""

from __future__ import annotations

from datetime import timedelta

from rainier_queue import Job, JobContext, JobRegistry
from rainier_queue.drivers.inline import InlineQueue
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.worker import WorkerOptions, check_worker_settings

from .jobs import Note

LEASE = timedelta(seconds=90)


class Report(Job):
    name = "report"
    timeout = timedelta(minutes=5)

    async def handle(self, ctx: JobContext) -> None:
        pass


class Quick(Job):
    name = "quick"
    timeout = timedelta(seconds=10)

    async def handle(self, ctx: JobContext) -> None:
        pass


def test_the_defaults_pass_on_a_leasing_driver() -> None:
    assert check_worker_settings(MemoryQueue(), JobRegistry([Note]), WorkerOptions()) == []


def test_a_worker_timeout_that_outlives_the_lease_names_the_timeout_setting() -> None:
    [problem] = check_worker_settings(
        MemoryQueue(lease=LEASE), JobRegistry([Note]), WorkerOptions(timeout=LEASE)
    )

    assert "worker `timeout` (90s) is not shorter than" in problem
    assert "90s lease" in problem
    assert "--timeout" in problem


def test_a_jobs_own_timeout_that_outlives_the_lease_names_the_job() -> None:
    [problem] = check_worker_settings(
        MemoryQueue(lease=LEASE), JobRegistry([Note, Report]), WorkerOptions()
    )

    assert "job `report` sets `timeout` to 300s" in problem
    assert "Report.timeout" in problem


def test_no_worker_timeout_on_a_leasing_driver_names_the_jobs_it_leaves_unlimited() -> None:
    [problem] = check_worker_settings(
        MemoryQueue(lease=LEASE), JobRegistry([Note, Quick]), WorkerOptions(timeout=None)
    )

    assert "worker `timeout` is None" in problem
    assert "(`note`)" in problem
    assert "--timeout" in problem


def test_no_worker_timeout_is_fine_when_every_job_has_a_short_one_of_its_own() -> None:
    problems = check_worker_settings(
        MemoryQueue(lease=LEASE), JobRegistry([Quick]), WorkerOptions(timeout=None)
    )

    assert problems == []


def test_a_driver_that_never_reclaims_has_no_lease_to_outlive() -> None:
    registry = JobRegistry([Note, Report])

    assert check_worker_settings(InlineQueue(registry), registry, WorkerOptions(timeout=None)) == []


def test_an_empty_registry_and_a_zero_sleep_are_reported() -> None:
    problems = check_worker_settings(
        MemoryQueue(), JobRegistry(), WorkerOptions(sleep=timedelta(0), prefetch=0)
    )

    assert len(problems) == 3
    assert "no jobs are registered" in problems[0]
    assert "`prefetch` is 0" in problems[1]
    assert "`sleep` must be longer than zero" in problems[2]
