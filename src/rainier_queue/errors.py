# SPDX-License-Identifier: MIT
"""Everything rainier_queue raises, in one tree.

The worker has to tell a broker outage (wait and try again) from a bad job
(record it and move on) without knowing which driver it talks to. That only
works if every driver translates its client library's exceptions into these
classes at one place, so the tree is the contract between them:

    QueueError
    ├── ConfigurationError     the settings cannot work; raised at startup, never mid-run
    │   ├── UnknownConnection  a connection name that was not declared; never the default
    │   ├── UnknownOption      an option the driver does not take (with "did you mean")
    │   │   └── SpelledOtherwise the upstream's name for an option: says what it is here
    │   └── MissingDependency  the driver's extra is not installed; says which `pip install`
    ├── BrokerError            the backend failed, and no job did
    │   ├── BrokerUnavailable  unreachable or timed out; the worker backs off and retries
    │   │   └── OutcomeUnknown the connection died after the write was sent: it may have happened
    │   │       └── NotReplicated written on the primary, fewer replicas confirmed it than asked
    │   └── BrokerRejected     the backend refused (schema missing, permissions, too large)
    │       ├── TLSVerificationError  the server's certificate could not be verified
    │       └── NotProvisioned a queue's topic (stream, ...) was never made; names the command
    ├── LeaseLost              a settle or renew on a reservation that is no longer current
    ├── LockContended          `LockManager.run` found its lock held by someone else
    ├── UnsupportedOperation   this driver cannot do that (a raw push on MemoryQueue)
    └── JobError               about one job; the worker records it and moves on
        ├── UnknownJob         no handler is registered under the job's name
        ├── PayloadError       the payload does not fit the job's fields
        │   └── MalformedEntry a stored entry that is not a job (names the field)
        ├── JobTimeout         the handler overran its timeout
        └── DeliveryExhausted  delivered more often than allowed, never settled (crashes)

A handler may also raise `Retry(delay=...)`. That is control flow, not an
error, so it derives from `JobControl` and not from `QueueError`: an
`except QueueError:` inside a handler must not swallow it.

The worker raises one thing *into* a handler: `HandlerInterrupted` (and
its `HandlerTimedOut`), delivered into the thread of a plain `def` handler
that ran past its timeout or is still running when a stop's grace period
ends. Like `KeyboardInterrupt` and `asyncio.CancelledError`, it derives
from `BaseException`, so the `except Exception:` a handler wraps its work
in does not swallow it, while `finally` blocks and `with` exits still run.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from datetime import timedelta


class QueueError(Exception):
    """The root of everything this library raises on purpose."""


class ConfigurationError(QueueError):
    """The configuration cannot work. Raised at startup so nothing half-runs."""


class UnknownConnection(ConfigurationError):
    """A connection name that was never declared.

    Never silently replaced by the default connection: a job sent to the
    wrong backend is a job nobody will ever run.
    """

    def __init__(self, name: str, declared: Iterable[str]) -> None:
        names = sorted(declared)
        listed = ", ".join(f"`{n}`" for n in names) if names else "none"
        super().__init__(
            f"no queue connection is named `{name}`; the declared ones are: {listed}. "
            "Declare it in the connections config or pick one of those."
        )
        self.name = name
        self.declared = tuple(names)


class UnknownOption(ConfigurationError):
    """An option a driver does not take, usually a typo."""

    def __init__(self, where: str, option: str, known: Iterable[str]) -> None:
        choices = sorted(known)
        close = difflib.get_close_matches(option, choices, n=1)
        hint = f" Did you mean `{close[0]}`?" if close else ""
        listed = ", ".join(f"`{c}`" for c in choices) if choices else "no options"
        super().__init__(f"{where} does not take `{option}`.{hint} It takes: {listed}.")
        self.option = option


class SpelledOtherwise(UnknownOption):
    """An option the upstream spells differently or has no use for here, explained.

    A user who writes the upstream's name (`retry_after`, `block_for`) gets
    what it is called here, or why it means nothing here, instead of a bare
    "did you mean".
    """

    def __init__(self, where: str, option: str, explanation: str) -> None:
        ConfigurationError.__init__(self, f"{where} does not take `{option}`: {explanation}")
        self.option = option


class MissingDependency(ConfigurationError):
    """A driver's client library is not installed."""

    def __init__(self, driver: str, extra: str) -> None:
        super().__init__(
            f"the {driver} driver needs the '{extra}' extra: pip install 'rainier-queue[{extra}]'"
        )
        self.driver = driver
        self.extra = extra


