# SPDX-License-Identifier: MIT
"""How the worker tells of a job and of an error: in its log records and in the failed store.

Why a module of its own: the same words go into every log line about a job
and every failure record, whichever way the job ended (`settle.py`,
`first_writes.py`), so a log shipper can rely on the fields and a reader
on the wording.
"""

from __future__ import annotations

import traceback

from ..envelope import QueuedJob
from ..errors import JobError
from .verdicts import Attempt, Verdict


def describe(error: BaseException) -> str:
    """A one-line account of `error`: our own errors by message, others with their type."""
    if isinstance(error, JobError):
        text = str(error)
    else:
        message = str(error)
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    cause = error.__cause__
    if cause is not None and not isinstance(error, JobError):
        text += f" (caused by {describe(cause)})"
    return text


def job_fields(queued: QueuedJob, attempt: int | None = None) -> dict[str, object]:
    """The structured fields of a log record about one job (`logging`'s `extra=`).

    A log shipper can then filter on them instead of parsing the message:
    `job_id`, `job` (its name), `queue`, and the `attempt` when one is known.
    """
    return {
        "job_id": queued.id,
        "job": queued.name,
        "queue": queued.queue,
        "attempt": queued.attempts if attempt is None else attempt,
    }


def failure_record(attempt: Attempt, error: BaseException) -> str:
    """What the failed store keeps: the account, plus the traceback of a handler's error."""
    text = describe(error)
    if attempt.verdict is Verdict.RAISED and error.__traceback__ is not None:
        text += "\n\n" + "".join(traceback.format_exception(error)).rstrip()
    return text


__all__ = ["describe", "failure_record", "job_fields"]
