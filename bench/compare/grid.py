# SPDX-License-Identifier: MIT
"""The settings users pick, beyond the one `make bench` started with: the grid.

A margin measured at one setting says little about the next: more
concurrency per process moves the bottleneck from the worker to the
server, a deep backlog grows indexes and dead rows, an application
dispatches `Job` objects rather than pushing ready envelopes, and real jobs
wait on I/O. So besides today's throughput run, `bench.compare.run` runs:

- **concurrency** cells: `--grid-jobs` jobs at concurrency 8 and at 32 per
  process, ours beside the peers that came near the fastest in today's run
  (`contenders`, every mode of each), so the slow peers do not take the
  time budget;
- **io**: each job waits 20 ms before its count, at concurrency 64, ours
  beside the asyncio peers (whose jobs await the sleep, as ours do) and
  the thread-capable ones (whose jobs block in it: Huey and Celery in both
  their modes, since this is where their thread workers may win, and
  Dramatiq's threads);
- **enqueue**: ours through the driver's `push_many` (of envelopes built
  before the clock, and built inside it) and through the public
  `QueueManager.dispatch_many` with real `Job` objects, interleaved;
- **backlog**: ours alone with `--backlog` jobs queued (1,000,000 by
  default) on PostgreSQL, Redis and SQLite, drained at the grid's highest
  concurrency (the quickest drain of a million), with the drain rate over
  its first and last tenth against the grid's cell at that concurrency, and
  what the emptied store leaves behind. No peer
  runs here: enqueueing a million jobs through the slowest peers' bulk
  APIs alone takes longer than the whole benchmark may.
"""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from . import report
from .adapters import console, run_adapter
from .constants import OURS
from .modes import peer_of
from .workloads import Setting, choose, emit, now, throughput

ASYNC_PEERS = frozenset({"taskiq", "saq", "pgqueuer", "procrastinate"})
"""Peers whose jobs are coroutines: the I/O-bound workload's sleep is awaited, as ours is."""
THREAD_PEERS = frozenset({"huey", "celery", "dramatiq"})
"""Peers that can run jobs in threads, where a job blocked in its sleep frees the GIL for the
others: in the I/O-bound workload, each in every mode it has (Huey's and Celery's processes
too, so the faster of the two is the one compared). RQ, one job at a time per worker, is not."""
IO_PEERS = ASYNC_PEERS | THREAD_PEERS

IO_BACKENDS = ("postgres", "redis")
"""Where the asyncio peers run."""

ENQUEUE_WAYS = ("push_many", "push_many_built", "dispatch_many")
"""The driver's bulk push of envelopes built beforehand, the same with the envelopes built
inside the clock (what a caller of `push_many` pays), and the manager's bulk dispatch of
`Job`s built inside the clock (what an application pays)."""

BACKLOG_BACKENDS = ("sqlite", "postgres", "redis")
ENQUEUE_BACKENDS = ("sqlite", "postgres", "mysql", "redis")
GRID_BACKENDS = ("sqlite", "postgres", "mysql", "redis")

NEAR = 0.5
"""A peer is a contender in the grid if its end-to-end rate today was at least this
fraction of the fastest peer's on that backend."""


def contenders(base: list[dict[str, Any]], limit: int) -> set[tuple[str, str]] | None:
    """(system, backend) pairs worth running in the grid: near the fastest today, at most `limit`.

    A peer is judged by its fastest mode, `limit` counts peers (not modes),
    and a chosen peer runs in every mode that finished today: the faster mode
    at one concurrency need not be the faster at the next. None (every peer)
    when today's run did not happen, so there is nothing to choose by.
    """
    if not base:
        return None
    chosen: set[tuple[str, str]] = set()
    for backend in {r["backend"] for r in base}:
        peers = sorted(
            (r for r in base if r["backend"] == backend and r["system"] != OURS and r["ok"]),
            key=lambda r: r["e2e_jobs_s"] or 0,
            reverse=True,
        )
        if not peers:
            continue
        best = peers[0]["e2e_jobs_s"] or 0
        near = [peer_of(r["system"]) for r in peers if (r["e2e_jobs_s"] or 0) >= NEAR * best]
        picked = list(dict.fromkeys(near))[:limit]
        chosen |= {(r["system"], backend) for r in peers if peer_of(r["system"]) in picked}
    return chosen


def _ours_on(backends: tuple[str, ...]) -> set[tuple[str, str]]:
    return {(OURS, b) for b in backends}


