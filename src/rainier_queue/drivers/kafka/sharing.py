# SPDX-License-Identifier: MIT
"""How many of a topic's partitions one reserve may serve, given this worker's fair share.

Without a limit, the first worker to start takes every partition it has
slots for, and a second one waits for partitions that are never given back
while they have jobs. With one, each worker serves at most its share,
ceil(partitions / live workers) (membership.py counts the workers), and
the rules for one reserve are:

- A partition this worker does not hold is taken only while it serves
  fewer than its share, counting those taken in this reserve that have not
  handed out a job yet.
- A partition it held before the reserve (its job ended since) is served
  again, unless a worker below its share is asking for one and this worker
  serves its share already. Then it is passed by, and the reserve gives its
  lease back at the end, as it does for any partition it passed by: that is
  the safe point, with no job of that partition running here and its cursor
  committed, so the next worker starts exactly where this one stopped.
- A partition that nobody has held for `ORPHAN_AFTER` seconds, as probes of
  its lease tell, is taken even above the share: its worker died before
  the others counted one worker fewer, or the others are all busy with their
  share. It stays with the worker that took it until somebody asks.

`ORPHAN_AFTER` is longer than an idle worker waits between two reserves
(a second by default), so a worker below its share gets a free partition
before one above its share does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from aiokafka import TopicPartition

from .membership import Roster, fair_share
from .partitions import Partitions, PartitionState

ORPHAN_AFTER = 3.0
"""Seconds a partition must stay free before a worker at its share takes it anyway."""

PROBE_EVERY = 1.0
"""Seconds between two looks, by a worker at its share, at whether a partition is free."""


class Quota:
    """One reserve's limit on the partitions of one topic it serves from."""

    def __init__(self, states: Sequence[PartitionState], roster: Roster) -> None:
        self.states = states
        self.share = fair_share(len(states), roster.members)
        self.wanted = roster.wanted
        self._kept: frozenset[TopicPartition] = frozenset(
            state.tp for state in states if state.lock is not None
        )
        self._fresh: list[PartitionState] = []

    def _busy(self) -> int:
        """Partitions serving a job, and those taken in this reserve that are about to."""
        serving = sum(1 for state in self.states if state.delivery is not None)
        taken = sum(1 for s in self._fresh if s.delivery is None and s.lock is not None)
        return serving + taken

    def may_serve(self, state: PartitionState) -> bool:
        """Whether a job may be handed out from `state`, a partition this worker holds."""
        if state.tp not in self._kept:
            return True  # taken in this reserve, within the share or as an orphan
        return not self.wanted or self._busy() < self.share

    async def may_hold(self, state: PartitionState, partitions: Partitions) -> bool:
        """Whether the reserve may take (or keep) `state`'s lease to serve a job from it."""
        if state.lock is not None:
            return self.may_serve(state)
        return self._busy() < self.share or await _unclaimed(partitions, state)

    def below_share(self) -> bool:
        """Whether this worker holds fewer partitions than its share (after a reserve)."""
        return self._busy() < self.share

    def serving(self, state: PartitionState) -> None:
        """A job from `state` is about to be handed out: it counts as busy from now on."""
        if state not in self._fresh:
            self._fresh.append(state)

    def took(self, state: PartitionState) -> None:
        """The reserve took `state`'s lease, which it did not hold before."""
        if state.tp not in self._kept and state not in self._fresh:
            self._fresh.append(state)
        state.free_since = None


async def _unclaimed(partitions: Partitions, state: PartitionState) -> bool:
    """Whether `state` has been free for `ORPHAN_AFTER`, probing its lease now and then."""
    now = time.monotonic()
    if now - state.probed_at >= PROBE_EVERY:
        if now - state.probed_at > 2 * PROBE_EVERY:
            state.free_since = None  # not looked at for a while: start counting again
        state.probed_at = now
        if await partitions.locks.is_held(
            partitions.lease_name(state.tp.topic, state.tp.partition)
        ):
            state.free_since = None
        elif state.free_since is None:
            state.free_since = now
    return state.free_since is not None and now - state.free_since >= ORPHAN_AFTER


__all__ = ["ORPHAN_AFTER", "PROBE_EVERY", "Quota"]
