# SPDX-License-Identifier: MIT
"""`batch ID`: how far a batch has got, read from the connection's store by its id.

A batch of many thousand jobs is watched by its counters, not its jobs: the
total, how many succeeded, failed or were cancelled, how many are still
pending, and whether it finished (and which callbacks that queued). The
same data as `QueueManager.batch`, with `--json` for a script. Exits 0 for a
batch found, 1 for a finished batch where any job did not succeed, and 4
when the connection has no such batch.
"""

from __future__ import annotations

import json

import click

from ..batches import progress
from ..batchstate import BatchProgress
from .exit_codes import ExitCode
from .loading import Loaded
from .output import echo, warn
from .runtime import State, run_command, warn_if_private


@click.command()
@click.argument("batch_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print the batch's progress as JSON.")
@click.pass_obj
def batch(state: State, batch_id: str, as_json: bool) -> None:
    """Show batch ID's progress: succeeded, failed, cancelled, pending, and its callbacks."""

    async def body(loaded: Loaded) -> int:
        target = loaded.queue(state.settings.connection)
        warn_if_private(target)
        found = await progress(target, batch_id)
        if found is None:
            warn(
                f"no batch {batch_id} on this connection: it was dispatched to another "
                "(`--connection`), or finished more than a week ago"
            )
            return int(ExitCode.PROBLEMS)
        echo(json.dumps(as_dict(found)) if as_json else describe(found))
        if found.finished and found.succeeded < found.total:
            return int(ExitCode.JOB_FAILED)
        return 0

    run_command(state, body)


def as_dict(found: BatchProgress) -> dict[str, object]:
    return {
        "id": found.id,
        "total": found.total,
        "succeeded": found.succeeded,
        "failed": found.failed,
        "cancelled": found.cancelled,
        "pending": found.pending,
        "finished": found.finished,
        "created_at": found.created_at.isoformat(),
        "finished_at": None if found.finished_at is None else found.finished_at.isoformat(),
        "callbacks": [{"kind": kind, "job": name} for kind, name in found.callbacks],
        "queued_callbacks": list(found.fired()),
    }


def describe(found: BatchProgress) -> str:
    lines = [
        f"batch {found.id}: {found.done} of {found.total} finished "
        f"({found.succeeded} succeeded, {found.failed} failed, {found.cancelled} cancelled, "
        f"{found.pending} pending)",
        f"  made {found.created_at.isoformat()}",
    ]
    if found.finished_at is not None:
        fired = ", ".join(found.fired()) or "none (it has none that apply)"
        lines.append(f"  finished {found.finished_at.isoformat()}; callbacks queued: {fired}")
    for kind, name in found.callbacks:
        lines.append(f"  {'finally_' if kind == 'finally' else kind}: {name}")
    return "\n".join(lines)


__all__ = ["batch"]
