# SPDX-License-Identifier: MIT
"""`rainier-queue work`: run a worker, or several under a supervisor.

Every `WorkerOptions` field is a flag, so nothing a worker can do needs
code. Before the first job the settings are checked (`check_worker_settings`)
and a worker that cannot work safely, above all one whose job timeout
outlives the lease, refuses to start with exit code 2 rather than running
jobs twice. Fixing upstream's gap, the worker is given the manager's locks,
so the uniqueness lock of a job it finishes is given back at once instead of
lapsing an hour later.

`--processes N` (N > 1) checks the same settings once, then runs N copies
of this very command with `--processes 1` under the `Supervisor`, which
restarts a child that crashes and passes signals on.

`--metrics-port` and `--tracing` add the instruments (`telemetry.py`);
without them the worker is built with none and pays nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from ..cache.stores import open_cache_beside
from ..durations import format_duration, parse_duration
from ..envelope import format_time
from ..errors import BrokerError, ConfigurationError
from ..events import EventDispatcher
from ..limits import found_store, limited_classes
from ..locks import Cache
from ..outbox import Relay
from ..queue import Queue
from ..worker import Supervisor, Worker, WorkerOptions, WorkerStats, check_worker_settings
from .collector import StartUpPause
from .event_loop import loop_name
from .exit_codes import ExitCode
from .loading import Loaded
from .output import Problem, echo, error_console, json_mode, note, say_error, say_json, warn
from .progress import Clock, Tally, summary, summary_fields
from .runtime import State, message_for, run_on_application, warn_if_private
from .schedule_option import SCHEDULE_OPTION
from .telemetry import Instruments, TelemetryFlags, supervisor_metrics, worker_instruments

if TYPE_CHECKING:
    from ..scheduling import Scheduler

DEFAULTS = WorkerOptions()


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> timedelta | None:
    """A click callback reading `30s`, `5m`, `250ms`, `1h30m` or a number of seconds."""
    if value is None:
        return None
    try:
        return parse_duration(value, setting=param.name or "value")
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


DURATION: dict[str, Any] = {"callback": duration, "metavar": "DURATION"}
"""The keyword arguments that make a click option a duration."""


def _shown(value: timedelta | None) -> str:
    return "none" if value is None else format_duration(value)


@click.command()
@click.option(
    "--queue",
    "queues",
    metavar="A,B",
    help="Queues to serve, comma-separated, first drained first. "
    "Default: the config's `queues`, else `default`.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help=f"Jobs run at once in this process [{DEFAULTS.concurrency}].",
)
@click.option(
    "--sleep", **DURATION, help=f"Longest idle wait for new work [{_shown(DEFAULTS.sleep)}]."
)
@click.option(
    "--timeout",
    **DURATION,
    help=f"Run limit for jobs without their own; 0 for none [{_shown(DEFAULTS.timeout)}].",
)
@click.option("--tries", type=click.IntRange(min=1), help="Attempts floor for every job.")
@click.option("--max-jobs", type=click.IntRange(min=1), help="Stop after this many jobs ended.")
@click.option("--max-time", **DURATION, help="Stop taking work after this long.")
@click.option(
    "--stop-when-empty",
    "--once",
    "stop_when_empty",
    is_flag=True,
    default=None,
    help="Stop once every queue is empty and nothing on it falls due within --drain-wait; "
    "exit 5 if work due later was left.",
)
@click.option(
    "--drain-wait",
    **DURATION,
    help="With --stop-when-empty, how far ahead a retry or a dead worker's job may fall "
    "due and still be waited for [the connection's lease].",
)
@click.option(
    "--grace",
    **DURATION,
    help=f"On a stop, how long running jobs may finish [{_shown(DEFAULTS.grace)}].",
)
@click.option(
    "--max-consecutive-errors",
    type=click.IntRange(min=1),
    help=f"Broker failures in a row to ride out before exiting 3 "
    f"[{DEFAULTS.max_consecutive_errors}].",
)
@click.option(
    "--max-error-backoff",
    **DURATION,
    help=f"Longest wait between broker retries [{_shown(DEFAULTS.max_error_backoff)}].",
)
@click.option(
    "--prefetch", type=click.IntRange(min=1), help="Jobs reserved per round trip [free slots]."
)
@click.option(
    "--reserve-ahead",
    type=click.IntRange(min=0),
    help="Jobs a busy worker may hold reserved beyond those it runs, while its jobs "
    "take no more than a few reserve round trips or 50 ms; 0 for never [the concurrency].",
)
@click.option(
    "--batch-wait",
    **DURATION,
    help="With a backlog, how long to let running jobs finish so the next reserve "
    f"takes a batch; 0 for never [{_shown(DEFAULTS.batch_wait)}].",
)
@click.option(
    "--pause-check",
    **DURATION,
    help="How often to read which queues are paused (`pause`) and which jobs cancelled "
    "(`cancel`): the longest a worker goes on taking a paused queue's jobs, or running "
    f"a cancelled one [{_shown(DEFAULTS.pause_check)}].",
)
@click.option(
    "--heartbeat",
    **DURATION,
    help="How often the worker records its heartbeat (`rainier-queue workers`); 0 for never "
    f"[{_shown(DEFAULTS.heartbeat)}].",
)
@click.option(
    "--keep-succeeded",
    **DURATION,
    help="Record every job that succeeds for this long, so `job ID` says `succeeded` after "
    "it is gone: one more write per job [none: only jobs that ask].",
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes; more than 1 runs them under a supervisor.",
)
@click.option(
    "--with-scheduler",
    is_flag=True,
    default=False,
    help="Also run the schedules in this process (see `schedule work`); "
    "safe on every worker: each tick is claimed once.",
)
@SCHEDULE_OPTION
@click.option(
    "--metrics-port",
    type=click.IntRange(min=0, max=65535),
    help="Serve Prometheus metrics on this port (0: any free port, shown at start); "
    "needs the 'prometheus' extra. With --processes, the supervisor serves them summed.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="The address --metrics-port listens on; 0.0.0.0 for every interface.",
)
@click.option("--metrics-dir", hidden=True, help="(Set by the supervisor for its children.)")
@click.option(
    "--tracing",
    is_flag=True,
    default=False,
    help="Run each job in an OpenTelemetry span, a child of its dispatch's, and carry the "
    "trace on in the jobs it dispatches; needs the 'otel' extra and an SDK configured by "
    "the application.",
)
@click.option(
    "--with-relay",
    is_flag=True,
    default=False,
    help="Also relay the connection's outbox to it in this process (see `relay`); "
    "safe on every worker: each row is claimed by one relay at a time.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress with --stop-when-empty: a bar on a terminal, a line every few seconds "
    "elsewhere [on when stderr is a terminal].",
)
@click.pass_context
def work(ctx: click.Context, /, **params: Any) -> None:
    """Run a worker until stopped (SIGTERM/SIGINT: graceful; twice: at once)."""
    state: State = ctx.obj
    processes: int = params.pop("processes")
    progress: bool | None = params.pop("progress")
    with_scheduler: bool = params.pop("with_scheduler")
    schedule_spec: str | None = params.pop("schedule_spec")
    with_relay: bool = params.pop("with_relay")
    queues = _parse_queues(params.pop("queues"))
    telemetry = TelemetryFlags(
        metrics_port=params.pop("metrics_port"),
        metrics_host=params.pop("metrics_host"),
        metrics_dir=params.pop("metrics_dir"),
        tracing=params.pop("tracing"),
    )
    telemetry.check()
    given = {name: value for name, value in params.items() if value is not None}
    for off in ("timeout", "heartbeat", "keep_succeeded"):
        if off in given and given[off] == timedelta(0):
            given[off] = None
    if schedule_spec is not None and not with_scheduler:
        raise Problem("--schedule is for --with-scheduler; add it, or leave --schedule out")
    if processes > 1:
        scheduling = (schedule_spec,) if with_scheduler else None
        raise click.exceptions.Exit(
            _supervise(ctx, state, processes, queues, given, scheduling, telemetry, with_relay)
        )

    stranded: list[int] = []
    pause = StartUpPause()

    async def body(loaded: Loaded) -> int:
        queue, options = _prepare(loaded, state, queues, given)
        # Under JSON logs, progress comes only when asked for, and as JSON lines.
        show_bar = progress if progress is not None else sys.stderr.isatty() and not json_mode()
        scheduler = None
        if with_scheduler:
            from .schedule import build_scheduler  # only a scheduling worker loads the scheduler

            scheduler = await build_scheduler(loaded, schedule_spec, state.settings.connection)
        relay = _relay_for(loaded, state, queue) if with_relay else None
        limits = _limit_store(loaded, queue, state.settings.connection)
        try:
            async with worker_instruments(telemetry, loaded, queue, options.queues) as instruments:
                return await _run_worker(
                    loaded,
                    queue,
                    options,
                    show_bar,
                    stranded,
                    scheduler,
                    relay,
                    started=pause.end,
                    instruments=instruments,
                    limits=limits,
                )
        finally:
            if limits is not None:
                await limits.aclose()

    with pause:
        code = run_on_application(state, body)
    if stranded:
        _exit_leaving_threads(code)
    raise click.exceptions.Exit(code)


def _exit_leaving_threads(code: int) -> None:
    """End the process now, without waiting for handler threads Python cannot stop.

    They ignored the interrupt raised in them; their jobs are left reserved
    until their leases lapse and their results will not be recorded, so
    letting them run on would only do the work a second time beside the
    next delivery. The connections are closed
    by now; only the interpreter's wait for those threads is skipped.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _prepare(
    loaded: Loaded, state: State, queues: tuple[str, ...] | None, given: dict[str, Any]
) -> tuple[Queue, WorkerOptions]:
    """The queue and options to run with, or a `Problem` listing why the worker cannot start."""
    queue = loaded.queue(state.settings.connection)
    # The connection's `worker` table first, the command line's flags over it.
    settings = {**loaded.worker_settings(state.settings.connection), **given}
    configured = settings.pop("queues", None)
    chosen = queues or configured or tuple(loaded.manager.default_queues())
    try:
        options = WorkerOptions(queues=chosen, **settings)
    except ValueError as exc:
        raise Problem(f"the worker settings cannot work: {exc}") from exc
    if problems := check_worker_settings(queue, loaded.registry, options):
        listed = "".join(f"\n  - {problem}" for problem in problems)
        raise Problem(f"the worker did not start, because:{listed}")
    _warn_unserved(loaded, options, explicit=queues is not None or configured is not None)
    warn_if_private(queue)
    return queue, options