def concurrency_cells(
    args: argparse.Namespace, sink: TextIO, base: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """`--grid-jobs` jobs at each of `--grid-concurrency`, ours beside the contenders."""
    peers = contenders(base, args.grid_peers)
    rows: list[dict[str, Any]] = []
    for concurrency in args.grid_concurrency:
        pairs = _ours_on(GRID_BACKENDS)
        if peers is None:
            pairs |= {(s, b) for s, b, _ in choose(args, quiet=True) if b in GRID_BACKENDS}
        else:
            pairs |= {p for p in peers if p[1] in GRID_BACKENDS}
        setting = Setting(
            name=f"concurrency {concurrency}",
            jobs=args.grid_jobs,
            concurrency=concurrency,
            pairs=pairs,
            rounds=args.grid_rounds,
        )
        rows += throughput(args, sink, setting)
    return rows


def io_bound(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    """Jobs that wait `--io-sleep-ms` each, at `--io-concurrency`, beside `IO_PEERS`."""
    pairs = _ours_on(IO_BACKENDS) | {
        (s, b)
        for s, b, _ in choose(args, quiet=True)
        if peer_of(s) in IO_PEERS and b in IO_BACKENDS
    }
    setting = Setting(
        name=f"I/O-bound, {args.io_sleep_ms:g} ms sleep",
        jobs=args.io_jobs,
        concurrency=args.io_concurrency,
        sleep_ms=args.io_sleep_ms,
        pairs=pairs,
        rounds=args.grid_rounds,
    )
    return throughput(args, sink, setting)


def backlog_concurrency(args: argparse.Namespace) -> int:
    """The grid's highest concurrency: the fastest drain, compared with its own grid cell."""
    return int(max(args.grid_concurrency or [args.concurrency]))


def backlog(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    """Ours alone, `--backlog` jobs queued, drained to the end: start and end rates, sizes."""
    setting = Setting(
        name=f"backlog {args.backlog:,}",
        jobs=args.backlog,
        concurrency=backlog_concurrency(args),
        pairs=_ours_on(BACKLOG_BACKENDS),
        rounds=1,
    )
    saved = args.timeout
    args.timeout = max(args.timeout, args.backlog / 500)  # a million jobs take minutes
    try:
        return throughput(args, sink, setting)
    finally:
        args.timeout = saved


def enqueue_ways(args: argparse.Namespace, sink: TextIO) -> list[dict[str, Any]]:
    """Ours, `--grid-jobs` jobs through push_many and through dispatch_many, interleaved."""
    backends = [b for _, b, _ in choose(args, quiet=True, pairs=_ours_on(ENQUEUE_BACKENDS))]
    rates: dict[tuple[str, str], list[float]] = {}
    errors: dict[str, list[str]] = {b: [] for b in backends}
    rounds = args.grid_rounds or args.rounds
    for round_no in range(1, rounds + 1):
        for backend in backends:
            for way in ENQUEUE_WAYS:
                console.print(f"enqueue round {round_no}/{rounds}: {way} ({backend}) ...")
                result = run_adapter(
                    OURS,
                    backend,
                    "bench.compare.ours",
                    jobs=args.grid_jobs,
                    processes=1,
                    concurrency=1,
                    timeout=args.timeout,
                    workload="enqueue",
                    enqueue=way,
                )
                ok = bool(result.get("ok")) and bool(result.get("enqueue_s"))
                row: dict[str, Any] = {
                    "type": "run",
                    "workload": "enqueue",
                    "at": now(),
                    "round": round_no,
                    "backend": backend,
                    "way": way,
                    "jobs": args.grid_jobs,
                    "ok": ok,
                }
                if ok:
                    row["enqueue_jobs_s"] = round(args.grid_jobs / result["enqueue_s"], 1)
                    rates.setdefault((backend, way), []).append(row["enqueue_jobs_s"])
                else:
                    errors[backend].append(str(result.get("error")))
                emit(sink, row)
    rows: list[dict[str, Any]] = []
    for backend in backends:
        push, built, dispatch = (report.median(rates.get((backend, w), [])) for w in ENQUEUE_WAYS)
        row = {
            "backend": backend,
            "jobs": args.grid_jobs,
            "ok": not errors[backend] and None not in (push, built, dispatch),
            "push_many_jobs_s": push,
            "push_many_built_jobs_s": built,
            "dispatch_many_jobs_s": dispatch,
            "push_over_dispatch": round(push / dispatch, 3) if push and dispatch else None,
            "built_over_dispatch": round(built / dispatch, 3) if built and dispatch else None,
            "errors": errors[backend],
        }
        rows.append(row)
        emit(sink, {"type": "result", "workload": "enqueue", "rounds": rounds, **row})
    return rows


__all__ = [
    "backlog",
    "backlog_concurrency",
    "concurrency_cells",
    "contenders",
    "enqueue_ways",
    "io_bound",
]
