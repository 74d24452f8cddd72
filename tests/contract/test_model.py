# SPDX-License-Identifier: MIT
"""Random sequences of operations, checked against a model of what a queue must do.

Hypothesis drives push, reserve, acknowledge, release and fail in any order
and checks after every step that the driver agrees with a tiny in-test
model: which jobs wait, which are held, which failed. A driver bug that
only shows after an unusual sequence (release then fail, reserve past the
end) turns up here as a shrunk, replayable example.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rainier_queue.queue import FailedJobStore, Queue, Reservation

from .backends import Backend
from .jobs import a_job

T = TypeVar("T")


def machine_for(backend: Backend) -> type[RuleBasedStateMachine]:
    class QueueModel(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.loop = asyncio.new_event_loop()
            self.tmp = tempfile.TemporaryDirectory()
            self.namespace = "m" + uuid.uuid4().hex[:10]
            self.queue: Queue = backend.open(Path(self.tmp.name), self.namespace)
            self.waiting: set[str] = set()
            self.held: dict[str, Reservation] = {}
            self.failed: set[str] = set()
            self.attempts: dict[str, int] = {}

        def run(self, coro: Coroutine[Any, Any, T]) -> T:
            return self.loop.run_until_complete(coro)

        @rule(count=st.integers(min_value=1, max_value=4))
        def push(self, count: int) -> None:
            jobs = [a_job(payload={"i": i}) for i in range(count)]
            self.run(self.queue.push_many(jobs))
            for job in jobs:
                self.waiting.add(job.id)
                self.attempts[job.id] = 0

        @rule(limit=st.integers(min_value=1, max_value=5))
        def reserve(self, limit: int) -> None:
            got = self.run(self.queue.reserve("default", limit=limit))
            if self.queue.capabilities.reserved_job_steps_aside:
                assert len(got) == min(limit, len(self.waiting))
            else:  # one job per partition at a time: fewer, but never none for no reason
                assert len(got) <= min(limit, len(self.waiting))
                assert got or self.held or not self.waiting
            for reservation in got:
                job_id = reservation.job.id
                assert job_id in self.waiting, "only a waiting job may be handed out"
                self.waiting.discard(job_id)
                self.attempts[job_id] += 1
                assert reservation.job.attempts == self.attempts[job_id]
                self.held[job_id] = reservation

        @precondition(lambda self: bool(self.held))
        @rule(data=st.data())
        def acknowledge(self, data: st.DataObject) -> None:
            job_id = data.draw(st.sampled_from(sorted(self.held)))
            self.run(self.queue.acknowledge(self.held.pop(job_id)))

        @precondition(lambda self: bool(self.held))
        @rule(data=st.data(), count_attempt=st.booleans())
        def release(self, data: st.DataObject, count_attempt: bool) -> None:
            job_id = data.draw(st.sampled_from(sorted(self.held)))
            self.run(self.queue.release(self.held.pop(job_id), count_attempt=count_attempt))
            if not count_attempt:
                self.attempts[job_id] -= 1
            self.waiting.add(job_id)

        @precondition(lambda self: bool(self.held))
        @rule(data=st.data())
        def fail(self, data: st.DataObject) -> None:
            job_id = data.draw(st.sampled_from(sorted(self.held)))
            self.run(self.queue.fail(self.held.pop(job_id), "model says fail"))
            self.failed.add(job_id)

        @invariant()
        def sizes_agree(self) -> None:
            assert self.run(self.queue.size("default")) == len(self.waiting)
            if isinstance(self.queue, FailedJobStore):
                failed = self.run(self.queue.failed_jobs(limit=1000))
                assert {f.job.id for f in failed} == self.failed

        def teardown(self) -> None:
            self.run(self.queue.aclose())
            if backend.cleanup is not None:
                self.run(backend.cleanup(Path(self.tmp.name), self.namespace))
            self.loop.close()
            self.tmp.cleanup()

    return QueueModel


def test_random_operation_sequences_agree_with_the_model(backend: Backend) -> None:
    machine = machine_for(backend)
    machine.TestCase.settings = settings(
        max_examples=backend.model_examples,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    machine.TestCase().runTest()