class BrokerError(QueueError):
    """The backend failed; no job is at fault."""


class BrokerUnavailable(BrokerError):
    """The backend did not answer. Worth waiting for."""


class OutcomeUnknown(BrokerUnavailable):
    """The connection was lost after a write was sent, so whether it took effect is unknown.

    Still an outage (the worker waits it out the same way), but not one to
    paper over by trying again: a push that raises this may have been
    written, and pushing it again could queue the job twice. Settles are safe
    to repeat, since they are fenced by their reservation's token: a repeat
    of one that did happen is refused as `LeaseLost`.
    """


class NotReplicated(OutcomeUnknown):
    """A push was written on the primary, but fewer replicas confirmed it than were asked for.

    Raised by a driver in a durable mode that waits for replicas after each
    push (Redis with `wait_replicas`). The jobs are queued: the primary holds
    them and will run them. What is unknown is whether they outlive a
    failover that happens before they reach a replica. Pushing them again
    would queue them twice, so don't retry blindly. Treat them as queued but
    at risk, and find out why the replicas lag (`rainier-queue doctor` shows
    how many are connected).
    """

    def __init__(
        self, message: str, *, job_ids: Iterable[str], confirmed: int, wanted: int
    ) -> None:
        super().__init__(message)
        self.job_ids = tuple(job_ids)
        """The jobs written on the primary that no replica (or too few) confirmed."""
        self.confirmed = confirmed
        self.wanted = wanted


class BrokerRejected(BrokerError):
    """The backend answered with a refusal (missing schema, permissions, a full disk)."""


class TLSVerificationError(BrokerRejected):
    """The server's TLS certificate could not be verified: unknown issuer, wrong host name.

    Not an outage that waiting fixes: the certificate, the CA given to the
    client, or the host name in the URL must change. `host` is the server
    the client was talking to.
    """

    def __init__(self, message: str, *, host: str) -> None:
        super().__init__(message)
        self.host = host


class DuplicateJob(BrokerRejected):
    """A push carried a job id the backend stores already, and nothing was written.

    Raised where the backend keys jobs by id (the SQL drivers' unique index),
    so a push repeated after its answer was lost, or a job relayed twice
    from an outbox, is refused rather than stored twice. The job that holds
    the id is the same job: for a relay, the push is done.
    """


class NotProvisioned(BrokerRejected):
    """A push or reserve on a queue whose resources were never made on the server.

    Raised by a driver that does not create them on first use (its
    `push_creates_resources` capability is False), before anything is
    stored. The message names `rainier-queue provision`; running it, or
    the driver's `provision`, is the fix. `queue` is the queue asked for.
    """

    def __init__(self, message: str, *, queue: str) -> None:
        super().__init__(message)
        self.queue = queue


class LeaseLost(QueueError):
    """The reservation is no longer the current one for its job.

    Its lease lapsed and another worker took the job, or the job was settled
    already. The settle is refused rather than applied, so a stale worker can
    never overwrite what a newer attempt did.
    """


class LockContended(QueueError):
    """`LockManager.run` did not get its lock: someone else holds it, so the work did not run."""

    def __init__(self, name: str, waited: timedelta) -> None:
        after = f" after waiting {waited.total_seconds():g}s" if waited > timedelta(0) else ""
        super().__init__(
            f"lock `{name}` is held elsewhere{after}, so the work did not run here; "
            "catch LockContended to skip it, or pass a longer `wait`"
        )
        self.name = name


