# SPDX-License-Identifier: MIT
"""What a batch's callback is told: how the batch's jobs ended.

Why a module of its own, at the bottom: the counts travel in a header of
the callback job (`rq-batch-done`), written by whichever store recorded
the batch's last job (a SQL transaction, a Redis script, the memory
driver) and read by the handler through `JobContext.batch`. Both ends, and
every store between them, agree on this one small shape, so it sits where
all of them may import it.

The header's value is compact JSON with ASCII digits and the batch id (a
hex string) only, so a Lua script can write it with `string.format`
without a JSON encoder, and the callback's own envelope never has to be
parsed and written again to carry it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

BATCH_DONE = "rq-batch-done"
"""The header a batch's callback carries: the batch's id and how its jobs ended."""

COUNTS_FORMAT = '{"id":"%s","total":%d,"succeeded":%d,"failed":%d,"cancelled":%d}'
"""The header's value, as `%`-format (Lua's `string.format` reads the same)."""


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """How a finished batch's jobs ended, as its callbacks are told."""

    id: str
    total: int
    succeeded: int
    failed: int
    """Failed for good: attempts used up, or unrunnable. A retry is not a failure."""
    cancelled: int
    """Cancelled (`manager.cancel`), before or while they ran; neither succeeded nor failed."""

    @property
    def all_succeeded(self) -> bool:
        return self.succeeded == self.total

    def header(self) -> str:
        """The `rq-batch-done` header's value."""
        return COUNTS_FORMAT % (self.id, self.total, self.succeeded, self.failed, self.cancelled)


def read_counts(headers: Mapping[str, str]) -> BatchCounts | None:
    """The counts a callback's headers carry; None for a job that is no batch's callback."""
    raw = headers.get(BATCH_DONE)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        return BatchCounts(
            id=str(data["id"]),
            total=int(data["total"]),
            succeeded=int(data["succeeded"]),
            failed=int(data["failed"]),
            cancelled=int(data["cancelled"]),
        )
    except (ValueError, TypeError, KeyError):
        return None


__all__ = ["BATCH_DONE", "COUNTS_FORMAT", "BatchCounts", "read_counts"]
