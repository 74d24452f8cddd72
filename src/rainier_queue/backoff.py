# SPDX-License-Identifier: MIT
"""Backoff curves: pure functions, no I/O.

A job's own retry delay lives on the job (`Job.backoff`), because only the
job knows whether its dependency recovers in a second or an hour; its
default curve is here (`job_backoff`). This module also holds the worker's
curve for riding out a broker that stopped answering: exponential from
`sleep`, capped, so a flapping broker is not hammered and a failover is
sat through.
"""

from __future__ import annotations

import random
from datetime import timedelta

JOB_BACKOFF_CAP = timedelta(seconds=64)
"""The longest wait the default job backoff reaches."""

JOB_BACKOFF_SPREAD = 0.2
"""How far, either way, the default job backoff moves each delay."""


def job_backoff(attempt: int) -> timedelta:
    """The default retry curve, exact: 1 s after the first failure, then 2, 4, ... 64 s."""
    return min(timedelta(seconds=2 ** min(max(attempt, 1) - 1, 6)), JOB_BACKOFF_CAP)


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
