# SPDX-License-Identifier: MIT
"""A dashboard served for real: uvicorn on a free loopback port, on a thread of its own.

The server runs on its own event loop, where its manager's queue opens, as
it would in an application; everything a test does to the queue (dispatch,
run a worker, read a job's state) is sent to that loop (`call`), so the
same manager serves every driver, memory:// included.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

from rainier_queue import QueueManager
from rainier_queue.cache.memory import MemoryCache
from rainier_queue.connections import open_queue
from rainier_queue.drivers import DriverContext
from rainier_queue.jobstate import JobState
from rainier_queue.locks import LockManager
from rainier_queue.scheduling import Schedule, Scheduler
from rainier_queue.web import AuthHook, allow_anyone, create_app
from rainier_queue.worker import Worker, WorkerOptions

from ..contract.backends import BACKENDS
from .jobs import QUEUE, registry

T = TypeVar("T")

STARTUP = 30.0
"""Seconds a server has to start listening before the test fails."""


class Served:
    """One dashboard over one queue URL, serving until `stop`."""

    def __init__(
        self,
        url: str,
        *,
        auth: AuthHook | None = allow_anyone,
        read_only: bool = False,
        schedule: Schedule | None = None,
        options: dict[str, Any] | None = None,
        mount: str = "",
    ) -> None:
        self.url = url
        self._mount = mount
        self._auth = auth
        self._read_only = read_only
        self._schedule = schedule
        self._options = options or {}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._server: uvicorn.Server | None = None
        self._serving: asyncio.Task[None] | None = None
        self.manager: QueueManager | None = None
        self.port = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}{self._mount}"

    def start(self) -> Served:
        self._thread.start()
        self.call(self._start)
        return self

    def call(self, make: Callable[[], Awaitable[T]], timeout: float = 60.0) -> T:
        """Run `make()` on the server's loop and wait for its result."""

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    async def _start(self) -> None:
        queue = open_queue(self.url, self._options, DriverContext())
        self.manager = QueueManager(
            queue,
            registry=registry(),
            default_queues=[QUEUE],
            locks=LockManager(MemoryCache()).declared_shared(),
        )
        scheduler = None
        if self._schedule is not None:
            scheduler = Scheduler(self.manager, self._schedule)
        app = create_app(
            self.manager,
            auth=self._auth,
            scheduler=scheduler,
            read_only=self._read_only,
            poll_seconds=1.0,
        )
        if self._mount:  # inside an application, as `app.mount(...)` puts it
            app = Starlette(routes=[Mount(self._mount, app=app)])
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = int(sock.getsockname()[1])
        self._server = uvicorn.Server(
            uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)
        )
        self._serving = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        waited = 0.0
        while not self._server.started:
            if self._serving.done():
                self._serving.result()  # raises what stopped it
            await asyncio.sleep(0.02)
            waited += 0.02
            if waited > STARTUP:
                raise TimeoutError(f"the dashboard did not start listening in {STARTUP:g}s")

    def stop(self) -> None:
        async def stopping() -> None:
            if self._server is not None and self._serving is not None:
                self._server.should_exit = True
                await self._serving
            if self.manager is not None:
                await self.manager.aclose()

        try:
            self.call(stopping)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=30)
            self.loop.close()

    # -- what tests do to the queue ----------------------------------------------------

    def dispatch(self, *jobs: Any) -> list[str]:
        manager = self.manager
        assert manager is not None

        async def push() -> list[str]:
            ids = [await manager.dispatch(job) for job in jobs]
            return [i for i in ids if i is not None]

        return self.call(push)

    def work(self, queues: Sequence[str] = (QUEUE,)) -> None:
        """Run a worker on the server's loop until the queues are empty, recording successes."""
        manager = self.manager
        assert manager is not None
        options = WorkerOptions(
            queues=tuple(queues),
            stop_when_empty=True,
            sleep=timedelta(milliseconds=50),
            keep_succeeded=timedelta(hours=1),
            heartbeat=None,
        )

        async def run() -> None:
            await Worker(manager.connection(), manager.registry, options).run()

        self.call(run, timeout=90)

    @contextlib.contextmanager
    def worker_running(self, queues: Sequence[str] = (QUEUE,)) -> Iterator[Worker]:
        """A worker serving `queues` on the server's loop, from its first heartbeat until the
        block ends."""
        manager = self.manager
        assert manager is not None
        options = WorkerOptions(queues=tuple(queues), sleep=timedelta(milliseconds=100))
        worker = Worker(manager.connection(), manager.registry, options)

        async def launch() -> asyncio.Task[Any]:
            running = asyncio.ensure_future(worker.run())
            while worker.worker_id not in {b.worker_id for b in await manager.workers()}:
                if running.done():
                    running.result()  # raises what stopped it
                await asyncio.sleep(0.02)  # until its first heartbeat is written
            return running

        task = self.call(launch)
        try:
            yield worker
        finally:

            async def stopping() -> None:
                worker.stop()
                await task

            self.call(stopping)

    def status(self, job_id: str) -> JobState:
        manager = self.manager
        assert manager is not None
        return self.call(lambda: manager.status(job_id))


def run_apart(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to its end on a loop of its own thread (the test's thread has
    Playwright's loop, where `asyncio.run` may not run)."""
    box: list[T] = []
    failed: list[BaseException] = []

    def run() -> None:
        async def main() -> T:
            return await make()

        try:
            box.append(asyncio.run(main()))
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    return box[0]


@contextlib.contextmanager
def served_over(
    driver: str, tmp: Path, *, with_password: bool = False, **kwargs: Any
) -> Iterator[Served]:
    """A dashboard over a fresh namespace of `driver` (as the contract suite opens it),
    removed after; `with_password`: through the URL carrying the suite's `SECRET`."""
    backend = BACKENDS[driver]
    if backend.check is not None:
        backend.check()
    namespace = "rqweb" + uuid.uuid4().hex[:10]
    backend.setup(tmp, namespace, [QUEUE])
    cleanup = backend.cleanup
    url = backend.url(tmp, namespace)
    if with_password:
        assert backend.secret_url is not None, f"{driver} has no URL with a password"
        url = backend.secret_url(tmp, namespace)
    server = Served(url, options=dict(backend.options), **kwargs)
    try:
        yield server.start()
    finally:
        server.stop()
        if cleanup is not None:
            run_apart(lambda: cleanup(tmp, namespace))


__all__ = ["Served", "run_apart", "served_over"]
