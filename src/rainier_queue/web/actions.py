# SPDX-License-Identifier: MIT
"""The dashboard's actions: retry, forget and flush failed jobs, pause and resume a queue,
and run a schedule now. POST only, each behind the CSRF check and the read-only switch.

Why through the same calls as the CLI: `retry`, `forget` and `flush` are
the failed store's own (`FailedJobStore`), pause and resume the manager's,
`schedule test` the scheduler's `trigger`; the dashboard adds the form
around them and nothing of a driver's. Each action answers with a redirect
back to the page it came from (post, redirect, get: a reload does not
repeat it), carrying one line saying what was done.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from ..errors import QueueError
from ..failed_retries import retry_all_failed
from ..queue import FailedJobStore
from ..scheduling import UnknownSchedule
from .board import Board
from .reasons import no_failed_store
from .rendering import root_of
from .security import CSRF_FIELD, csrf_matches
from .views import matches

Form = dict[str, list[str]]

READ_ONLY = "this dashboard is read-only: it shows the queues, and changes nothing"


class Refused(Exception):
    """An action that cannot be done as asked; its message is shown on the page."""


class Actions:
    """The POST handlers of one board."""

    def __init__(self, board: Board) -> None:
        self.board = board

    async def _run(self, request: Request, action: Callable[[Form], Awaitable[str]]) -> Response:
        if self.board.read_only:
            return PlainTextResponse(READ_ONLY, status_code=403)
        if request.headers.get("content-type", "").split(";")[0].strip() != (
            "application/x-www-form-urlencoded"
        ):
            return PlainTextResponse("actions take a form (application/x-www-form-urlencoded)", 415)
        body = await request.body()
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        if not csrf_matches(request, _one(form, CSRF_FIELD)):
            return PlainTextResponse(
                "refused: this form's CSRF token is missing or stale; reload the page and try "
                "again",
                status_code=403,
            )
        try:
            said = await action(form)
        except Refused as exc:
            said = str(exc)
        except QueueError as exc:
            said = f"not done: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        back = _one(form, "back") or "/"
        if not back.startswith("/") or back.startswith("//") or "\\" in back:
            back = "/"
        joiner = "&" if "?" in back else "?"
        return RedirectResponse(
            f"{root_of(request)}{back}{joiner}{urlencode({'said': said})}", status_code=303
        )

    # -- failed jobs ------------------------------------------------------------------

    def _store(self) -> FailedJobStore:
        queue = self.board.queue
        reason = no_failed_store(queue)
        if reason is not None:
            raise Refused(reason)
        assert isinstance(queue, FailedJobStore)
        return queue

    async def retry(self, request: Request) -> Response:
        async def act(form: Form) -> str:
            store = self._store()
            ids = _ids(form)
            if ids:
                done = [i for i in ids if await store.retry_failed(i)]
                return _counted("retried", done, ids)
            if _one(form, "all") != "yes":
                raise Refused("choose the failed jobs to retry, or retry all that are shown")
            queue, name = _one(form, "queue"), _one(form, "name")
            count = await retry_all_failed(
                store, queue=queue or None, keep=lambda f: not name or matches(f.job.name, name)
            )
            return f"retried {count} failed job(s)" + _filtered(queue, name)

        return await self._run(request, act)

    async def forget(self, request: Request) -> Response:
        async def act(form: Form) -> str:
            store = self._store()
            ids = _ids(form)
            if not ids:
                raise Refused("choose the failed jobs to forget")
            done = [i for i in ids if await store.forget_failed(i)]
            return _counted("forgot", done, ids)

        return await self._run(request, act)

    async def flush(self, request: Request) -> Response:
        async def act(form: Form) -> str:
            store = self._store()
            queue = _one(form, "queue")
            if _one(form, "confirm") != "yes":
                raise Refused(
                    "flushing deletes the failed jobs for good: tick the box that says so, "
                    "then flush"
                )
            removed = await store.flush_failed(queue=queue or None)
            return f"flushed {removed} failed job(s)" + _filtered(queue, "")

        return await self._run(request, act)

    # -- queues and schedules ---------------------------------------------------------

    async def pause(self, request: Request) -> Response:
        async def act(form: Form) -> str:
            queue = _queue_named(form)
            if await self.board.manager.pause(queue, connection=self.board.connection):
                return f"paused queue {queue}: workers take none of its jobs until it is resumed"
            return f"queue {queue} was paused already"

        return await self._run(request, act)

    async def resume(self, request: Request) -> Response:
        async def act(form: Form) -> str:
            queue = _queue_named(form)
            if await self.board.manager.resume(queue, connection=self.board.connection):
                return f"resumed queue {queue}: workers take its jobs again"
            return f"queue {queue} was not paused"

        return await self._run(request, act)

    async def schedule_test(self, request: Request) -> Response:
        async def act(form: Form) -> str:
            scheduler = self.board.scheduler
            if scheduler is None:
                raise Refused("this dashboard was given no schedules")
            name = _one(form, "name")
            try:
                made = await scheduler.trigger(name)
            except UnknownSchedule as exc:
                raise Refused(str(exc)) from exc
            if made.status == "enqueued":
                return f"enqueued {made.schedule} now as job {made.job_id}"
            return f"{made.schedule} was {made.status}: {made.reason}"

        return await self._run(request, act)


def _one(form: Form, key: str) -> str:
    values = form.get(key)
    return values[0].strip() if values else ""


def _ids(form: Form) -> list[str]:
    return list(dict.fromkeys(v.strip() for v in form.get("id", []) if v.strip()))


def _queue_named(form: Form) -> str:
    queue = _one(form, "queue")
    if not queue:
        raise Refused("say which queue")
    return queue


def _counted(verb: str, done: list[str], asked: list[str]) -> str:
    said = f"{verb} {len(done)} of {len(asked)} failed job(s)"
    missing = len(asked) - len(done)
    if missing:
        said += f"; {missing} no longer in the failed store (retried or forgotten elsewhere)"
    return said


def _filtered(queue: str, name: str) -> str:
    parts = ([f"queue {queue}"] if queue else []) + ([f"name matching {name}"] if name else [])
    return f" ({', '.join(parts)})" if parts else ""


__all__ = ["READ_ONLY", "Actions"]
