# SPDX-License-Identifier: MIT
"""The worker: reserve, run, settle; renew leases while jobs run; stop gracefully.

Split by responsibility so each rule has one home: `runner` decides what
became of an attempt (a `verdicts.Attempt`), `settle` records it (the
writes that must come before a settle in `first_writes`), `leases` keeps
running jobs' leases alive, `outage` rides out a failing broker, `loop`
keeps the slots busy and stops cleanly, `signals` and `supervisor` connect
it to the operating system, and `checks` refuses settings that cannot work.
"""

from __future__ import annotations

from ..errors import DeliveryExhausted
from .checks import check_worker_settings
from .loop import Worker
from .options import WorkerOptions, WorkerStats
from .supervisor import Supervisor

__all__ = [
    "DeliveryExhausted",
    "Supervisor",
    "Worker",
    "WorkerOptions",
    "WorkerStats",
    "check_worker_settings",
]
