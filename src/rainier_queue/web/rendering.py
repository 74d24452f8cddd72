# SPDX-License-Identifier: MIT
"""Pages rendered from templates, every field escaped, with the CSRF cookie set.

Why autoescape everywhere: a job's name, payload and error are whatever a
producer wrote, and a payload holding `<script>` must show as text. Jinja
escapes every `{{ }}` in every template here (`autoescape=True`, not only
for `.html`), so no template can forget; nothing is marked safe but the
sparkline's numbers, which the dashboard computes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse

from .._clock import utcnow
from ..durations import human_duration
from .board import Board
from .security import CSRF_COOKIE, CSRF_FIELD, csrf_token

TEMPLATES = Path(__file__).parent / "templates"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return ""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(moment: datetime | None) -> str:
    if moment is None:
        return ""
    return human_duration(max(utcnow() - moment, timedelta(0)))


def _span(length: timedelta | None) -> str:
    return "" if length is None else human_duration(max(length, timedelta(0)))


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = _when
    env.filters["ago"] = _ago
    env.filters["span"] = _span
    env.filters["first_line"] = _first_line
    return env


def root_of(request: Request) -> str:
    """Where the dashboard is mounted, for its links ("" at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


class Renderer:
    """Renders a page of one board for one request."""

    def __init__(self, board: Board) -> None:
        self.board = board
        self.env = environment()

    def page(
        self, request: Request, template: str, *, status_code: int = 200, **context: Any
    ) -> HTMLResponse:
        token = csrf_token(request)
        root = root_of(request)
        queue_text = ""
        try:
            queue_text = self.board.queue.describe()
        except Exception:  # the error page says why; the header does without
            queue_text = "not opened"
        html = self.env.get_template(template).render(
            root=root,
            path=request.url.path,
            board=self.board,
            connection=self.board.connection_name,
            described=queue_text,
            read_only=self.board.read_only,
            poll=self.board.poll_seconds,
            csrf_field=CSRF_FIELD,
            csrf=token,
            back=_back_of(request),
            said=request.query_params.get("said", ""),
            **context,
        )
        response = HTMLResponse(html, status_code=status_code)
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Content-Security-Policy"] = (
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
        )
        if request.cookies.get(CSRF_COOKIE) != token:
            response.set_cookie(
                CSRF_COOKIE,
                token,
                httponly=True,
                samesite="strict",
                secure=request.url.scheme == "https",
                path=root or "/",
            )
        return response


def _back_of(request: Request) -> str:
    """This page's path and query inside the dashboard, without a message shown on it."""
    path = request.url.path[len(root_of(request)) :] or "/"
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "said"]
    if not kept:
        return path
    return f"{path}?{urlencode(kept)}"


__all__ = ["TEMPLATES", "Renderer", "environment", "root_of"]
