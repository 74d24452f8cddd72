# SPDX-License-Identifier: MIT
"""What every command shares: the resolved settings, one event loop, and error translation.

Each command is a coroutine over an open application (`Loaded`), run by
`run_command`, which opens the manager, runs the body and closes every
connection whatever happened. Errors from the library reach the user as
one line and an exit code (`ExitCode`), never as a traceback, because a
traceback for "you typed the connection name wrong" teaches nothing and
hides the sentence that says what to do. `-v` brings the traceback back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from ..errors import (
    BrokerError,
    BrokerRejected,
    BrokerUnavailable,
    ConfigurationError,
    JobError,
    QueueError,
    UnsupportedOperation,
)
from ..queue import FailedJobListing, FailedJobStore, Queue
from .event_loop import loop_factory
from .exit_codes import ExitCode
from .loading import Loaded, open_application
from .output import Problem, json_mode, say_error, warn
from .settings import Settings

VERBOSE_KEY = "rainier_queue.verbose"


@dataclass(frozen=True, slots=True)
class State:
    """What the group callback hands every command (`click.pass_obj`)."""

    settings: Settings


Body = Callable[[Loaded], Awaitable[int]]


def run_command(state: State, body: Body) -> NoReturn:
    """Open the application, run `body` on it, close it, and exit with `body`'s code."""
    raise click.exceptions.Exit(run_on_application(state, body))


def run_on_application(state: State, body: Body) -> int:
    """Open the application, run `body` on it, close it; `body`'s result."""
    with asyncio.Runner(loop_factory=loop_factory(state.settings.event_loop)) as runner:
        return runner.run(_with_application(state, body))


async def _with_application(state: State, body: Body) -> int:
    loaded = await open_application(state.settings)
    try:
        return await body(loaded)
    finally:
        await loaded.manager.aclose()


def exit_code_for(error: QueueError) -> ExitCode:
    """The exit code a library error stands for."""
    if isinstance(error, BrokerError):
        return ExitCode.BROKER
    if isinstance(error, ConfigurationError | UnsupportedOperation | JobError):
        return ExitCode.USAGE
    return ExitCode.JOB_FAILED


def message_for(error: QueueError) -> str:
    """The one line shown for a library error."""
    if isinstance(error, BrokerUnavailable):
        return f"the broker did not answer: {error}"
    if isinstance(error, BrokerRejected):
        return f"the broker refused: {error}"
    return str(error)


class Group(click.Group):
    """A click group that turns library errors and Ctrl-C into exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.NoSuchOption as exc:
            hint = _global_option_hint(exc, ctx)
            error = exc if hint is None else click.NoSuchOption(exc.option_name, hint, ctx=exc.ctx)
            if not json_mode():
                raise error from None
            say_error(error.format_message())
            raise click.exceptions.Exit(error.exit_code) from None
        except click.UsageError as exc:
            if not json_mode():
                raise
            say_error(exc.format_message())
            raise click.exceptions.Exit(exc.exit_code) from None
        except Problem as exc:
            exc.show(verbose=bool(ctx.meta.get(VERBOSE_KEY)))
            raise click.exceptions.Exit(exc.code) from None
        except QueueError as exc:
            problem = Problem(message_for(exc), exit_code_for(exc), cause=exc)
            problem.show(verbose=bool(ctx.meta.get(VERBOSE_KEY)))
            raise click.exceptions.Exit(exit_code_for(exc)) from None
        except KeyboardInterrupt:
            say_error("interrupted")
            raise click.exceptions.Exit(ExitCode.INTERRUPTED) from None


def _global_option_hint(error: click.NoSuchOption, ctx: click.Context) -> str | None:
    """What to say when the unknown option is one of the group's, given after the command.

    `rainier-queue work --log-format json` reads naturally and failed with
    "no such option", which sent a user to `work --help`, where it is not.
    """
    top = ctx.find_root().command
    option = error.option_name
    param = next((p for p in top.params if option in (*p.opts, *p.secondary_opts)), None)
    if param is None:
        return None
    command = error.ctx.info_name if error.ctx is not None else "COMMAND"
    flag = isinstance(param, click.Option) and (param.is_flag or param.count)
    value = "" if flag else " ..."
    return (
        f"{option} is an option of rainier-queue itself, not of `{command}`: give it before "
        f"the command, as in `rainier-queue {option}{value} {command} ...`"
    )


def failed_listing(queue: Queue) -> FailedJobListing:
    """What lists the queue's failed jobs, or a clear refusal for a driver that keeps none."""
    if not queue.capabilities.failed_listing or not isinstance(queue, FailedJobListing):
        raise Problem(
            f"the {queue.describe()} connection keeps no failed jobs, so there is nothing to "
            "list, retry or forget"
        )
    return queue


def failed_store(queue: Queue) -> FailedJobStore:
    """The queue's failed store, or a clear refusal for a driver without one."""
    if queue.capabilities.failed_store and isinstance(queue, FailedJobStore):
        return queue
    failed_listing(queue)  # keeps none at all: says so
    raise UnsupportedOperation(
        f"the {queue.describe()} connection lists its failed jobs (`failed`) but cannot retry, "
        "forget or flush them: it keeps them where they cannot be changed (see the "
        f"{queue.name} driver's documentation). To run one again, dispatch it anew with the "
        "payload `failed --json` shows"
    )


def warn_if_private(queue: Queue) -> None:
    """Say so when the connection lives in this process only (`memory://`, `sync://`)."""
    if not queue.capabilities.shared_between_processes:
        warn(
            f"the {queue.describe()} connection lives inside this one process, so this command "
            "sees none of the jobs other processes dispatched; use a shared backend such as "
            "sqlite:///jobs.db"
        )


__all__ = [
    "VERBOSE_KEY",
    "Body",
    "Group",
    "State",
    "exit_code_for",
    "failed_listing",
    "failed_store",
    "message_for",
    "run_command",
    "run_on_application",
    "warn_if_private",
]
