# SPDX-License-Identifier: MIT
"""`GroupCommit`: requests for a key that come while one is written are written together,
each gets its own answer, and a group's error reaches each of its members and no other."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from rainier_queue.drivers.group_commit import GroupCommit


class Store:
    """A writer that records its groups, waits on `gate` inside each write, and fails a
    group that holds a request named in `failing`."""

    def __init__(self) -> None:
        self.groups: list[tuple[str, list[int]]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.failing: set[int] = set()

    async def write(self, key: str, requests: Sequence[int]) -> list[str]:
        self.groups.append((key, list(requests)))
        await self.gate.wait()
        if self.failing & set(requests):
            raise OSError(f"the store refused {sorted(requests)}")
        return [f"{key}:{n}" for n in requests]


async def test_requests_that_come_during_a_write_are_the_next_group() -> None:
    store = Store()
    commit = GroupCommit(store.write)
    store.gate.clear()
    first = asyncio.create_task(commit.submit("a", 1))
    await asyncio.sleep(0)  # the committer starts writing [1] and waits at the gate
    await asyncio.sleep(0)
    later = [asyncio.create_task(commit.submit("a", n)) for n in (2, 3, 4)]
    other = asyncio.create_task(commit.submit("b", 9))  # another key: a group of its own
    await asyncio.sleep(0)
    store.gate.set()
    assert await first == "a:1"
    assert await asyncio.gather(*later) == ["a:2", "a:3", "a:4"]
    assert await other == "b:9"
    assert sorted(store.groups) == [("a", [1]), ("a", [2, 3, 4]), ("b", [9])]


async def test_an_error_reaches_every_member_of_its_group_and_no_other() -> None:
    store = Store()
    commit = GroupCommit(store.write)
    store.failing = {2}
    answers = await asyncio.gather(
        *(commit.submit("a", n) for n in (1, 2, 3)), return_exceptions=True
    )
    assert all(isinstance(a, OSError) for a in answers), answers
    assert await commit.submit("a", 4) == "a:4"


async def test_a_cancelled_caller_leaves_the_rest_of_its_group_answered() -> None:
    store = Store()
    commit = GroupCommit(store.write)
    store.gate.clear()
    callers = [asyncio.create_task(commit.submit("a", n)) for n in (1, 2, 3)]
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    callers[1].cancel()
    store.gate.set()
    assert await callers[0] == "a:1"
    assert await callers[2] == "a:3"
    with pytest.raises(asyncio.CancelledError):
        await callers[1]
    assert store.groups == [("a", [1, 2, 3])]
