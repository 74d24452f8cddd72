# SPDX-License-Identifier: MIT
"""The transactional outbox: a push to any target that commits with the application's data.

Why: see `store.py` (the dual-write problem) and docs/outbox.md. `Outbox`
writes the job into the application's own transaction; `Relay` moves what
committed to the target connection (Redis, Kafka, NATS, RabbitMQ, SQS or
any other driver), deleting each row only after the target confirmed it.
"""

from __future__ import annotations

from .relay import DEFAULT_BATCH, Relay, RelayCounts, RelaySettings
from .rows import ROW_NAME, carried, outbox_row
from .store import DEFAULT_PREFIX, Outbox

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_PREFIX",
    "ROW_NAME",
    "Outbox",
    "Relay",
    "RelayCounts",
    "RelaySettings",
    "carried",
    "outbox_row",
]
