# SPDX-License-Identifier: MIT
"""`explain ID`: why a job is not running, in plain words, and what would change that.

Why: `job ID` says where a job is; the person asking "why hasn't it run?"
wants the cause and the next step (resume the queue, start a worker, wait
for a lease to end, retry it). The answer is the library's (`explain.py`),
so a dashboard gives the same one; this command prints it for a person, or
as JSON with its reason code for a script.
"""

from __future__ import annotations

import json

import click

from ..cache.stores import open_cache_beside
from ..errors import ConfigurationError
from ..explain import LimitsAt
from ..explain import explain as explain_job
from ..limits import found_store, limited_classes
from ..locks import Cache
from ..queue import Queue
from .exit_codes import ExitCode
from .loading import Loaded
from .output import echo
from .runtime import State, run_command, warn_if_private


@click.command()
@click.argument("job_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the answer, with its code, as JSON.")
@click.pass_obj
def explain(state: State, job_id: str, as_json: bool) -> None:
    """Say why job ID is not running, and what would change that.

    Exits 0 when the job was found (waiting, running or succeeded), 1 when it
    failed, and 4 when it is unknown or the driver cannot look it up.
    """

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        warn_if_private(target)
        store, opened = _limit_store(loaded, target, state.settings.connection)
        try:
            at = None if store is None else LimitsAt(store, loaded.registry)
            answer = await explain_job(target, job_id, limits=at)
        finally:
            if opened:
                assert store is not None
                await store.aclose()
        if as_json:
            echo(json.dumps(answer.to_data()))
        else:
            echo(f"job {job_id}: {answer.state.status}")
            for line in answer.lines:
                echo(line)
        if answer.code == "failed":
            return int(ExitCode.JOB_FAILED)
        if answer.code in ("unknown", "cannot_look_up"):
            return int(ExitCode.PROBLEMS)
        return 0

    run_command(state, body)


def _limit_store(loaded: Loaded, queue: Queue, connection: str | None) -> tuple[Cache | None, bool]:
    """Where the workers count limits (as `work` finds it), and whether it was opened here."""
    if not limited_classes(loaded.registry):
        return None, False
    found = found_store(queue, loaded.manager.locks)
    if found is not None:
        return found, False
    url = loaded.urls.get(loaded.connection_name(connection))
    if url is None:
        return None, False
    try:
        return open_cache_beside(url), True
    except ConfigurationError:
        return None, False


__all__ = ["explain"]
