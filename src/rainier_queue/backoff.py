# SPDX-License-Identifier: MIT
"""Backoff curves for broker outages: pure functions, no I/O.

A job's own retry delay lives on the job (`Job.backoff`), because only the
job knows whether its dependency recovers in a second or an hour. This
module holds the worker's curve for riding out a broker that stopped
answering: exponential from `sleep`, capped, so a flapping broker is not
hammered and a failover is sat through.
"""

from __future__ import annotations

import random
from datetime import timedelta


def error_backoff(consecutive: int, *, base: timedelta, cap: timedelta) -> timedelta:
    """The wait after the `consecutive`-th broker failure in a row: base * 2^(n-1), capped."""
    n = max(consecutive, 1)
    seconds = base.total_seconds() * (2 ** min(n - 1, 16))
    return min(timedelta(seconds=seconds), cap)


def jittered(delay: timedelta, *, spread: float = 0.1) -> timedelta:
    """`delay` moved by up to +/- `spread` of itself, so workers that failed together
    do not all come back in the same millisecond."""
    seconds = delay.total_seconds()
    return timedelta(seconds=max(0.0, seconds * (1 + random.uniform(-spread, spread))))
