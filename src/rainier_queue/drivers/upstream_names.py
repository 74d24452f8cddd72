# SPDX-License-Identifier: MIT
"""Options the upstream spells differently, or has and we do not: refused with the reason.

Why: a user who comes from the upstream (or reads its documentation) writes
its names on the first day: `retry_after`, `after_commit`, `block_for`, a
pool size, a `table`. A bare "does not take `retry_after`. Did you mean
...?" leaves them guessing whether the setting exists here at all, and
under what name. So each of these names gets an answer of its own: what
this library calls it, or why it means nothing here and what to do instead.

The answer depends on the driver (which options it takes, how its idle
workers wait, whether it can enqueue inside a transaction), so `explain`
is asked with the driver's class, and returns None for a name that is not
one of these, leaving the usual "did you mean" to `UnknownOption`.
`drivers.open_queue` asks it for every key a driver does not take, in the
connection's table and in the URL's query alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ..queue import Capabilities


class Driver(Protocol):
    """What an explanation needs to know about the driver asked."""

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def idle_wait(self) -> str: ...

    @property
    def OPTIONS(self) -> frozenset[str]: ...


def explain(option: str, driver: Driver) -> str | None:
    """Why `driver` does not take the upstream's `option`, and what to write; None if
    `option` is not one of the upstream's names."""
    answer = _ANSWERS.get(option)
    return None if answer is None else answer(option, driver)


def _lease(option: str, driver: Driver) -> str:
    if "lease" in driver.OPTIONS:
        return (
            "this library calls it `lease` (how long a reserved job stays hidden before "
            "another worker may take it); it is the same setting, so write "
            '`lease = "90s"` (or `?lease=90s` in the URL)'
        )
    return (
        "this driver does not reserve jobs: it runs each one inside dispatch, so there is "
        "no reservation to time out"
    )


def _after_commit(option: str, driver: Driver) -> str:
    where = (
        "this driver has it: `push_in(connection, job)` queues the job in your open "
        "transaction (docs/drivers/postgres.md)"
        if driver.capabilities.transactional_enqueue
        else "this driver has none; PostgreSQL's `push_in(connection, job)` does"
    )
    return (
        "there is no transaction API here for a dispatch to wait on, so `true` cannot be "
        "honoured, and `false` is the only behaviour (a dispatch is sent when it is called) "
        "and needs no setting. To queue a job only if your own transaction commits, use "
        f"transactional enqueue where the driver has it: {where}"
    )


def _block_for(option: str, driver: Driver) -> str:
    if not driver.capabilities.deferred:
        return "this driver does not reserve jobs, so nothing waits for one"
    return (
        "the upstream set how long a reserve waits in Redis's `BLOCK`; here a reserve never "
        "blocks, and an idle worker waits for work in its own way, on this driver with "
        f"{driver.idle_wait}, for at most the worker's `sleep` (`rainier-queue work --sleep`)"
    )


def _pool(option: str, driver: Driver) -> str:
    if "pool_max" in driver.OPTIONS:
        return (
            "this driver keeps a pool of connections sized by `pool_min` and `pool_max`; "
            "write those instead"
        )
    if not driver.capabilities.shared_between_processes:
        return "this driver keeps its jobs in this process and opens no connection"
    return (
        "this driver sizes no pool: it opens the connections its client needs and shares "
        "them between calls"
    )


def _table(option: str, driver: Driver) -> str:
    if "migrate" in driver.OPTIONS and "prefix" in driver.OPTIONS:
        return (
            "the tables are made by this library's migrations and named by `prefix`: "
            "`<prefix>jobs`, `<prefix>failed_jobs` and `<prefix>schema_version` "
            '(`rainier_` unless you say otherwise); write `prefix = "myapp_"` to choose them'
        )
    return "this driver keeps no table"


def _connection(option: str, driver: Driver) -> str:
    return (
        "here a connection is the table it is declared in ([connections.NAME]), and its "
        "`url` says where it goes, including a Redis database index in the URL's path "
        "(`redis://host:6379/2`); the store behind unique jobs and Kafka's leases is the "
        "top-level `locks` URL, not a cache connection"
    )


def _topic_prefix(option: str, driver: Driver) -> str | None:
    if "topic_prefix" not in driver.OPTIONS:
        return None
    return (
        "this driver names its topics with `topic_prefix` (`<topic_prefix><queue>`); "
        "write that instead"
    )


def _brokers(option: str, driver: Driver) -> str:
    return (
        "the brokers go in the URL, comma-separated: `kafka://b1:9092,b2:9092`, or in the "
        "KAFKA_BROKERS environment variable for a connection that leaves its `url` out"
    )


_ANSWERS: dict[str, Callable[[str, Driver], str | None]] = {
    "retry_after": _lease,
    "reservation": _lease,
    "after_commit": _after_commit,
    "block_for": _block_for,
    "pool_size": _pool,
    "max_connections": _pool,
    "min_connections": _pool,
    "table": _table,
    "connection": _connection,
    "brokers": _brokers,
    "prefix": _topic_prefix,
}
"""The upstream's names, each with the answer for a driver that does not take it."""

__all__ = ["Driver", "explain"]
