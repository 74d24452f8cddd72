# SPDX-License-Identifier: MIT
"""One place that says what time it is, always in UTC.

Drivers backed by a server with a clock of its own (PostgreSQL, Redis) take
time from that server; everything else asks here, so a test can see every
place that reads the wall clock.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def to_micros(moment: datetime) -> int:
    """Microseconds since the Unix epoch: how databases without a timestamp type store time.

    A naive `moment` is taken as local time, as `datetime.astimezone` takes it.
    """
    if moment.tzinfo is None:
        moment = moment.astimezone(UTC)
    # Subtracting aware times allows for their offsets; no conversion needed (this runs per job).
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The inverse of `to_micros`."""
    return _EPOCH + timedelta(microseconds=micros)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
