# SPDX-License-Identifier: MIT
"""The job the scheduler acceptance test enqueues; no worker runs it, the queue is the ledger."""

from __future__ import annotations

from rainier_queue import Job, JobContext, JobRegistry


class LedgerTick(Job):
    name = "ledger-tick"

    async def handle(self, ctx: JobContext) -> None:
        return None


registry = JobRegistry([LedgerTick])