class UnsupportedOperation(QueueError):
    """This driver cannot do what was asked."""


class JobError(QueueError):
    """Something is wrong with one job; other jobs are unaffected."""


class UnknownJob(JobError):
    """No handler is registered under the job's name."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        names = sorted(known)
        listed = ", ".join(f"`{n}`" for n in names) if names else "none"
        super().__init__(
            f"no job is registered under the name `{name}` (registered: {listed}). "
            "Deploy a worker that registers it, then retry the job from the failed store."
        )
        self.name = name


class PayloadError(JobError):
    """A payload that does not fit its job's fields, or an envelope that is not a job."""


class MalformedEntry(PayloadError):
    """A stored entry that is not a job, with the field that is wrong.

    Raised by the checks that read storage (`entry_fields`); a driver turns
    it into a failed record instead of letting it stop a worker.
    """

    def __init__(self, field: str, problem: str, *, what: str = "not a job envelope") -> None:
        self.field = field
        self.problem = problem
        self.reason = f"`{field}` {problem}" if field else problem
        """What is wrong, naming the field, without the leading `what`."""
        super().__init__(f"{what}: {self.reason}")


class JobTimeout(JobError):
    """The handler ran past its timeout and was stopped."""

    def __init__(self, name: str, timeout: timedelta) -> None:
        super().__init__(f"job `{name}` exceeded its {timeout.total_seconds():g}s timeout")
        self.timeout = timeout


class DeliveryExhausted(JobError):
    """A job was delivered more often than it may be, without ever being settled."""

    def __init__(self, name: str, job_id: str, deliveries: int, allowed: int) -> None:
        super().__init__(
            f"job `{name}` ({job_id}) was delivered {deliveries} times without being settled, "
            f"more than its {allowed} attempts: a worker crashed or was killed while running it "
            "(look for an out-of-memory kill, or a handler that takes its process down)"
        )
        self.deliveries = deliveries
        self.allowed = allowed


class JobControl(Exception):
    """Raised by a handler to steer the worker. Not an error."""


class Retry(JobControl):
    """Try the job again after `delay`, spending an attempt, without logging an error."""

    def __init__(
        self, delay: timedelta | float | None = None, reason: str = "retry requested"
    ) -> None:
        super().__init__(reason)
        if isinstance(delay, int | float):
            delay = timedelta(seconds=delay)
        self.delay = delay
        self.reason = reason


class HandlerInterrupted(BaseException):
    """Raised inside a plain `def` handler's thread: the worker wants it to stop.

    The worker delivers it with `PyThreadState_SetAsyncExc`, which Python
    raises in the thread at its next bytecode boundary. A thread blocked in
    a call into C (`time.sleep`, a socket read, a lock wait, a C extension's
    computation) gets it only when that call returns. Catch it only to clean
    up, then let it propagate: the worker holds the job's slot and lease
    until the thread returns either way, and delivers it again now and then
    while the thread runs on.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or ("the worker asked this handler to stop",)))


class HandlerTimedOut(HandlerInterrupted):
    """Raised inside a plain `def` handler's thread that ran past its timeout.

    The attempt is recorded as timed out (`JobTimeout`) whatever the handler
    does with it, once the thread has returned.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or ("the handler ran past its timeout",)))


__all__ = [
    "BrokerError",
    "BrokerRejected",
    "BrokerUnavailable",
    "ConfigurationError",
    "DeliveryExhausted",
    "DuplicateJob",
    "HandlerInterrupted",
    "HandlerTimedOut",
    "JobControl",
    "JobError",
    "JobTimeout",
    "LeaseLost",
    "MalformedEntry",
    "MissingDependency",
    "NotProvisioned",
    "NotReplicated",
    "OutcomeUnknown",
    "PayloadError",
    "QueueError",
    "Retry",
    "TLSVerificationError",
    "UnknownConnection",
    "UnknownJob",
    "UnknownOption",
    "UnsupportedOperation",
]
