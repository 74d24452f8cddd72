# SPDX-License-Identifier: MIT
"""`Worker`: the loop that reserves jobs, runs them side by side, and stops cleanly.

The loop's job is to keep `concurrency` slots busy without breaking three
promises: an earlier queue is always served before a later one; a broker
outage is sat through rather than turned into a crash; and a stop never
strands a job. Each turn it fills the free slots from the queues in
priority order, one task per job; when nothing fills them it waits on the
driver's `wait_for_work` (which a push, or a running job finishing, cuts
short) instead of polling, or, on one queue of a driver that can send a
reserve behind its wait, on `wait_and_reserve` (which only work, its time,
a stop or a retry of its own ends). A slot frees when its handler returns, and the
acknowledgements of finished jobs ride along with the next reserve, so a
busy worker pays one round trip per batch, not two or one per job. While
work is waiting, a second reserve may set off before the first is back
(`MAX_FILLS`), so a broker slow to answer is not a pause per batch; and
while its jobs take no more than a few reserve round trips, the worker holds up
to `reserve_ahead` jobs reserved beyond those it runs (`pace.py`), so the
next batch is already here when the slots free.

Stopping: `stop()` ends reserving at once, lets running jobs finish within
`options.grace`, then interrupts what is left and hands it back with its
attempt refunded, so the next worker starts it straight away instead of
waiting for a lease to lapse. `stop(now=True)` skips the grace period.

This module is the worker's life cycle: start, the loop that decides when
to reserve, running each job in its slot, and stopping. How a reserve is
made (queues in order, acknowledgements riding along, the idle wait that
carries a reserve, reserves on their way) is `reserving.py`'s; batching the
acknowledgements is `acks.py`'s; settling a finished job is `settle.py`'s;
what a stop waits for is `shutdown.py`'s.

The worker imports no driver: everything it knows about the backend comes
through the `Queue` port and the error tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Sequence
from datetime import timedelta

from ..batchstate import batch_store_of
from ..context import Dependencies
from ..errors import BrokerError
from ..events import EventDispatcher, JobProcessing
from ..instrument import (
    JobRun,
    JobScope,
    QueueObserver,
    enter_quietly,
    instrumented,
    leave_quietly,
)
from ..jobstate import RecordStore
from ..limits import Refused, store_for
from ..locks import Cache, LockManager
from ..queue import Pausable, Queue
from ..registry import JobRegistry
from . import drain, shutdown, signals
from .acks import AckBatcher
from .beside import Beside
from .cancels import CancelWatch
from .heartbeat import Heartbeat, new_worker_id
from .leases import LeaseKeeper
from .limiting import LimitGate
from .options import WorkerOptions, WorkerStats
from .outage import Outage
from .outcomes import OutcomeRecorder
from .pace import Pace
from .pauses import PauseWatch
from .reserving import Reserver
from .runner import Runner
from .settle import Settler
from .slots import Slot, Slots
from .verdicts import Attempt, Verdict, outcome_of

log = logging.getLogger("rainier_queue.worker")

DEFAULT_OPTIONS = WorkerOptions()

MAX_FILLS = 2
"""Reserves one worker keeps on their way at once, while work is waiting."""


class Worker:
    """Runs jobs from `queue` until stopped, a limit is reached, or the broker is gone."""

    def __init__(
        self,
        queue: Queue,
        registry: JobRegistry,
        options: WorkerOptions = DEFAULT_OPTIONS,
        *,
        events: EventDispatcher | None = None,
        locks: LockManager | None = None,
        dependencies: Dependencies | None = None,
        observers: Sequence[QueueObserver] = (),
        job_scopes: Sequence[JobScope] = (),
        limits: Cache | None = None,
    ) -> None:
        self.queue = queue
        self._port = instrumented(queue, observers)
        """What the worker reserves and settles through: `queue` itself, or, with
        observers, `queue` behind an `InstrumentedQueue` that tells them."""
        self._job_scopes = tuple(job_scopes)
        """Entered around each handler's run (`instrument.JobScope`); none costs one test."""
        self.registry = registry
        self.options = options
        self._events = events
        self._locks = locks
        self._dependencies = dependencies if dependencies is not None else Dependencies()
        self._stats = WorkerStats()
        self._stopping = False
        self._hard = False
        self._active = False
        self._fatal: BrokerError | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._slots = Slots(options.concurrency, self._launch)
        self._ahead = (
            options.concurrency if options.reserve_ahead is None else options.reserve_ahead
        )
        self._pace = Pace()
        self._backlog = False
        """Whether the last reserve came back full: more work is waiting."""
        self._acks_ride_along = queue.combines_acknowledge_and_reserve
        """Whether the driver sends acknowledgements and a reserve in one round trip."""
        self._reserver: Reserver | None = None
        """The reserving half, built for each run."""
        self._waits_with_reserve = queue.reserves_behind_wait and len(options.queues) == 1
        """Whether an idle wait carries the reserve (`Queue.wait_and_reserve`)."""
        self._batch_goal = 0
        """Free slots worth a reserve while jobs run and work waits (see `_gather_slots`)."""
        if options.batch_wait > timedelta(0):
            self._batch_goal = min(
                options.concurrency // 2, options.prefetch or options.concurrency
            )
        self._pausable = (
            queue if queue.capabilities.pausable and isinstance(queue, Pausable) else None
        )
        """Where paused queues are marked; None on a driver that cannot pause, where no
        watch runs and the worker serves its queues as given."""
        self._watch: PauseWatch | None = None
        self._signals: list[signal.Signals] = []
        self.worker_id = new_worker_id()
        """How this worker is named in its heartbeat and in the records it writes."""
        self._records = _records_of(queue)
        """Where heartbeats and succeeded records go; None on a driver that keeps none."""
        self._batches = batch_store_of(queue)
        """Where a batch's jobs record their ends; None on a connection that keeps no
        batches."""
        self._heartbeat: Heartbeat | None = None
        self._cancels: CancelWatch | None = None
        """Reads which jobs were cancelled; None on a driver that cannot cancel one."""
        store = store_for(queue, limits, locks, registry)
        self._gate = (
            LimitGate(store, registry, holder=f"worker {self.worker_id}")
            if store is not None
            else None
        )
        """Asks the limit store before a limited job starts; None when no job class this
        worker knows declares a limit (and then no job pays anything for limits)."""
        # Created per run, on the running loop.
        self._changed = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._hard_event = asyncio.Event()

    # -- public surface --------------------------------------------------------------

    @property
    def stats(self) -> WorkerStats:
        """What this worker has done so far (live while it runs)."""
        return self._stats

    @property
    def is_stopping(self) -> bool:
        """Whether a stop was asked for (the worker may still be finishing jobs)."""
        return self._stopping

    @property
    def grace_period(self) -> timedelta:
        """How long running jobs may take to finish once a graceful stop begins (`grace`)."""
        return self.options.grace

    def stop(self, *, now: bool = False) -> None:
        """Stop taking jobs; finish running ones within the grace period, or at once if `now`.

        Safe to call from another thread, and before `run`: a worker stopped
        before it started runs nothing.
        """
        loop = self._loop
        if loop is not None and self._active and not _on_loop(loop):
            loop.call_soon_threadsafe(self._request_stop, now)
        else:
            self._request_stop(now)

    def install_signal_handlers(self) -> None:
        """First SIGTERM/SIGINT: `stop()`; second: `stop(now=True)`. Call on the running loop.

        The handlers are removed again when `run` returns.
        """
        self._signals.extend(signals.install(self))

    async def run(self) -> WorkerStats:
        """Work until stopped or a limit is reached; the stats.

        Raises the last `BrokerError` once `max_consecutive_errors` broker
        failures came in a row, after handing running jobs back.
        """
        if self._active:
            raise RuntimeError("this worker is already running")
        if self._stopping:
            return self._stats
        self._active = True
        self._loop = asyncio.get_running_loop()
        self._changed, self._stop_event, self._hard_event = (
            asyncio.Event(),
            asyncio.Event(),
            asyncio.Event(),
        )
        self._assemble()
        self._port.on_worker_start()
        beside = Beside(self._keeper, self._watch, self._cancels, self._heartbeat)
        await beside.start()
        log.info(
            "worker started on %s, queues %s, concurrency %d",
            self.queue.describe(),
            ", ".join(self.options.queues),
            self.options.concurrency,
        )
        try:
            await self._serve()
        except BaseException:
            self._request_stop(now=True)
            raise
        finally:
            try:
                await self._drain()
                await self._tell_queue_we_stopped()
            finally:
                await beside.stop()
                self._stats.threads_left_running = self._runner.threads_running
                self._runner.close()
                if self._signals:
                    signals.uninstall(self._signals)
                    self._signals.clear()
                self._active = False
        if self._fatal is not None:
            log.error("giving up after %d broker errors in a row", self._outage.gave_up_after)
            raise self._fatal
        log.info(
            "worker stopped: %d processed, %d retried, %d failed",
            self._stats.processed,
            self._stats.released,
            self._stats.failed,
        )
        return self._stats

    def _assemble(self) -> None:
        """Build this run's parts: the runner, the lease keeper, the settler and the reserver.

        The acknowledgement batcher is shared: the settler puts acknowledgements
        in, and the reserver takes them out to send with its next reserve.
        """
        self._outage = Outage(self.options, self._stats)
        self._runner = Runner(
            self.registry, self.options, self._dependencies, keys=self.queue.payload_keys
        )
        self._keeper = LeaseKeeper(self._port, self._stats)
        if self._records is not None and self.queue.capabilities.cancellable:
            self._cancels = CancelWatch(
                self._records,
                self.options.pause_check,
                self._slots.running.values,
                worker_id=self.worker_id,
            )
        # The loop's next reserve carries the acknowledgements when it can;
        # they go on their own only if it has not come by then.
        acks = AckBatcher(
            self._port,
            delay=2 * self.options.batch_wait.total_seconds() if self._acks_ride_along else 0,
        )
        self._settler = Settler(
            self._port,
            self._runner,
            self._stats,
            self._outage,
            events=self._events,
            locks=self._locks,
            hard_stop=self._hard_event,
            give_up=self._give_up,
            acks=acks,
            finished=self._finished,
            outcomes=self._outcomes(),
            cancels=self._cancels,
            batches=self._batches,
        )
        if self._records is not None and self.options.heartbeat is not None:
            self._heartbeat = Heartbeat(
                self._records,
                self.options,
                self._slots,
                self._stats,
                every=self.options.heartbeat,
                worker_id=self.worker_id,
                is_stopping=lambda: self._stopping,
            )
        self._reserver = Reserver(
            self._port,
            self.options,
            self._slots,
            self._keeper,
            acks=acks if self._acks_ride_along else None,
            pace=self._pace if self._ahead else None,
            wake=self._changed.set,
            is_stopping=lambda: self._stopping,
        )
        if self._pausable is not None:
            self._watch = PauseWatch(
                self._pausable,
                self.options.queues,
                self.options.pause_check,
                self._pauses_changed,
            )

    def _pauses_changed(self, serving: tuple[str, ...], paused: frozenset[str]) -> None:
        """The watch read a change: reserve from `serving` alone from now on, and give back
        what was held ahead from the queues just `paused`."""
        assert self._reserver is not None, "built by run()"
        self._reserver.queues = serving
        if paused:
            self._reserver.cut_wait_short()
            if returned := self._slots.hand_back_held(paused):
                log.info("handing back %d job(s) held ahead from paused queues", returned)
        self._changed.set()

    def _outcomes(self) -> OutcomeRecorder | None:
        if self._records is None:
            return None
        return OutcomeRecorder(
            self._records, keep_succeeded=self.options.keep_succeeded, worker_id=self.worker_id
        )

    # -- the loop --------------------------------------------------------------------

    async def _serve(self) -> None:
        options = self.options
        reserver = self._reserver
        assert reserver is not None, "built by run()"
        deadline = (
            None
            if options.max_time is None
            else time.monotonic() + options.max_time.total_seconds()
        )
        backlog = gathered = empty = short = False
        while not self._stopping:
            if options.max_jobs is not None and self._stats.total >= options.max_jobs:
                log.info("reached max_jobs (%d); stopping", options.max_jobs)
                break
            if deadline is not None and time.monotonic() >= deadline:
                log.info("reached max_time; stopping")
                break
            self._changed.clear()
            while (filled := reserver.next_finished()) is not None:
                taken, ran_short, error = filled
                if error is not None:
                    backlog = short = self._backlog = False
                    await self._broker_failed(error)
                    continue
                self._outage.succeeded()
                backlog = taken > 0 and not ran_short
                short = not backlog
                self._backlog = backlog
                empty = taken == 0
                if empty:
                    self._stats.idles += 1
            if self.is_stopping:
                break
            in_flight = reserver.in_flight
            if not reserver.queues:
                # Every queue is paused: nothing to reserve until the watch reads a change.
                backlog = short = self._backlog = False
                if options.stop_when_empty and not self._slots and not in_flight:
                    try:
                        if await self._drained():
                            break
                    except BrokerError as exc:
                        await self._broker_failed(exc)
                        continue
                with contextlib.suppress(TimeoutError):  # max_time still ends the run
                    timeout = self._idle_timeout(deadline).total_seconds()
                    await asyncio.wait_for(self._changed.wait(), timeout)
                continue
            if short and not in_flight:
                # The queues ran dry: wait for work (or a job ending) before asking again.
                short = False
                if empty and options.stop_when_empty and not self._slots:
                    try:
                        if await self._drained():
                            break
                    except BrokerError as exc:
                        await self._broker_failed(exc)
                        continue
                if self._waits_with_reserve and (free := self._free_slots()) > 0:
                    # The reserve goes with the wait: nothing ends it but work or its time.
                    self._launch_fill(free, wait=self._idle_timeout(deadline))
                    continue
                try:
                    await self._idle(deadline)
                except BrokerError as exc:
                    await self._broker_failed(exc)
                continue
            free = self._free_slots()
            if free > 0 and not short and in_flight < MAX_FILLS and (backlog or not in_flight):
                if backlog and not gathered and free < self._batch_goal and self._slots.handling:
                    await self._gather_slots()
                    gathered = True
                    continue
                gathered = False
                self._launch_fill(free)
                continue
            await self._changed.wait()

    async def _drained(self) -> bool:
        """Whether a draining worker whose queues came back empty may stop (`drain.py`)."""
        paused = self._watch.paused if self._watch is not None else frozenset()
        return await drain.finished(self.queue, self.options, self._stats, paused)

    async def _broker_failed(self, error: BaseException) -> None:
        """Count a failed reserve and wait before the next, or give up after too many."""
        if not isinstance(error, BrokerError):
            raise error
        delay = self._outage.failed(error)
        if delay is None:
            self._give_up(error)
            return
        log.warning(
            "the broker failed (%s); error %d of %d in a row, trying again in %.2fs",
            error,
            self._outage.consecutive,
            self.options.max_consecutive_errors,
            delay.total_seconds(),
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop_event.wait(), delay.total_seconds())

    def _launch_fill(self, free: int, *, wait: timedelta | None = None) -> None:
        """Reserve into `free` slots in the background (`Reserver.launch`)."""
        assert self._reserver is not None, "built by run()"
        self._reserver.launch(free, wait=wait)

    def _cut_wait_short(self) -> None:
        """End an idle wait that carries a reserve, if one is on its way."""
        if self._reserver is not None:
            self._reserver.cut_wait_short()

    async def _gather_slots(self) -> None:
        """Wait, `batch_wait` at most, for half the slots to free, then let the loop reserve.

        With a backlog, a worker that reserves the moment any one job ends
        pays a round trip per job. Waiting a moment for more of the running
        jobs to end lets one reserve fill many slots, and carry all their
        acknowledgements. Only a busy worker with a backlog waits, and only
        for a few milliseconds, so a slow job never holds the others up long.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.options.batch_wait.total_seconds()
        timer = loop.call_at(deadline, self._changed.set)
        try:
            while (
                not self._stopping
                and self._slots.handling
                and self._free_slots() < self._batch_goal
                and loop.time() < deadline
            ):
                self._changed.clear()
                await self._changed.wait()
        finally:
            timer.cancel()

    def _free_slots(self) -> int:
        """How many jobs the next reserve may bring: ahead of the slots while work waits."""
        ahead = self._ahead if self._backlog and self._pace.holding_ahead_pays else 0
        max_jobs = self.options.max_jobs
        limit = None if max_jobs is None else max_jobs - self._stats.total
        return self._slots.free(ahead=ahead, limit=limit)

    def _idle_timeout(self, deadline: float | None) -> timedelta:
        """How long an idle wait may last: `sleep`, or less before `max_time` runs out."""
        timeout = self.options.sleep
        if deadline is not None:
            remaining = max(0.0, deadline - time.monotonic())
            timeout = min(timeout, timedelta(seconds=remaining))
        return timeout

    async def _idle(self, deadline: float | None) -> None:
        """Wait for work, a job finishing, or a stop, whichever comes first."""
        timeout = self._idle_timeout(deadline)
        assert self._reserver is not None, "built by run()"
        queues = self._reserver.queues
        waiting = asyncio.create_task(self._port.wait_for_work(queues, timeout))
        changed = asyncio.create_task(self._changed.wait())
        try:
            await asyncio.wait({waiting, changed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiting.cancel()
            changed.cancel()
            await asyncio.gather(waiting, changed, return_exceptions=True)
        if not waiting.cancelled() and (error := waiting.exception()) is not None:
            raise error

    def _launch(self, slot: Slot) -> None:
        """Run a job's handler in a task of its own (`Slots` decides when)."""
        if self._hard:
            slot.control.interrupt()
        job = slot.reservation.job
        loop = self._loop
        assert loop is not None, "set by run()"
        cancels = self._cancels
        if cancels is not None and cancels.marked and job.id in cancels.marked:
            slot.control.cancel_job()  # it is settled as cancelled, never run
        slot.started = time.monotonic()
        slot.task = loop.create_task(self._work(slot), name=f"rainier-queue {job.name} {job.id}")

    async def _work(self, slot: Slot) -> None:
        job = slot.reservation.job
        handling = True
        settled_later = False
        try:
            if self._gate is not None and not slot.control.stop_asked:
                limited = self._gate.limits(job)
                if limited is not None:
                    lease = slot.reservation.lease
                    taken = await self._gate.take(job, *limited, lease)
                    if isinstance(taken, Refused):
                        await self._settler.step_aside(slot.lease, taken.reason, taken.wait)
                        self._cut_wait_short()  # another key's job may be waiting behind it
                        return
                    slot.limit = taken
            if self._events:  # a dispatcher with listeners (no event is built for nobody)
                try:
                    await self._events.emit(JobProcessing(job=job))
                except Exception:
                    log.exception("the event dispatcher failed on JobProcessing; ignored")
            if self._job_scopes:
                attempt = await self._run_in_scopes(slot)
            else:
                attempt = await self._runner.run(slot.reservation, slot.control, slot.task)
            handling = False
            self._slots.handler_returned()
            if slot.limit is not None and attempt.verdict is Verdict.ABANDONED:
                # Its thread still runs: the slot is kept, unrenewed, and lapses with its lease.
                LimitGate.let_lapse(slot.limit)
                slot.limit = None
            if self._ahead and attempt.verdict is not Verdict.INTERRUPTED:
                self._pace.job_took(time.monotonic() - attempt.started)
            self._changed.set()
            if slot.lease.lost:
                log.info(
                    "job `%s` %s ended after its lease was lost; not recorded", job.name, job.id
                )
                return
            # A plain success ends this task here; its acknowledgement finishes the slot.
            settled_later = self._settler.settle_soon(attempt, slot.lease, slot)
            if settled_later:
                return
            await self._settler.settle(attempt, slot.lease)
            if attempt.verdict is not Verdict.SUCCEEDED:
                # It may be back in the queue (a retry), due before an idle wait ends.
                self._cut_wait_short()
        except Exception:
            log.exception(
                "the worker failed while handling job `%s` %s; it runs again once its lease lapses",
                job.name,
                job.id,
            )
        finally:
            if handling:
                self._slots.handler_returned()
            if not settled_later:
                self._finished(slot)

    async def _run_in_scopes(self, slot: Slot) -> Attempt:
        """Run the job inside the instruments' scopes, telling them how it ended.

        A job that a stop reached before it started is handed back unrun: no scope sees it,
        so metrics and traces count neither a start nor an interruption (the runner checks
        the same flag with nothing awaited in between)."""
        if slot.control.is_interrupted():
            return await self._runner.run(slot.reservation, slot.control, slot.task)
        run = JobRun(job=slot.reservation.job)
        entered, _ = enter_quietly(self._job_scopes, run)  # no generator per job, as `quietly`
        try:
            attempt = await self._runner.run(slot.reservation, slot.control, slot.task)
        except BaseException as exc:
            leave_quietly(entered, exc)
            raise
        run.outcome = "lost" if slot.lease.lost else outcome_of(attempt)
        run.error = attempt.error
        leave_quietly(entered)
        return attempt

    def _finished(self, slot: Slot) -> None:
        """A job's result is recorded (or given up on): its slot is free for good."""
        if slot.limit is not None and self._gate is not None:
            self._gate.give_back(slot.limit)
            slot.limit = None
        self._keeper.forget(slot.lease)
        self._slots.finished(slot)
        self._changed.set()

    # -- stopping ----------------------------------------------------------------------

    def _request_stop(self, now: bool) -> None:
        self._stopping = True
        self._cut_wait_short()
        self._slots.stop()
        self._stop_event.set()
        self._changed.set()
        if now and not self._hard:
            self._hard = True
            self._hard_event.set()

    def _give_up(self, error: BrokerError) -> None:
        if self._fatal is None:
            self._fatal = error
        self._request_stop(now=True)

    async def _drain(self) -> None:
        """Let running jobs finish within the grace period; interrupt and hand back the rest."""
        if self._reserver is not None:
            # Jobs a reserve on its way brings back are started, then handled like the rest.
            await self._reserver.settle_down()
        await shutdown.finish_held_jobs(
            self._slots,
            self._changed,
            grace=None if self._hard else self.options.grace,
            hard=self._hard_event,
        )
        if self._gate is not None:
            await self._gate.settle_down()

    async def _tell_queue_we_stopped(self) -> None:
        """Let the driver give back what it held for this worker (Kafka partition leases)."""
        try:
            await self._port.on_worker_stop()
        except Exception as exc:
            log.warning("the queue's stop hook failed (%s); its leases lapse on their own", exc)

    def __repr__(self) -> str:
        state = "stopping" if self._stopping else "running" if self._active else "idle"
        return (
            f"<Worker {self.queue.describe()} queues={','.join(self.options.queues)} "
            f"concurrency={self.options.concurrency} {state}>"
        )


def _records_of(queue: Queue) -> RecordStore | None:
    """`queue` as a record store, if it declares one (heartbeats, succeeded records)."""
    if queue.capabilities.records and isinstance(queue, RecordStore):
        return queue
    return None


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


__all__ = ["Worker"]
