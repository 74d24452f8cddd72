# SPDX-License-Identifier: MIT
"""`rainier-queue dashboard`: the web dashboard, served alone.

Why a command: a team without an ASGI application to mount it in (or who
would rather not) still gets the dashboard over the same connections every
other command reads (`--url`, `--config`, `--app`, `--connection`), with the
schedules the config names. It refuses to start without being told who may
open it: a user name (`--user`, or `user` in the config's `[dashboard]`
table) with its password in an environment variable, never in an argument
(a process list shows those) nor in the file; or `--allow-anyone`, for a
dashboard on one's own machine, which only the command line can say.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import click

from ..errors import ConfigurationError, UnknownOption
from .loading import Loaded
from .output import Problem, note, warn
from .runtime import State, run_command, warn_if_private

PASSWORD_VAR = "RAINIER_QUEUE_DASHBOARD_PASSWORD"
LOOPBACK = ("127.0.0.1", "::1", "localhost")
TABLE_KEYS = frozenset({"user", "password_env", "read_only", "host", "port", "poll"})
"""What the config's `[dashboard]` table takes; a flag given on the command line wins."""


@dataclass(frozen=True, slots=True)
class Served:
    """How the dashboard is served and who may open it, from the flags and the config."""

    host: str
    port: int
    poll: float
    read_only: bool
    user: str | None
    password_var: str


def _resolve(
    table: Mapping[str, Any],
    source: str,
    *,
    host: str | None,
    port: int | None,
    poll: float | None,
    read_only: bool,
    user: str | None,
) -> Served:
    where = f"the [dashboard] table ({source})"
    if "password" in table:
        raise Problem(
            f"{where} holds a password; keep it out of the file: set it in an environment "
            f"variable and name that with `password_env` ({PASSWORD_VAR} when not named)"
        )
    for key in table:
        if key not in TABLE_KEYS:
            raise UnknownOption(where, key, TABLE_KEYS)

    def typed(key: str, kind: type | tuple[type, ...], what: str, default: Any) -> Any:
        if key not in table:
            return default
        value = table[key]
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            raise ConfigurationError(f"`{key}` in {where} must be {what}, not {value!r}")
        return value

    return Served(
        host=host if host is not None else typed("host", str, "a string", "127.0.0.1"),
        port=port if port is not None else typed("port", int, "a port number", 8000),
        poll=poll if poll is not None else float(typed("poll", (int, float), "seconds", 5.0)),
        read_only=read_only or typed("read_only", bool, "true or false", False),
        user=user if user is not None else typed("user", str, "a user name", None),
        password_var=typed("password_env", str, "a variable's name", PASSWORD_VAR),
    )


@click.command()
@click.option("--host", help="The address to listen on [127.0.0.1].")
@click.option("--port", type=click.IntRange(0, 65535), help="The port to listen on [8000].")
@click.option(
    "--user", help=f"Ask for this user name, and the password in ${PASSWORD_VAR} (or password_env)."
)
@click.option(
    "--allow-anyone",
    is_flag=True,
    help="Let every request in, with no login: for a dashboard on your own machine only.",
)
@click.option("--read-only", is_flag=True, help="Show the queues, and hide and refuse actions.")
@click.option(
    "--poll", type=click.FloatRange(min=0), help="Seconds between a page's updates (0: none) [5]."
)
@click.pass_obj
def dashboard(
    state: State,
    host: str | None,
    port: int | None,
    user: str | None,
    allow_anyone: bool,
    read_only: bool,
    poll: float | None,
) -> None:
    """Serve the web dashboard: queues, jobs, failures, workers and schedules.

    Options not given come from the config's [dashboard] table (user, password_env,
    read_only, host, port, poll); see docs/dashboard.md.
    """
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

    async def body(loaded: Loaded) -> int:
        served = _resolve(
            loaded.dashboard,
            loaded.schedules_source,
            host=host,
            port=port,
            poll=poll,
            read_only=read_only,
            user=None if allow_anyone else user,
        )
        auth: AuthHook
        if allow_anyone:
            auth = anyone
            if served.host not in LOOPBACK:
                warn(
                    f"--allow-anyone on {served.host}: anyone who reaches this address can "
                    "retry, forget and flush jobs; use --user beyond your own machine"
                )
        elif served.user is not None:
            password = state.settings.environ.get(served.password_var, "")
            if not password:
                raise Problem(
                    f"the dashboard's user {served.user} needs its password in "
                    f"{served.password_var}, which is not set"
                )
            auth = basic_auth(served.user, password)
        else:
            raise Problem(
                "the dashboard needs to know who may open it: give --user NAME (or `user` in "
                f"the config's [dashboard] table) with the password in {PASSWORD_VAR}, or "
                "--allow-anyone for a dashboard on your own machine only"
            )
        warn_if_private(loaded.queue(state.settings.connection))  # unusable: stops here
        scheduler = await _scheduler(loaded, state)
        app = create_app(
            loaded.manager,
            auth=auth,
            connection=state.settings.connection,
            scheduler=scheduler,
            read_only=served.read_only,
            poll_seconds=served.poll,
        )
        config = uvicorn.Config(
            app, host=served.host, port=served.port, lifespan="off", log_level="warning"
        )
        server = _server_class()(config)
        note(
            f"dashboard on http://{served.host}:{served.port}/ over {loaded.source}"
            + (" (read-only)" if served.read_only else "")
        )
        await server.serve()
        return 0

    run_command(state, body)


async def _scheduler(loaded: Loaded, state: State) -> Any:
    """The scheduler of the schedules the config names, or None (saying why if they are
    wrong): the schedules page shows them, and its button runs one."""
    from .schedule import build_scheduler, gather_schedules

    gathered = await gather_schedules(loaded, None)
    if not len(gathered.schedule) and not gathered.problems:
        return None
    try:
        return await build_scheduler(loaded, None, state.settings.connection)
    except Problem as exc:
        warn(f"the schedules page is empty: {exc.message}")
        return None


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


__all__ = ["PASSWORD_VAR", "TABLE_KEYS", "dashboard"]
