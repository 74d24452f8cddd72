# SPDX-License-Identifier: MIT
"""Retry every failed job of a store at once, in bounded reads.

Why it is one function: `rainier-queue retry --all` and the dashboard's
"retry all that match" both walk the failed store, and both must stop even
when a retried job fails again while the walk goes on (it is not retried a
second time: each id is taken once). Written twice, the two walks had
already begun to differ in their filters.
"""

from __future__ import annotations

from collections.abc import Callable

from .queue import FailedJob, FailedJobStore

BATCH = 500
"""Failed records read per round."""


async def retry_all_failed(
    store: FailedJobStore,
    *,
    queue: str | None = None,
    keep: Callable[[FailedJob], bool] = lambda _: True,
) -> int:
    """Retry every failed job (of `queue`, if given) that `keep` accepts; how many went back."""
    seen: set[str] = set()
    count = 0
    while True:
        batch = [
            f
            for f in await store.failed_jobs(queue=queue, limit=BATCH)
            if f.job.id not in seen and keep(f)
        ]
        if not batch:
            return count
        for failed_job in batch:
            seen.add(failed_job.job.id)
            if await store.retry_failed(failed_job.job.id):
                count += 1


__all__ = ["BATCH", "retry_all_failed"]
