# SPDX-License-Identifier: MIT
"""`cancel`: stop one job by id, whether it waits or runs, without failing or retrying it.

An operator who dispatched the wrong job, or one whose work is no longer
wanted, otherwise has to wait for it or kill its worker (and every job
beside it). `cancel ID` removes a waiting job where the driver can, and
otherwise leaves a mark every worker reads within its `--pause-check`; a
worker running the job asks its handler to stop. On a driver with no
store every worker reads, it refuses and says so, and nothing changes.
"""

from __future__ import annotations

import click

from ..cancelling import cancel as cancel_job
from .loading import Loaded
from .output import echo
from .runtime import State, run_command, warn_if_private


@click.command()
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True)
@click.pass_obj
def cancel(state: State, job_ids: tuple[str, ...]) -> None:
    """Cancel job ID...: a waiting one is removed, a running one asked to stop; not retried."""

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        warn_if_private(target)
        for job_id in job_ids:
            echo((await cancel_job(target, job_id)).describe())
        return 0

    run_command(state, body)


__all__ = ["cancel"]
