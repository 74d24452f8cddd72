# SPDX-License-Identifier: MIT
"""The blocking facade as a web application uses it: one, shared by many request threads.

Each request thread of a Django or Flask process dispatches through the
same `manager.blocking()`, at the same time as the others. Every dispatch
must come back with its id (no error after the job was queued, which a
caller would retry into a duplicate), every job must be queued exactly
once, and the calls must share one loop thread rather than start one each.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from rainier_queue import Job, JobContext, QueueManager

from .backends import Backend

THREADS = 8


class Ping(Job):
    name = "blocking-ping"
    n: int

    async def handle(self, ctx: JobContext) -> None:
        pass


def test_request_threads_share_one_blocking_facade_and_queue_every_job_once(
    backend: Backend, tmp_path: Path, namespace: str
) -> None:
    manager = QueueManager(backend.open(tmp_path, namespace))
    threads_before = threading.active_count()
    ids: list[str | None] = []
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)
    per_thread = backend.dispatches

    def request_thread(thread: int) -> None:
        start.wait()
        for n in range(per_thread):
            try:
                ids.append(manager.blocking().dispatch(Ping(n=thread * 1000 + n)))
            except Exception as exc:
                errors.append(exc)

    requests = [threading.Thread(target=request_thread, args=(t,)) for t in range(THREADS)]
    for thread in requests:
        thread.start()
    for thread in requests:
        thread.join()
    try:
        assert not errors, f"{len(errors)} dispatches failed; the first: {errors[0]!r}"
        assert len(ids) == len(set(ids)) == THREADS * per_thread
        assert manager.blocking().size("default") == THREADS * per_thread
        # The facade's loop thread, and at most one thread a driver keeps for its connection.
        assert threading.active_count() <= threads_before + 2
    finally:
        manager.blocking().close()
        if backend.cleanup is not None:
            asyncio.run(backend.cleanup(tmp_path, namespace))
