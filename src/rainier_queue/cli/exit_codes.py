# SPDX-License-Identifier: MIT
"""The exit codes of `rainier-queue`, in one place.

A service manager, a deploy script and a CI job each act on a worker's exit
code without reading its output, so the codes mean one thing each, on every
command:

- **0**: everything asked for was done; a worker stopped cleanly and none
  of its jobs failed.
- **1**: it ran, but something did not go through: a job ended in the
  failed store, an id given to `retry` or `forget` was not found, or
  `reencrypt` met a job sealed with a key that is not in the ring (or, on
  Redis, one a worker held, which it could not move).
- **2**: configuration or usage error, so nothing ran: a bad flag, an
  unknown connection, no URL, a worker setting that cannot work, a payload
  that does not fit its job.
- **3**: the broker stayed unreachable: the worker gave up after
  `--max-consecutive-errors` failures in a row, or a command could not
  reach it.
- **4**: `doctor` found problems, `provision` left some it cannot put
  right (listed on the way), or `reencrypt` was asked of a driver that
  cannot change a stored job.
- **5**: `work --stop-when-empty` stopped with work still on its queues that
  falls due later than `--drain-wait` (a long retry backoff, a delayed job,
  or a job held under a lease that ends later); a cron job or CI step should
  treat the run as unfinished. Work due sooner is waited for, not reported.
  It wins over 1: a job failed *and* work is left, the run is unfinished.
- **130**: interrupted: Ctrl-C outside a worker, or a worker that had to
  interrupt running jobs and hand them back (a second signal, or the
  grace period ran out).

A worker stopped by one SIGTERM or SIGINT whose running jobs all finished
exits 0 (or 1 if a job failed during the run): that is how a deploy stops
it, and it is not an error.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a `rainier-queue` process tells its caller."""

    OK = 0
    JOB_FAILED = 1
    USAGE = 2
    BROKER = 3
    PROBLEMS = 4
    WORK_LEFT = 5
    INTERRUPTED = 130


__all__ = ["ExitCode"]
