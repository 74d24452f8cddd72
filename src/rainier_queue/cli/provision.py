# SPDX-License-Identifier: MIT
"""`provision` (and its old name, `migrate`): make what each queue needs on its server.

Some backends take a job only once something exists for it: the SQL
drivers need their tables at this code's schema version, Kafka a topic per
queue with the partition count that sets its concurrency, and a broker its
queues and dead-letter targets. Making those is a deploy step, run once
before the workers start, so it is one command for every connection, and
the same command `doctor` names when it finds something missing.

Which queues: those `--queue` names (comma-separated, as `work` takes
them), or else every queue the configuration names (its `queues` key,
`default` without one) and every queue a registered job is sent to. A
driver that makes what a queue needs on first use (memory, Redis: a
stream comes into being with its first entry) has nothing to do here and
says so. What provisioning cannot put right (a
topic's replication) is listed afterwards, and the exit code is then 4.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from ..queue import Migratable, Provisionable, Queue
from .exit_codes import ExitCode
from .loading import Loaded
from .output import echo
from .runtime import State, run_command

QUEUE_HELP = (
    "Queues to provision, comma-separated (or the option again). Default: the config's "
    "`queues` and every registered job's queue."
)


def queues_to_provision(loaded: Loaded, given: Sequence[str]) -> list[str]:
    """The queues named by `--queue`, or else by the config and the registered jobs."""
    named = [q.strip() for option in given for q in option.split(",") if q.strip()]
    if named:
        return list(dict.fromkeys(named))
    return list(dict.fromkeys(loaded.manager.default_queues() + loaded.registry.queues()))


def _command(state: State, queue: tuple[str, ...]) -> None:
    async def body(loaded: Loaded) -> int:
        names = (
            [state.settings.connection]
            if state.settings.connection is not None
            else loaded.manager.connection_names()
        )
        queues = queues_to_provision(loaded, queue)
        done: set[int] = set()
        left = 0
        for name in names:
            target = loaded.queue(name)
            if id(target) in done:
                continue
            done.add(id(target))
            left += await _provision_one(name, target, queues)
            outbox = loaded.manager.outbox(name)
            if outbox is not None:
                for line in await outbox.provision():
                    echo(f"{name}: outbox: {line}")
                echo(f"{name}: {outbox.describe()} is ready")
        return ExitCode.PROBLEMS if left else ExitCode.OK

    run_command(state, body)


@click.command()
@click.option("--queue", "queue", multiple=True, metavar="A,B", help=QUEUE_HELP)
@click.pass_obj
def provision(state: State, queue: tuple[str, ...]) -> None:
    """Create or bring up to date what the queues need: tables, topics; exit 4 if any is left.

    Every connection's (or --connection's). Safe to run again and beside
    running workers: it only creates and grows, never deletes.
    """
    _command(state, queue)


@click.command()
@click.option("--queue", "queue", multiple=True, metavar="A,B", help=QUEUE_HELP)
@click.pass_obj
def migrate(state: State, queue: tuple[str, ...]) -> None:
    """The old name of `provision`, which does the same."""
    _command(state, queue)


async def _provision_one(name: str, queue: Queue, queues: Sequence[str]) -> int:
    """Provision one connection and say what it did; how many findings are left."""
    if not isinstance(queue, Provisionable):
        echo(
            f"{name}: {queue.describe()} makes what a queue needs when it is first used; "
            "nothing to provision"
        )
        return 0
    made = await queue.provision(queues)
    for line in made:
        echo(f"{name}: {line}")
    left = [f for f in await queue.check_provisioned(queues) if not f.fixed_on_first_use]
    for finding in left:
        click.echo(f"{name}: still {finding.describe()}", err=True)
    if left:
        return len(left)
    outcome = "done" if made else "up to date"
    if isinstance(queue, Migratable):
        version, expected = await queue.schema_status()
        echo(f"{name}: {outcome} (schema version {version} of {expected})")
    else:
        echo(f"{name}: {outcome} for queue(s) {', '.join(f'`{q}`' for q in queues)}")
    return 0


__all__ = ["migrate", "provision", "queues_to_provision"]
