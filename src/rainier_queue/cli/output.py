# SPDX-License-Identifier: MIT
"""How the command line talks: results on stdout, everything else on stderr.

A script pipes `rainier-queue size --json` into `jq` and a person watches
`rainier-queue work` in a terminal; both are served if results (ids, tables,
JSON, the final summary) go to stdout and logs, warnings, errors and the
progress bar go to stderr. Text from outside (job names, error messages,
payloads) is printed as plain text, never read as rich markup, so an error
that mentions `[tool.rainier-queue]` prints as written.

`Problem` is the one way a command stops early: a message and an exit code,
shown as one line, with the traceback of its cause only under `-v`.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING

import click

from .exit_codes import ExitCode

if TYPE_CHECKING:  # rich is imported where it draws: a quiet worker never loads it
    from rich.console import Console
    from rich.table import Table


class Problem(Exception):
    """Stop the command with `message` (one line) and exit `code`."""

    def __init__(
        self, message: str, code: int = ExitCode.USAGE, *, cause: BaseException | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = int(code)
        self.cause = cause

    def show(self, *, verbose: bool) -> None:
        """Print the message on stderr; with `verbose`, the cause's traceback before it."""
        if json_mode():
            fields: dict[str, object] = {}
            if verbose and self.cause is not None:
                fields["traceback"] = "".join(traceback.format_exception(self.cause))
            say_json("error", self.message, fields)
            return
        if verbose and self.cause is not None:
            traceback.print_exception(self.cause, file=sys.stderr)
        click.echo(f"error: {self.message}", err=True)


def error_console(*, force_terminal: bool | None = None) -> Console:
    """The console for the progress bar and logs (stderr)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, force_terminal=force_terminal)


def stdout_console() -> Console:
    """The console for tables on stdout; wide when piped, so cells are not folded at 80."""
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=False)
    if not console.is_terminal:
        console = Console(highlight=False, soft_wrap=False, width=200)
    return console


def setup_logging(verbose: int, quiet: bool, log_format: str = "text") -> None:
    """Warnings by default, `-v` info, `-vv` debug, `--quiet` nothing but the results.

    On a terminal, logs are drawn by rich; elsewhere (a pipe, a log file) they
    are plain lines, and rich is not even loaded; with `log_format="json"`, one
    JSON object per line wherever they go. The handler sits on the root logger
    and the library's records propagate to it, so handlers the application
    adds (an error tracker, its own formatter) see the worker's records too,
    and the application's own warnings show beside the worker's.
    """
    if quiet:
        level = logging.CRITICAL + 1
    elif verbose >= 2:
        level = logging.DEBUG
    elif verbose == 1:
        level = logging.INFO
    else:
        level = logging.WARNING
    handler: logging.Handler
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().meta[FORMAT_KEY] = log_format
    if log_format == "json":
        from .json_logs import JsonFormatter

        handler = _StderrHandler()
        handler.setFormatter(JsonFormatter())
    elif sys.stderr.isatty():
        from rich.logging import RichHandler

        handler = RichHandler(
            console=error_console(),
            show_path=False,
            markup=False,
            rich_tracebacks=False,
            log_time_format="%H:%M:%S",
        )
        handler.setFormatter(logging.Formatter("%(message)s"))
    else:
        handler = _StderrHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
        )
    handler.set_name(_HANDLER_NAME)
    top = logging.getLogger()
    top.handlers[:] = [h for h in top.handlers if h.get_name() != _HANDLER_NAME] + [handler]
    ours = logging.getLogger("rainier_queue")
    ours.setLevel(level)
    ours.propagate = True
    if quiet:
        handler.setLevel(level)


_HANDLER_NAME = "rainier-queue-cli"
"""The name of the CLI's own handler, so setting logging up twice replaces it."""


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever `sys.stderr` is now, so a live progress bar can capture it."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> IO[str]:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:
        pass


def echo(message: str) -> None:
    """A result line, on stdout."""
    click.echo(message)


def warn(message: str) -> None:
    """A warning for a person, on stderr (a JSON line under `--log-format json`)."""
    if json_mode():
        say_json("warning", message)
        return
    click.echo(f"warning: {message}", err=True)


QUIET_KEY = "rainier_queue.quiet"
FORMAT_KEY = "rainier_queue.log_format"


def say_error(message: str) -> None:
    """An error line on stderr (a JSON line under `--log-format json`)."""
    if json_mode():
        say_json("error", message)
        return
    click.echo(f"error: {message}", err=True)


def json_mode() -> bool:
    """Whether the command runs with `--log-format json`."""
    ctx = click.get_current_context(silent=True)
    return ctx is not None and ctx.find_root().meta.get(FORMAT_KEY) == "json"


def say_json(
    level: str, message: str, fields: Mapping[str, object] | None = None, *, err: bool = True
) -> None:
    """One line in the shape of the JSON log records (see `json_logs.json_line`)."""
    from .json_logs import json_line

    click.echo(json_line(level, message, **(fields or {})), err=err)


def note(message: str) -> None:
    """Progress chatter for a person, on stderr; silent under `--quiet`."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.find_root().meta.get(QUIET_KEY):
        return
    if json_mode():
        say_json("info", message)
        return
    click.echo(message, err=True)


def table(
    columns: Sequence[str], rows: Iterable[Sequence[object]], *, whole: Sequence[str] = ()
) -> Table:
    """A rich table whose cells are plain text; columns in `whole` are never folded."""
    from rich.table import Table
    from rich.text import Text

    out = Table(show_lines=False)
    for column in columns:
        if column in whole:
            out.add_column(column, no_wrap=True)
        else:
            out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    return out


def first_line(text: str, limit: int = 120) -> str:
    """The first line of `text`, cut to `limit` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


__all__ = [
    "FORMAT_KEY",
    "QUIET_KEY",
    "Problem",
    "echo",
    "error_console",
    "first_line",
    "json_mode",
    "note",
    "say_error",
    "say_json",
    "setup_logging",
    "stdout_console",
    "table",
    "warn",
]