def _parse_queues(raw: str | None) -> tuple[str, ...] | None:
    if raw is None:
        return None
    names = tuple(dict.fromkeys(name.strip() for name in raw.split(",") if name.strip()))
    if not names:
        raise Problem(
            "--queue names no queue; give one or more names, such as --queue high,default"
        )
    return names


def _warn_unserved(loaded: Loaded, options: WorkerOptions, *, explicit: bool) -> None:
    if explicit:
        return
    served = set(options.queues)
    for queue_name in loaded.registry.queues():
        if queue_name not in served:
            names = [cls.name for cls in loaded.registry if cls.queue == queue_name]
            listed = ", ".join(f"`{n}`" for n in names)
            warn(
                f"{listed} go(es) to queue `{queue_name}`, which this worker does not serve "
                f"(it serves {', '.join(options.queues)}); pass --queue, or declare `queues` "
                "in the config"
            )


async def _run_worker(
    loaded: Loaded,
    queue: Queue,
    options: WorkerOptions,
    show_bar: bool,
    stranded: list[int],
    scheduler: Scheduler | None = None,
    relay: Relay | None = None,
    *,
    started: Callable[[], None] = lambda: None,
    instruments: Instruments | None = None,
    limits: Cache | None = None,
) -> int:
    """Run the worker to its end; `started` is called just before it takes its first job."""
    total = 0
    if options.stop_when_empty:
        total = sum([await queue.size(name) for name in options.queues])
    # Not forced to be a terminal: on a pipe the tally writes plain lines instead.
    console = error_console() if show_bar else None
    lines = note if show_bar and json_mode() else None
    tally = Tally(total=total, console=console if options.stop_when_empty else None, lines=lines)
    events = EventDispatcher()
    if tally.draws:  # with no bar to move, the worker builds no events at all
        tally.attach(events)
    instruments = instruments or Instruments()
    worker = Worker(
        queue,
        loaded.registry,
        options,
        events=events,
        locks=loaded.manager.locks,
        observers=instruments.observers,
        job_scopes=instruments.job_scopes,
        limits=limits,
    )
    worker.install_signal_handlers()
    note(
        f"working {', '.join(options.queues)} on {queue.describe()} "
        f"(concurrency {options.concurrency}, {loop_name(asyncio.get_running_loop())} loop"
        + (f", backlog {total}" if options.stop_when_empty else "")
        + ")"
    )
    clock = Clock()
    gave_up: BrokerError | None = None
    stop_scheduling = asyncio.Event()
    scheduling = None
    if scheduler is not None:
        note(f"scheduling {len(scheduler.entries)} schedule(s) in this worker")
        scheduling = asyncio.create_task(scheduler.run(stop_scheduling))
    relaying = None
    if relay is not None:
        note(f"relaying the {relay.outbox.describe()} in this worker")
        relaying = asyncio.create_task(relay.run(stop_scheduling))
    with tally:
        try:
            started()
            stats = await worker.run()
        except BrokerError as exc:
            gave_up, stats = exc, worker.stats
        finally:
            stop_scheduling.set()
            if scheduling is not None:
                await scheduling
            if relaying is not None:
                await relaying
    if json_mode():
        fields = summary_fields(stats, clock.elapsed)
        say_json("info", summary(stats, clock.elapsed), fields, err=False)
    else:
        echo(summary(stats, clock.elapsed))
    if stats.left is not None:
        left = stats.left
        due = "" if left.next_due is None else f", the next due at {format_time(left.next_due)}"
        warn(
            f"work is left on the queues, due later than this drain waits for: {left.delayed} "
            f"delayed and {left.reserved} held by workers{due}; run the drain again then, or "
            "give --drain-wait a longer time"
        )
    if stats.threads_left_running:
        stranded.append(stats.threads_left_running)
        warn(
            f"{stats.threads_left_running} plain `def` handler(s) still run in threads, which "
            "Python cannot stop; their jobs are left reserved until their leases lapse and "
            "their results will not be recorded, so this process exits now without waiting "
            "for them, ending them where they stand"
        )
    if gave_up is not None:
        say_error(
            f"gave up after {options.max_consecutive_errors} broker errors in a row: "
            f"{message_for(gave_up)}"
        )
        return ExitCode.BROKER
    return _code(stats)


