# SPDX-License-Identifier: MIT
"""`create_app`: the dashboard as an ASGI app, to mount in an application or serve alone.

Why an app factory over a manager the caller already has: the dashboard
reads and acts through a `QueueManager`'s connection, the one the
application dispatches through, so it needs no configuration of its own
beyond who may open it (`auth`, required) and whether it may change
anything (`read_only`). It runs on the event loop of whatever serves it,
where the manager's queues open.

Every request passes the auth hook first (`AuthGate`), static files
included; a refused one gets 401 and nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ConfigurationError, QueueError, UnsupportedOperation
from ..manager import QueueManager
from ..scheduling import Scheduler
from .actions import Actions
from .board import Board
from .history import History, sampled_every
from .pages import Pages
from .rendering import Renderer
from .security import AuthHook, admitted, challenge_of, checked_hook

log = logging.getLogger("rainier_queue.dashboard")

STATIC = Path(__file__).parent / "static"


class AuthGate:
    """ASGI middleware: a request the auth hook does not let in gets 401, nothing more."""

    def __init__(self, app: ASGIApp, auth: AuthHook) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            allowed = await admitted(self.auth, request)
        except Exception:
            log.exception("the dashboard's auth hook raised; the request is refused")
            allowed = False
        if allowed:
            await self.app(scope, receive, send)
            return
        challenge = challenge_of(self.auth)
        headers = {"WWW-Authenticate": challenge} if challenge else {}
        refused = PlainTextResponse(
            "not allowed: this dashboard lets in only whom its auth hook admits",
            status_code=401,
            headers=headers,
        )
        await refused(scope, receive, send)


def create_app(
    manager: QueueManager,
    *,
    auth: AuthHook | None = None,
    connection: str | None = None,
    queues: Sequence[str] = (),
    scheduler: Scheduler | None = None,
    read_only: bool = False,
    poll_seconds: float = 5.0,
    title: str = "rainier-queue",
) -> ASGIApp:
    """The dashboard over `manager`'s `connection` (its default one when None).

    `auth` is required: a callable taking the Starlette request and returning
    (or awaiting to) True for a request let in; `basic_auth(user, password)`;
    or `allow_anyone` for a dashboard on your own machine. Without one, a
    `ConfigurationError` says how to give one. `read_only` hides every
    action and refuses them (403). `queues` are listed on the overview
    beside those the manager's registry, its workers and its failed jobs
    name; `scheduler` brings the schedules page and its "run now" button.
    """
    hook = checked_hook(auth)
    if poll_seconds < 0:
        raise ConfigurationError(f"poll_seconds must be 0 (no polling) or more, not {poll_seconds}")
    board = Board(
        manager=manager,
        auth=hook,
        connection=connection,
        queues=tuple(queues),
        scheduler=scheduler,
        read_only=read_only,
        poll_seconds=poll_seconds,
        title=title,
        history=History(every=sampled_every(poll_seconds)),
    )
    renderer = Renderer(board)
    pages = Pages(board, renderer)
    actions = Actions(board)

    async def queue_error(request: Request, exc: Exception) -> Response:
        status = 409 if isinstance(exc, UnsupportedOperation) else 503
        if isinstance(exc, ConfigurationError):
            status = 500
        return renderer.page(
            request, "error.html", status_code=status, title="Error", message=str(exc)
        )

    app = Starlette(
        routes=[
            Route("/", pages.overview, name="overview"),
            Route("/jobs", pages.jobs, name="jobs"),
            Route("/jobs/{job_id:path}", pages.job, name="job"),
            Route("/failed", pages.failed, name="failed"),
            Route("/workers", pages.workers, name="workers"),
            Route("/schedules", pages.schedules, name="schedules"),
            Route("/actions/retry", actions.retry, methods=["POST"]),
            Route("/actions/forget", actions.forget, methods=["POST"]),
            Route("/actions/flush", actions.flush, methods=["POST"]),
            Route("/actions/pause", actions.pause, methods=["POST"]),
            Route("/actions/resume", actions.resume, methods=["POST"]),
            Route("/actions/schedule-test", actions.schedule_test, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        exception_handlers={QueueError: queue_error},
    )
    return AuthGate(app, hook)


__all__ = ["AuthGate", "create_app"]
