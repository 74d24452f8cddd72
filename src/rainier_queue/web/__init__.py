# SPDX-License-Identifier: MIT
"""The web dashboard (`rainier-queue[web]`): queues, jobs, failures, workers and schedules.

Why a dashboard, when the CLI answers each question: in an incident an
operator wants the whole connection on one screen that keeps itself up to
date, and a button for the retry they would otherwise type ids for. The
dashboard is a leaf like the CLI: it reads through the library's read
models (`lookup`, `overview`, `explain`, the failed store, the scheduler)
and acts through the same calls the CLI makes, and nothing in the
library imports it (`rainier-queue dashboard` serves it).

    from rainier_queue.web import basic_auth, create_app

    dashboard = create_app(manager, auth=basic_auth("ops", password))
    app.mount("/queues", dashboard)   # FastAPI or Starlette

See docs/dashboard.md: mounting (Django ASGI too), auth, CSRF, read-only
mode, and what each driver can show.
"""

from __future__ import annotations

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra's absence is tested in a clean venv
    from ..errors import ConfigurationError

    raise ConfigurationError(
        "the dashboard needs the web extra: pip install 'rainier-queue[web]'"
    ) from exc

from .app import create_app
from .security import AuthHook, BasicAuth, allow_anyone, basic_auth

__all__ = ["AuthHook", "BasicAuth", "allow_anyone", "basic_auth", "create_app"]
