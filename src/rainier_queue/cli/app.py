# SPDX-License-Identifier: MIT
"""`rainier-queue`: the command group and its global options.

Upstream had one console command (`queue:work`) and nothing to look at a
queue, retry a failed job or check a deployment with. Here the worker and
the tools an operator reaches for at 3 a.m. share one entry point and one
way of being told where the jobs are (`--app`, `--url`, `--config`,
`--connection`, or their `RAINIER_QUEUE_*` variables; see `settings` and
`loading`), and one set of exit codes (`exit_codes`).

The CLI is a leaf: it imports the library's public API, and nothing in the
library imports it.

Each command's module is imported when that command runs (or `--help` lists
them all): a worker process starts often, and it has no use for the modules
of `doctor`, `failed` or `schedule`, nor for the scheduler the last one loads.
"""

from __future__ import annotations

import importlib

import click

from .._version import __version__
from .event_loop import CHOICES as LOOPS
from .output import QUIET_KEY, setup_logging
from .runtime import VERBOSE_KEY, Group, State
from .settings import APP_VAR, CONFIG_VAR, CONNECTION_VAR, EVENT_LOOP_VAR, URL_VAR, Settings

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}

COMMANDS = {
    "batch": "batching",
    "cancel": "cancelling",
    "clear": "admin",
    "dashboard": "dashboard",
    "dispatch": "dispatch",
    "doctor": "doctor",
    "encryption-key": "encryption",
    "explain": "explaining",
    "failed": "inspection",
    "flush": "admin",
    "forget": "admin",
    "job": "observing",
    "jobs": "observing",
    "migrate": "provision",
    "pause": "pausing",
    "provision": "provision",
    "reencrypt": "encryption",
    "relay": "relay",
    "resume": "pausing",
    "retry": "admin",
    "schedule": "schedule",
    "size": "inspection",
    "work": "work",
    "workers": "observing",
}
"""Each command, and the module of this package that defines it under the same name
(with `_` for `-`)."""


class Commands(Group):
    """The command group, importing a command's module only when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        attribute = cmd_name.replace("-", "_")
        command = getattr(importlib.import_module(f"{__package__}.{module}"), attribute)
        assert isinstance(command, click.Command)
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        # click suggests near names from the commands it holds, and this group
        # holds none until asked: a typo is answered here, from every name.
        name = args[0]
        if name in COMMANDS or name.startswith("-") or ctx.resilient_parsing:
            return super().resolve_command(ctx, args)
        import difflib

        near = difflib.get_close_matches(name, COMMANDS, n=1)
        ctx.fail(f"No such command {name!r}." + (f" Did you mean {near[0]!r}?" if near else ""))


@click.group(cls=Commands, context_settings=CONTEXT)
@click.option(
    "--app",
    metavar="MODULE:ATTR",
    help=f"The jobs: a JobRegistry, a QueueManager, or a function returning one [{APP_VAR}].",
)
@click.option(
    "--config",
    metavar="FILE",
    help=f"A rainier-queue.toml or pyproject.toml declaring the connections [{CONFIG_VAR}].",
)
@click.option(
    "--url",
    metavar="URL",
    help=f"One connection from a URL, such as sqlite:///jobs.db [{URL_VAR}].",
)
@click.option(
    "--connection",
    metavar="NAME",
    help=f"Which declared connection to work on; the default one otherwise [{CONNECTION_VAR}].",
)
@click.option(
    "--event-loop",
    type=click.Choice(LOOPS),
    help=f"The event loop: auto is uvloop when installed [{EVENT_LOOP_VAR}, else auto].",
)
@click.option("-v", "--verbose", count=True, help="More logging: -v info, -vv debug.")
@click.option("-q", "--quiet", is_flag=True, help="No logging; only results and errors.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help=(
        "json: every line on stderr, and work's summary, is one JSON object (job records "
        "carry job_id, job, queue and attempt). Give it before the command."
    ),
)
@click.version_option(__version__, "-V", "--version", prog_name="rainier-queue")
@click.pass_context
def main(
    ctx: click.Context,
    app: str | None,
    config: str | None,
    url: str | None,
    connection: str | None,
    event_loop: str | None,
    verbose: int,
    quiet: bool,
    log_format: str,
) -> None:
    """Run workers and look after queues: dispatch, inspect, retry, provision, diagnose.

    Tell it where the jobs are with --app, and where the queues are with --url
    or --config (or a rainier-queue.toml / [tool.rainier-queue] in pyproject.toml
    found from the current folder up).

    \b
    Exit codes: 0 ok, 1 a job failed (or an id was not found), 2 configuration
    or usage error, 3 broker unreachable, 4 doctor (or provision) found problems,
    5 a drain left work due later than --drain-wait, 130 interrupted.
    """
    ctx.meta[VERBOSE_KEY] = verbose > 0
    ctx.meta[QUIET_KEY] = quiet
    setup_logging(verbose, quiet, log_format)
    settings = Settings.resolve(
        app=app,
        url=url,
        config=config,
        connection=connection,
        verbose=verbose,
        quiet=quiet,
        event_loop=event_loop,
    )
    ctx.obj = State(settings=settings)


__all__ = ["COMMANDS", "main"]
