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

from ..explain import explain as explain_job
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
        answer = await explain_job(target, job_id)
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


__all__ = ["explain"]
