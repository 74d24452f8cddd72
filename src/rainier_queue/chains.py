# SPDX-License-Identifier: MIT
"""Chains: jobs that run one after another, each once the one before it succeeded.

    await chain(ChargeCard(order_id=7), ShipOrder(order_id=7), SendReceipt(order_id=7)).dispatch(
        manager
    )

A chain needs no store of its own. Its first job is dispatched with the
rest of the chain in a header (`rq-chain`): every step's name, and the
envelope form (name, payload, queue, attempts) of the steps still to come,
all packed at `dispatch`, so a step that cannot travel fails there and
nothing is queued. When a worker finishes a step, it pushes the next one,
carrying what is left, and only then acknowledges the step it finished.
That order is the whole of the promise:

- **No step is lost to a crash.** A worker killed after its step finished
  but before the next was pushed never acknowledged the step, so its lease
  lapses and the step runs again, pushing the next one then. A worker
  killed after the push and before the acknowledgement leaves both: the
  step runs again and the next is pushed twice. So a step runs at least
  once, as every job does, and twice exactly when the step before it ran
  twice: steps must tolerate a rerun, like any job.
- **A failure stops the chain and says where.** A step that fails for good
  goes to the failed store like any job, with the chain's position added to
  its error (`step 2 of 3 of chain ...: not dispatched: send-receipt`), and
  the steps after it are not dispatched. The failed step keeps its header,
  so `rainier-queue retry ID` runs it again and, once it succeeds, goes on
  with the rest of the chain.
- **A retry is not a failure.** A step that raises and still has attempts
  is retried as usual; the chain waits for it.

Each step runs on its own job's queue, on the connection the chain was
dispatched to. A unique job may only start a chain: a later step is pushed
by a worker, outside the manager's lock store, so its uniqueness could not
be kept, and `chain` refuses it rather than ignore it.

On a connection that encrypts payloads (`docs/encryption.md`), the steps
still to come are sealed in the header as they would be in storage, each
under the id it was packed with; the worker that pushes a step opens it
with its key ring and seals it again under the step's own new id, so no
later step's payload is ever stored in the clear.

The header is read only by the worker's settle (`worker/settle.py`) and
the fake's `run_all`; a job in no chain pays one dictionary lookup.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from .envelope import QueuedJob
from .envelope.packing import DEFAULTS, build_envelopes
from .envelope.sealing import KeyRing, SealedPayloadError, is_sealed
from .errors import NotProvisioned
from .job import Job
from .queue import Provisionable, Queue

log = logging.getLogger("rainier_queue.chains")

CHAIN = "rq-chain"
"""The header a chained job carries: where it stands in its chain, and what comes next."""


class _Manager(Protocol):
    """What `Chain.dispatch` needs of a `QueueManager` (which sits above this module)."""

    def pending(self, job: Job) -> Any: ...

    def connection(self, name: str | None = None) -> Queue: ...


@dataclass(frozen=True, slots=True)
class Position:
    """Where a chained job stands: the chain, its step (from 1), and every step's name."""

    chain_id: str
    step: int
    names: tuple[str, ...]

    @property
    def total(self) -> int:
        return len(self.names)

    def describe(self) -> str:
        """`step 2 of 3 of chain <id>`."""
        return f"step {self.step} of {self.total} of chain {self.chain_id}"

    @property
    def left(self) -> tuple[str, ...]:
        """The names of the steps after this one."""
        return self.names[self.step :]


class Chain:
    """Jobs to run in order, each after the one before succeeded (`chain(a, b, c)`)."""

    def __init__(self, jobs: tuple[Job, ...]) -> None:
        if len(jobs) < 2:
            raise ValueError("a chain needs at least two jobs; dispatch a single job as it is")
        for index, step in enumerate(jobs):
            if not isinstance(step, Job):
                raise TypeError(
                    f"chain step {index + 1} is a {type(step).__name__}, not a Job (or the "
                    "result of calling an @job function)"
                )
            if index and type(step).unique_id is not Job.unique_id and step.unique_id() is not None:
                raise ValueError(
                    f"chain step {index + 1}, `{step.name}`, is a unique job: a later step is "
                    "pushed by the worker that finished the one before, outside the lock store, "
                    "so its uniqueness could not be kept. Make it the first step, or not unique"
                )
        self.jobs = jobs

    async def dispatch(self, manager: _Manager, *, connection: str | None = None) -> str | None:
        """Dispatch the first step, carrying the rest; the first job's id (None: a unique
        first job's duplicate was dropped, and with it the chain).

        Every step is packed here, so a step whose payload does not fit fails
        now and nothing is queued; so does a chain with a step on a queue the
        connection needs provisioned and has not (`NotProvisioned`), which a
        worker could otherwise only find when the step before it is done.
        """
        envelopes = build_envelopes([(job, DEFAULTS) for job in self.jobs])
        queue = manager.connection(connection)
        await _check_provisioned(queue, envelopes)
        chain_id = uuid.uuid4().hex
        names = [e.name for e in envelopes]
        later = queue.sealed(envelopes[1:])
        header = _header(chain_id, 1, names, [_step_form(e) for e in later])
        pending = manager.pending(self.jobs[0]).with_headers({CHAIN: header})
        if connection is not None:
            pending = pending.on_connection(connection)
        job_id: str | None = await pending.send()
        return job_id

    def __repr__(self) -> str:
        return "chain(" + ", ".join(step.name for step in self.jobs) + ")"