def _limit_store(loaded: Loaded, queue: Queue, connection: str | None) -> Cache | None:
    """The cache store in the connection's own database or Redis, for rate and concurrency
    limits, when a job class declares one and nothing else gives a store (`locks`, the
    queue's own, or this process for `memory://`). None otherwise: the worker then finds
    its store itself, or refuses to start naming `locks`."""
    if not limited_classes(loaded.registry) or found_store(queue, loaded.manager.locks):
        return None
    url = loaded.urls.get(loaded.connection_name(connection))
    if url is None:
        return None
    try:
        return open_cache_beside(url)
    except ConfigurationError:
        return None  # a broker: no cache store at its URL


def _relay_for(loaded: Loaded, state: State, queue: Queue) -> Relay:
    """The relay of the worker's connection's outbox; a `Problem` when it has none."""
    name = loaded.connection_name(state.settings.connection)
    outbox = loaded.manager.outbox(name)
    if outbox is None:
        raise Problem(
            f"--with-relay: connection `{name}` has no outbox; give it an `outbox` key (the URL "
            "of the application's database, docs/outbox.md), or leave --with-relay out"
        )
    return Relay(outbox, queue)


def _code(stats: WorkerStats) -> int:
    if stats.interrupted or stats.abandoned:
        return ExitCode.INTERRUPTED
    if stats.left is not None:
        return ExitCode.WORK_LEFT
    if stats.failed:
        return ExitCode.JOB_FAILED
    return ExitCode.OK


