# SPDX-License-Identifier: MIT
"""Settings that cannot work together, found before the first job runs.

The worst of them is a job allowed to run longer than its lease: if the
worker cannot renew in time (its event loop is blocked by a handler, the
broker is slow, the driver cannot extend a claim), another worker takes the
job while it is still running and it runs twice at once. Upstream checked
only the worker's timeout and missed that a job's own timeout overrides it;
here every registered job is checked too.

`check_worker_settings` returns sentences, each naming the setting to
change, so the CLI can print them and refuse to start, and a test or an
application can assert there are none.
"""

from __future__ import annotations

from datetime import timedelta

from ..queue import Queue
from ..registry import JobRegistry
from .options import WorkerOptions


def check_worker_settings(queue: Queue, registry: JobRegistry, options: WorkerOptions) -> list[str]:
    """Problems with running `registry`'s jobs from `queue` under `options`; empty if none."""
    problems: list[str] = []
    if len(registry) == 0:
        problems.append(
            "no jobs are registered, so every job this worker reserves would go to the failed "
            "store as unknown; register the application's jobs in the JobRegistry (--app)"
        )
    problems.extend(_lease_problems(queue, registry, options))
    if options.prefetch is not None and options.prefetch < 1:
        problems.append(
            f"`prefetch` is {options.prefetch}; set it to at least 1, or leave it unset to "
            "reserve as many jobs as there are free slots"
        )
    if options.sleep <= timedelta(0):
        problems.append(
            "`sleep` must be longer than zero, or an idle worker asks the broker for work in a "
            "tight loop; set `sleep` (--sleep) to a second or so"
        )
    return problems


def _lease_problems(queue: Queue, registry: JobRegistry, options: WorkerOptions) -> list[str]:
    lease = queue.lease
    if lease is None or not queue.capabilities.reclaims_lapsed_leases:
        return []
    where = f"the {queue.describe()} connection's {_seconds(lease)} lease"
    problems: list[str] = []
    unlimited = [cls.name for cls in registry if cls.timeout_delta() is None]
    if options.timeout is None:
        if unlimited or len(registry) == 0:
            names = ", ".join(f"`{n}`" for n in sorted(unlimited))
            which = f" ({names})" if names else ""
            problems.append(
                f"the worker `timeout` is None, so jobs without a timeout of their own{which} "
                f"may run for ever, longer than {where}; if a renewal is missed, another worker "
                f"takes the job while it still runs. Set the worker `timeout` (--timeout) "
                f"below {_seconds(lease)}, or raise the connection's `lease`"
            )
    elif options.timeout >= lease and (unlimited or len(registry) == 0):
        problems.append(
            f"the worker `timeout` ({_seconds(options.timeout)}) is not shorter than {where}; "
            f"if a renewal is missed, another worker takes a job while it still runs. Lower "
            f"the worker `timeout` (--timeout) below {_seconds(lease)}, or raise the "
            f"connection's `lease`"
        )
    for cls in registry:
        own = cls.timeout_delta()
        if own is not None and own >= lease:
            problems.append(
                f"job `{cls.name}` sets `timeout` to {_seconds(own)}, which is not shorter than "
                f"{where} (a job's own timeout overrides the worker's); lower "
                f"{cls.__qualname__}.timeout below {_seconds(lease)}, or raise the "
                f"connection's `lease`"
            )
    return problems


def _seconds(delta: timedelta) -> str:
    return f"{delta.total_seconds():g}s"


__all__ = ["check_worker_settings"]
