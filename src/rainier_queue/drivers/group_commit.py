# SPDX-License-Identifier: MIT
"""Group commit: requests for one key that arrive while one is being written wait, and are
then written together, by one run of the writer.

Why: a store with no scripts serialises writers of one key by compare-and-set,
so the slots of one worker that finish jobs of one batch at once would retry
each other's writes, each retry a round trip, and the batch would crawl.
Inside one process nothing needs a race to order them: the first request for
a key starts a committer task; those that come while it writes are queued,
and when its write is done it takes all the queued ones as its next group,
until none is left. Each request gets its own answer from its group's run, or
the group's exception (every member of a failed group gets it, so none goes
on as if its write were made).

The committer is a task of its own, not the first caller, so a caller that is
cancelled leaves the others' write running; that write is one its owner may
repeat, which is what a cancelled caller's redelivery does anyway.

What it costs: a task per burst of requests per key and a future per request;
a lone request waits for nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
R = TypeVar("R")


class GroupCommit(Generic[K, T, R]):
    """Runs `write(key, requests)` once for every group of `requests` for one key; `write`
    returns one answer per request, in their order."""

    def __init__(self, write: Callable[[K, Sequence[T]], Awaitable[Sequence[R]]]) -> None:
        self._write = write
        self._waiting: dict[K, list[tuple[T, asyncio.Future[R]]]] = {}
        self._committers: dict[K, asyncio.Task[None]] = {}
        """The task writing each key's groups, while it has some to write."""

    async def submit(self, key: K, request: T) -> R:
        """`request`'s answer, once the group it joins is written (or that group's error)."""
        answer: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append((request, answer))
        if key not in self._committers:
            self._committers[key] = asyncio.create_task(self._commit(key))
        return await answer

    async def _commit(self, key: K) -> None:
        try:
            while group := self._waiting.pop(key, None):
                try:
                    answers = await self._write(key, [request for request, _ in group])
                    paired = list(zip(group, answers, strict=True))
                except BaseException as error:  # handed to every member
                    for _, answer in group:
                        if not answer.done():
                            answer.set_exception(_for_member(error))
                    if not isinstance(error, Exception):
                        raise
                    continue
                for (_, answer), result in paired:
                    if not answer.done():
                        answer.set_result(result)
        finally:
            del self._committers[key]
            for _, answer in self._waiting.pop(key, ()):  # only when the task itself was ended
                if not answer.done():
                    answer.set_exception(RuntimeError("the group commit was stopped"))


def _for_member(error: BaseException) -> BaseException:
    """`error` for a member to raise; a cancellation of the committer is not the member's."""
    if isinstance(error, Exception):
        return error
    return RuntimeError(f"the group commit was stopped ({type(error).__name__})")


__all__ = ["GroupCommit"]
