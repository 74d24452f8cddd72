# SPDX-License-Identifier: MIT
"""An app whose one job is rate-limited per tenant (tests/cli/test_limits.py)."""

from __future__ import annotations

from rainier_queue import Job, JobContext, JobRegistry


class Invoice(Job):
    """Once an hour per tenant."""

    name = "invoice"
    rate_limit = "1/h"
    tenant: str

    def limit_key(self) -> str:
        return f"tenant:{self.tenant}"

    def handle(self, ctx: JobContext) -> None:
        return None


registry = JobRegistry([Invoice])
