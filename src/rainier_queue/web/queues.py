# SPDX-License-Identifier: MIT
"""The overview's data: each queue's depth, states, oldest wait, failures and last hour.

Why apart from the other pages' data: it is the one read that fans out (a
few reads per queue, per poll) and the one that keeps something between
requests, the depth samples of `history`. Each figure a driver cannot
give is None, and the page shows the reason beside the table once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from .. import lookup
from .._clock import utcnow
from ..errors import QueueError, UnsupportedOperation
from ..overview import Overview, overview
from ..queue import Countable, OldestWaiting, Pausable, QueueCounts
from .board import Board
from .history import sparkline
from .reasons import no_failed_listing, no_pause
from .views import FAILED_COUNTED, failed_jobs, one_line


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRow:
    name: str
    depth: int | None = None
    counts: QueueCounts | None = None
    oldest: timedelta | None = None
    can_age: bool = False
    failed: int | None = None
    paused: bool | None = None
    trend: float | None = None
    spark: str = ""
    samples: int = 0
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OverviewPage:
    rows: list[QueueRow]
    system: Overview | None
    workers_reason: str | None
    failed_reason: str | None
    failed_more: bool
    pause_reason: str | None
    age_reason: str | None
    done: int | None
    """Jobs the live workers have finished, summed from their heartbeats."""


async def overview_page(board: Board) -> OverviewPage:
    queue = board.queue
    system: Overview | None = None
    workers_reason = None
    try:
        system = await overview(queue, board.named_queues())
    except QueueError as exc:
        workers_reason = f"could not read the workers' heartbeats: {one_line(exc)}"
    if system is None and workers_reason is None:
        workers_reason = await _workers_reason(board)
    names = dict.fromkeys(board.named_queues())
    if system is not None:
        names.update(dict.fromkeys(q for beat in system.beats for q in beat.queues))
    failed_reason = no_failed_listing(queue)
    failed_by_queue: dict[str, int] = {}
    failed_more = False
    if failed_reason is None:
        try:
            listed = await failed_jobs(board, queue_name=None, limit=FAILED_COUNTED)
            failed_more = len(listed) >= FAILED_COUNTED
            for f in listed:
                failed_by_queue[f.job.queue] = failed_by_queue.get(f.job.queue, 0) + 1
            names.update(dict.fromkeys(failed_by_queue))
        except QueueError as exc:
            failed_reason = f"could not list failed jobs: {one_line(exc)}"
    pause_reason = no_pause(queue)
    paused: frozenset[str] = frozenset()
    if pause_reason is None and isinstance(queue, Pausable):
        try:
            paused = await queue.paused(list(names))
        except QueueError as exc:
            pause_reason = f"could not read which queues are paused: {one_line(exc)}"
    can_age = isinstance(queue, OldestWaiting)
    rows = []
    now = utcnow()
    for name in names:
        rows.append(
            await _row(
                board,
                name,
                now,
                failed=None if failed_reason else failed_by_queue.get(name, 0),
                paused=None if pause_reason else name in paused,
                can_age=can_age,
            )
        )
    live = system.live if system is not None else ()
    return OverviewPage(
        rows=rows,
        system=system,
        workers_reason=workers_reason,
        failed_reason=failed_reason,
        failed_more=failed_more,
        pause_reason=pause_reason,
        age_reason=None
        if can_age
        else (
            f"the {queue.name} driver cannot tell how long its oldest job has waited without "
            "reading every message"
        ),
        done=sum(b.processed for b in live) if system is not None else None,
    )


async def _row(
    board: Board,
    name: str,
    now: datetime,
    *,
    failed: int | None,
    paused: bool | None,
    can_age: bool,
) -> QueueRow:
    queue = board.queue
    try:
        depth = await queue.size(name)
        counts = await queue.counts(name) if isinstance(queue, Countable) else None
        oldest = await queue.oldest_wait(name) if isinstance(queue, OldestWaiting) else None
    except QueueError as exc:
        return QueueRow(name=name, failed=failed, paused=paused, error=one_line(exc))
    history = board.history
    if history.due(name, now):
        history.add(name, depth, now)
    samples = history.of(name)
    return QueueRow(
        name=name,
        depth=depth,
        counts=counts,
        oldest=oldest,
        can_age=can_age,
        failed=failed,
        paused=paused,
        trend=history.per_minute(name),
        spark=sparkline(samples),
        samples=len(samples),
    )


async def _workers_reason(board: Board) -> str | None:
    try:
        await lookup.workers(board.queue)
    except UnsupportedOperation as exc:
        return str(exc)
    return None


__all__ = ["OverviewPage", "QueueRow", "overview_page"]