def chain(*jobs: Job) -> Chain:
    """`jobs` to run in order, each once the one before it succeeded; `.dispatch(manager)`."""
    return Chain(jobs)


def position(job: QueuedJob) -> Position | None:
    """Where `job` stands in its chain; None for a job in no chain (or an unreadable header)."""
    read = _read(job)
    if read is None:
        return None
    return Position(read["id"], read["step"], tuple(read["names"]))


def next_step(job: QueuedJob, keys: KeyRing | None = None) -> QueuedJob | None:
    """The envelope of the step after `job`, carrying the rest of the chain; None if `job` is
    in no chain or is its last step.

    A step sealed in the header is opened with `keys` and sealed again under its new id;
    `SealedPayloadError` if it will not open (or there is no ring to open it with).
    """
    if CHAIN not in job.headers:
        return None
    read = _read(job)
    if read is None or not read["rest"]:
        return None
    head, *tail = read["rest"]
    headers = dict(job.headers)
    headers[CHAIN] = _header(read["id"], read["step"] + 1, read["names"], tail)
    step = QueuedJob.create(
        head["name"],
        head["payload"],
        queue=head["queue"],
        max_attempts=head["max_attempts"],
        headers=headers,
    )
    if not is_sealed(head["payload"]):
        return step
    packed_as = head.get("id")
    if keys is None or not isinstance(packed_as, str):
        where = Position(read["id"], read["step"], tuple(read["names"])).describe()
        raise SealedPayloadError(
            f"the next step of {where}, `{step.name}`, is sealed, and "
            + (
                "this worker has no key ring to open it: give the connection its `encryption` keys"
                if keys is None
                else "its header does not say which id it was sealed under"
            ),
            key_id=None,
        )
    plain = keys.open(step.with_changes(id=packed_as))
    return keys.seal(step.with_changes(payload=plain))


def stopped_at(job: QueuedJob) -> str | None:
    """What to add to a chained job's failure: where the chain stopped, and what was left."""
    where = position(job)
    if where is None:
        return None
    left = ", ".join(f"`{name}`" for name in where.left) or "nothing"
    return (
        f"{where.describe()} failed, so the chain stops here; not dispatched: {left}. "
        "Retrying this failed job goes on with the chain once it succeeds"
    )


async def _check_provisioned(queue: Queue, envelopes: list[QueuedJob]) -> None:
    """`NotProvisioned` for a later step's queue that a push would be refused on."""
    if queue.capabilities.push_creates_resources or not isinstance(queue, Provisionable):
        return
    later = list(dict.fromkeys(e.queue for e in envelopes[1:]))
    for finding in await queue.check_provisioned(later):
        if finding.queue is not None and finding.provisioning_fixes:
            raise NotProvisioned(
                f"a step of this chain goes to queue {finding.queue!r}, and on this connection "
                f"{finding.describe()}: run `rainier-queue provision --queue {finding.queue}` "
                "first; nothing was queued",
                queue=finding.queue,
            )


def _step_form(envelope: QueuedJob) -> dict[str, Any]:
    return {
        "id": envelope.id,  # what a sealed payload is bound to
        "name": envelope.name,
        "payload": envelope.payload,
        "queue": envelope.queue,
        "max_attempts": envelope.max_attempts,
    }


def _header(chain_id: str, step: int, names: list[str], rest: list[dict[str, Any]]) -> str:
    return json.dumps(
        {"id": chain_id, "step": step, "names": names, "rest": rest},
        separators=(",", ":"),
        ensure_ascii=True,
    )


def _read(job: QueuedJob) -> dict[str, Any] | None:
    """The chain header of `job`, checked; None (and an error logged) when it is no chain's."""
    raw = job.headers.get(CHAIN)
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        if not (
            isinstance(data, Mapping)
            and isinstance(data.get("id"), str)
            and isinstance(data.get("step"), int)
            and isinstance(data.get("names"), list)
            and isinstance(data.get("rest"), list)
            and all(_is_step(step) for step in data["rest"])
        ):
            raise ValueError("not the shape a chain header has")
    except ValueError as exc:
        log.error(
            "job `%s` %s carries a `%s` header that is not a chain's (%s); the chain cannot go "
            "on past it",
            job.name,
            job.id,
            CHAIN,
            exc,
        )
        return None
    return dict(data)


def _is_step(step: object) -> bool:
    return (
        isinstance(step, Mapping)
        and isinstance(step.get("name"), str)
        and isinstance(step.get("queue"), str)
        and isinstance(step.get("max_attempts"), int)
        and "payload" in step
    )


__all__ = ["CHAIN", "Chain", "Position", "chain", "next_step", "position", "stopped_at"]
