# SPDX-License-Identifier: MIT
"""The pages: overview, jobs, one job, failed jobs, workers and schedules (GET only).

Each handler reads its page's data (`views`) and renders it; none changes
anything, so a page can be polled, reloaded and linked to freely. The
forms on them post to `actions`.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from .board import Board
from .queues import overview_page
from .rendering import Renderer, root_of
from .views import (
    STATES,
    failed_page,
    job_page,
    jobs_page,
    schedules_page,
    worker_state,
    workers_page,
)


class Pages:
    """The GET handlers of one board."""

    def __init__(self, board: Board, renderer: Renderer) -> None:
        self.board = board
        self.render = renderer

    async def overview(self, request: Request) -> Response:
        page = await overview_page(self.board)
        return self.render.page(request, "overview.html", title="Overview", page=page)

    async def jobs(self, request: Request) -> Response:
        wanted = request.query_params.get("id", "").strip()
        if wanted:
            return RedirectResponse(f"{root_of(request)}/jobs/{quote(wanted, safe='')}", 303)
        page = await jobs_page(
            self.board,
            name=request.query_params.get("name", ""),
            state=request.query_params.get("state", "any"),
        )
        return self.render.page(request, "jobs.html", title="Jobs", page=page, states=STATES)

    async def job(self, request: Request) -> Response:
        page = await job_page(self.board, request.path_params["job_id"])
        return self.render.page(request, "job.html", title="Job", page=page)

    async def failed(self, request: Request) -> Response:
        page = await failed_page(
            self.board,
            queue_name=request.query_params.get("queue", "").strip(),
            name=request.query_params.get("name", "").strip(),
        )
        return self.render.page(request, "failed.html", title="Failed", page=page)

    async def workers(self, request: Request) -> Response:
        page = await workers_page(self.board)
        return self.render.page(
            request, "workers.html", title="Workers", page=page, state_of=worker_state
        )

    async def schedules(self, request: Request) -> Response:
        page = await schedules_page(self.board)
        return self.render.page(request, "schedules.html", title="Schedules", page=page)


__all__ = ["Pages"]
