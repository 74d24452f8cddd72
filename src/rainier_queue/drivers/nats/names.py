# SPDX-License-Identifier: MIT
"""The names a connection's queues take on the server: streams, subjects and consumers.

A queue name may hold anything (`émails ✉`, `a:b/c.d`), while a subject
token may not hold `.`, `*`, `>` or white space and a consumer name ends up
as a folder name on the server's disk. So a queue name becomes one token:
letters, digits and `-` as they are, every other byte as `_` and two hex
digits, and a token longer than `LONGEST` is cut and given a hash of the
whole name, so two long names never share one.

Per connection `prefix` (say `rq`):

| What | Name |
|---|---|
| the work-queue stream | `rq-jobs`, subjects `rq.jobs.*` and `rq.delayed.*` |
| a queue's jobs | subject `rq.jobs.<token>`, durable consumer `q-<token>` |
| a queue's delayed jobs | subject `rq.delayed.<token>`, durable consumer `d-<token>` |
| the failed store | stream `rq-failed`, subject `rq.failed.<token>.<job token>` |
"""

from __future__ import annotations

import hashlib

LONGEST = 160
"""The longest token kept whole; consumer names live on disk, where 255 bytes is the limit."""


def token(name: str) -> str:
    """`name` as one subject token that names nothing else."""
    out: list[str] = []
    for byte in name.encode("utf-8", "surrogatepass"):
        char = chr(byte)
        if char.isascii() and (char.isalnum() or char == "-"):
            out.append(char)
        else:
            out.append(f"_{byte:02X}")
    text = "".join(out) or "_"
    if len(text) <= LONGEST:
        return text
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[: LONGEST - 17]}_{digest}"


class Names:
    """Every name one connection's prefix gives its queues."""

    __slots__ = ("prefix",)

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    @property
    def stream(self) -> str:
        return f"{self.prefix}-jobs"

    @property
    def failed_stream(self) -> str:
        return f"{self.prefix}-failed"

    @property
    def stream_subjects(self) -> list[str]:
        return [f"{self.prefix}.jobs.*", f"{self.prefix}.delayed.*"]

    @property
    def failed_subjects(self) -> list[str]:
        return [f"{self.prefix}.failed.>"]

    def jobs(self, queue: str) -> str:
        return f"{self.prefix}.jobs.{token(queue)}"

    def delayed(self, queue: str) -> str:
        return f"{self.prefix}.delayed.{token(queue)}"

    def consumer(self, queue: str) -> str:
        return f"q-{token(queue)}"

    def delay_consumer(self, queue: str) -> str:
        return f"d-{token(queue)}"

    def failed(self, queue: str, job_id: str) -> str:
        return f"{self.prefix}.failed.{token(queue)}.{token(job_id)}"

    def failed_of_queue(self, queue: str | None) -> str:
        """The subject filter of one queue's failed jobs, or of every queue's."""
        return (
            f"{self.prefix}.failed.>" if queue is None else f"{self.prefix}.failed.{token(queue)}.*"
        )

    def failed_of_job(self, job_id: str) -> str:
        return f"{self.prefix}.failed.*.{token(job_id)}"


__all__ = ["LONGEST", "Names", "token"]
