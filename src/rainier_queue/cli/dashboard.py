# SPDX-License-Identifier: MIT
"""`rainier-queue dashboard`: the web dashboard, served alone.

Why a command: a team without an ASGI application to mount it in (or who
would rather not) still gets the dashboard over the same connections every
other command reads (`--url`, `--config`, `--app`, `--connection`), with the
schedules the config names. It refuses to start without saying who may open
it: `--user NAME` with the password in `RAINIER_QUEUE_DASHBOARD_PASSWORD`
(never an argument: a process list shows those), or `--allow-anyone` for a
dashboard on one's own machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from typing import Any

import click

from ..errors import ConfigurationError
from .loading import Loaded
from .output import Problem, note, warn
from .runtime import State, run_command

PASSWORD_VAR = "RAINIER_QUEUE_DASHBOARD_PASSWORD"
LOOPBACK = ("127.0.0.1", "::1", "localhost")


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True)
@click.option("--user", help=f"Ask for this user name, and the password in ${PASSWORD_VAR}.")
@click.option(
    "--allow-anyone",
    is_flag=True,
    help="Let every request in, with no login: for a dashboard on your own machine only.",
)
@click.option("--read-only", is_flag=True, help="Show the queues, and hide and refuse actions.")
@click.option(
    "--poll",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds between a page's updates (0: none).",
)
@click.pass_obj
def dashboard(
    state: State,
    host: str,
    port: int,
    user: str | None,
    allow_anyone: bool,
    read_only: bool,
    poll: float,
) -> None:
    """Serve the web dashboard: queues, jobs, failures, workers and schedules."""
    try:
        import uvicorn

        from ..web import AuthHook, basic_auth, create_app
        from ..web import allow_anyone as anyone
    except (ImportError, ConfigurationError) as exc:
        raise Problem(
            "the dashboard needs the web extra: pip install 'rainier-queue[web]'"
        ) from exc
    if user is not None and allow_anyone:
        raise Problem("give --user or --allow-anyone, not both")
    if user is not None:
        password = state.settings.environ.get(PASSWORD_VAR, "")
        if not password:
            raise Problem(f"--user {user} needs its password in {PASSWORD_VAR}, which is not set")
        auth: AuthHook = basic_auth(user, password)
    elif allow_anyone:
        auth = anyone
        if host not in LOOPBACK:
            warn(
                f"--allow-anyone on {host}: anyone who reaches this address can retry, forget "
                f"and flush jobs; use --user with {PASSWORD_VAR} beyond your own machine"
            )
    else:
        raise Problem(
            "the dashboard needs to know who may open it: give --user NAME with the password in "
            f"{PASSWORD_VAR}, or --allow-anyone for a dashboard on your own machine only"
        )

    async def body(loaded: Loaded) -> int:
        from .schedule import build_scheduler, gather_schedules

        loaded.queue(state.settings.connection)  # an unusable connection stops here
        scheduler = None
        gathered = await gather_schedules(loaded, None)
        if len(gathered.schedule) or gathered.problems:
            try:
                scheduler = await build_scheduler(loaded, None, state.settings.connection)
            except Problem as exc:
                warn(f"the schedules page is empty: {exc.message}")
        app = create_app(
            loaded.manager,
            auth=auth,
            connection=state.settings.connection,
            scheduler=scheduler,
            read_only=read_only,
            poll_seconds=poll,
        )
        config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="warning")
        server = _server_class()(config)
        note(
            f"dashboard on http://{host}:{port}/ over {loaded.source}"
            + (" (read-only)" if read_only else "")
        )
        await server.serve()
        return 0

    run_command(state, body)


def _server_class() -> type[Any]:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, stopped by SIGTERM or Ctrl-C with exit 0, as `work` is.

        uvicorn raises a signal it caught again once it has stopped, so the
        process ends killed by it; the command ends as every other does.
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self._stop)
            try:
                yield
            finally:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)

        def _stop(self) -> None:
            if self.should_exit:
                self.force_exit = True
            self.should_exit = True

    return Server


__all__ = ["PASSWORD_VAR", "dashboard"]
