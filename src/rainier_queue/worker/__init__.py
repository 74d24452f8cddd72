# SPDX-License-Identifier: MIT
"""The worker: reserve, run, settle; renew leases while jobs run; stop gracefully."""

from __future__ import annotations

from .options import WorkerOptions, WorkerStats

__all__ = ["WorkerOptions", "WorkerStats"]
