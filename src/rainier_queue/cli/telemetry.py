# SPDX-License-Identifier: MIT
"""`work --metrics-port` and `work --tracing`: the instruments a worker process runs with.

Why here: the library's instruments (`rainier_queue.telemetry`) are built
from parts, and someone has to choose them, serve the metrics and start
the server's thread. For `rainier-queue work` that is this module, and
nothing is imported or started unless a flag asks for it, so a worker
without them runs exactly the code it ran before.

One process serves its metrics itself, with its queue's depth read on the
worker's own loop at each scrape. Under `--processes N` the supervisor
serves them for all: each child records in prometheus-client's
multi-process mode into a folder the supervisor made (the hidden
`--metrics-dir`), the supervisor sums them and reads the depth once, on a
connection of its own, and forgets a child's live values when it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..instrument import JobScope, PushScope, QueueObserver
from ..queue import Queue
from .loading import Loaded, open_application
from .output import Problem, note
from .settings import Settings

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import CollectorRegistry

READY_TIMEOUT = 60.0
"""Seconds the supervisor waits for its own connection (for the depth) to open."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TelemetryFlags:
    """What `work`'s telemetry flags asked for."""

    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    metrics_dir: str | None = None
    """Set only on a supervised child: record into this multi-process folder, serve nothing."""
    tracing: bool = False

    @property
    def metrics(self) -> bool:
        return self.metrics_port is not None or self.metrics_dir is not None

    def check(self) -> None:
        """Refuse a flag whose extra is not installed, before anything starts."""
        try:
            if self.metrics:
                if self.metrics_dir is not None:
                    # The client reads this when it is first imported, so it is set first.
                    os.environ["PROMETHEUS_MULTIPROC_DIR"] = self.metrics_dir
                from ..telemetry import depth, metrics  # noqa: F401
            if self.tracing:
                from ..telemetry import tracing  # noqa: F401
        except ConfigurationError as exc:
            flag = "--tracing" if "otel" in str(exc) else "--metrics-port"
            raise Problem(f"{flag}: {exc}") from exc


@dataclass(slots=True)
class Instruments:
    """What the worker and the application's manager are given."""

    observers: list[QueueObserver] = field(default_factory=list)
    job_scopes: list[JobScope] = field(default_factory=list)
    push_scopes: list[PushScope] = field(default_factory=list)


@contextlib.asynccontextmanager
async def worker_instruments(
    flags: TelemetryFlags, loaded: Loaded, queue: Queue, queues: Sequence[str]
) -> AsyncIterator[Instruments]:
    """The instruments for one worker process, served while the block runs.

    Call on the worker's running loop: the depth is read on it.
    """
    instruments = Instruments()
    if flags.tracing:
        from ..telemetry.tracing import Tracing

        tracing = Tracing()
        instruments.push_scopes.append(tracing.push_scope)
        instruments.job_scopes.append(tracing.job_scope)
    server = None
    if flags.metrics:
        from ..telemetry.metrics import Metrics

        metrics = Metrics(multiprocess=flags.metrics_dir is not None)
        instruments.observers.append(metrics.observe)
        instruments.job_scopes.append(metrics.job_scope)
        if flags.metrics_dir is None:
            from ..telemetry.depth import DepthCollector

            DepthCollector(queue, queues, asyncio.get_running_loop(), metrics.registry)
            server = _serve(metrics.registry, flags)
    # The handlers' own dispatches are pushes too, and carry the run's trace on.
    loaded.manager.add_instruments(
        observers=instruments.observers, push_scopes=instruments.push_scopes
    )
    try:
        yield instruments
    finally:
        if server is not None:
            # Off the loop: a scrape in progress may be waiting for this loop to read the depth.
            await asyncio.to_thread(server.shutdown)
            server.server_close()


def _serve(registry: CollectorRegistry, flags: TelemetryFlags) -> WSGIServer:
    from prometheus_client import start_http_server

    assert flags.metrics_port is not None
    try:
        server, _ = start_http_server(flags.metrics_port, flags.metrics_host, registry=registry)
    except OSError as exc:
        raise Problem(
            f"--metrics-port: cannot serve metrics on {flags.metrics_host}:{flags.metrics_port} "
            f"({exc.strerror or exc}); choose a free port, or 0 for any"
        ) from exc
    note(f"serving metrics on http://{flags.metrics_host}:{server.server_port}/metrics")
    return server


@contextlib.contextmanager
def supervisor_metrics(
    flags: TelemetryFlags, settings: Settings, connection: str | None, queues: Sequence[str]
) -> Iterator[dict[str, Any]]:
    """Serve the children's metrics, summed, while the block runs.

    Yields what the supervisor needs: `args` for each child's command line,
    and `on_exit`, to call with the pid of a child that exited.
    """
    from prometheus_client import CollectorRegistry
    from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

    from ..telemetry.depth import DepthCollector

    folder = tempfile.mkdtemp(prefix="rainier-queue-metrics-")
    application = _ApplicationThread(settings)
    server = None
    try:
        loaded, loop = application.start()
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=folder)  # type: ignore[no-untyped-call]
        DepthCollector(loaded.queue(connection), queues, loop, registry)
        server = _serve(registry, flags)

        def on_exit(pid: int) -> None:
            mark_process_dead(pid, folder)  # type: ignore[no-untyped-call]

        yield {"args": ["--metrics-dir", folder], "on_exit": on_exit}
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        application.stop()
        shutil.rmtree(folder, ignore_errors=True)


class _ApplicationThread:
    """The application opened on an event loop of its own thread, for the supervisor's reads."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._ready = threading.Event()
        self._loaded: Loaded | None = None
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self._main, name="rainier-queue metrics", daemon=True
        )

    def start(self) -> tuple[Loaded, asyncio.AbstractEventLoop]:
        self._thread.start()
        if not self._ready.wait(READY_TIMEOUT):
            raise Problem("the metrics' connection did not open in time")
        if self._error is not None:
            raise self._error
        assert self._loaded is not None
        assert self._loop is not None
        return self._loaded, self._loop

    def stop(self) -> None:
        if self._loop is not None and self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)
        if self._thread.is_alive():
            self._thread.join(READY_TIMEOUT)

    def _main(self) -> None:
        asyncio.run(self._hold())

    async def _hold(self) -> None:
        try:
            loaded = await open_application(self._settings)
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._loaded, self._loop, self._done = loaded, asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()
        try:
            await self._done.wait()
        finally:
            await loaded.manager.aclose()


__all__ = ["Instruments", "TelemetryFlags", "supervisor_metrics", "worker_instruments"]
