# SPDX-License-Identifier: MIT
"""A clock the test moves by hand, so no test waits for a real minute to pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


class SteppedClock:
    """Says it is `now` until told otherwise; pass it as a scheduler's `clock`."""

    def __init__(self, start: datetime) -> None:
        self.now = start.astimezone(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, by: timedelta) -> datetime:
        self.now += by
        return self.now

    def set(self, moment: datetime) -> datetime:
        self.now = moment.astimezone(UTC)
        return self.now


def at(text: str, zone: str = "UTC") -> datetime:
    """`2026-03-08 02:30` in `zone`, as an aware UTC time."""
    from zoneinfo import ZoneInfo

    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone)).astimezone(UTC)