def _supervise(
    ctx: click.Context,
    state: State,
    processes: int,
    queues: tuple[str, ...] | None,
    given: dict[str, Any],
    scheduling: tuple[str | None] | None,
    telemetry: TelemetryFlags,
    with_relay: bool = False,
) -> int:
    """Check once, then run `processes` copies of this command under a Supervisor.

    `scheduling` holds the `--schedule` spec when each copy also runs the
    schedules, so a broken schedule stops the start-up here, once. With
    `--metrics-port`, the supervisor serves the children's metrics summed.
    """
    served: list[str] = []

    async def check(loaded: Loaded) -> int:
        queue, options = _prepare(loaded, state, queues, given)
        served.extend(options.queues)
        if with_relay:
            _relay_for(loaded, state, queue)
        if scheduling is not None:
            from .schedule import build_scheduler

            await build_scheduler(loaded, scheduling[0], state.settings.connection)
        return ExitCode.OK

    run_on_application(state, check)
    command = [sys.executable, "-m", "rainier_queue"]
    if ctx.parent is not None:
        command += _given_args(ctx.parent, skip=())
    skip = ("processes", "progress", "metrics_port", "metrics_host", "metrics_dir")
    command += ["work", *_given_args(ctx, skip=skip)]
    command += ["--processes", "1", "--no-progress"]
    # A child that ran to its end (even with failed jobs) or refused its
    # configuration stays down; one that crashed or lost its broker is restarted.
    finished = (ExitCode.OK, ExitCode.JOB_FAILED, ExitCode.USAGE, ExitCode.WORK_LEFT)
    with contextlib.ExitStack() as stack:
        on_exit = None
        if telemetry.metrics_port is not None:
            shared = stack.enter_context(
                supervisor_metrics(telemetry, state.settings, state.settings.connection, served)
            )
            command += shared["args"]
            on_exit = shared["on_exit"]
        note(f"starting {processes} worker processes")
        try:
            return Supervisor(command, processes, finished_codes=finished, on_exit=on_exit).run()
        except KeyboardInterrupt:
            return ExitCode.INTERRUPTED


def _given_args(ctx: click.Context, *, skip: tuple[str, ...]) -> list[str]:
    """The options given on the command line to `ctx`'s command, as arguments again.

    Values from the environment are left out: the children inherit it.
    """
    args: list[str] = []
    for param in ctx.command.params:
        name = param.name
        if not isinstance(param, click.Option) or name in skip:
            continue
        if ctx.get_parameter_source(name) is not ParameterSource.COMMANDLINE:
            continue
        value = ctx.params.get(name)
        flag = max(param.opts, key=len)
        if param.count:
            args += [flag] * int(value or 0)
        elif param.is_flag:
            if value:
                args.append(flag)
            elif param.secondary_opts:
                args.append(max(param.secondary_opts, key=len))
        elif value is not None:
            args += [flag, _as_arg(value)]
    return args


def _as_arg(value: object) -> str:
    if isinstance(value, timedelta):
        return repr(value.total_seconds())
    return str(value)


__all__ = ["DURATION", "duration", "work"]
