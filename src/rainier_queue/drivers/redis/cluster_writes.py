# SPDX-License-Identifier: MIT
"""Pushes on a Redis Cluster, each sent once on a node connection held until its answer.

redis-py's cluster client treats a broken connection as a reason to look
the cluster up again and send the command again. That suits a read, but a
push that reached Redis before its connection broke is then queued twice;
and when the second try fails as well, the caller hears of an outage, as
if nothing had been written. A single server's pushes avoid both by
holding their connection for the answer (`replication.py`). This does the
same on a cluster, on a connection of the node that owns the queue's slot:

- **Routing.** The node is the primary the slot map names for the push's
  key (every command of one push is on one slot).
- **Before sending**, a failure is a plain `BrokerUnavailable`: nothing
  left, so trying again is safe. The slot map is read afresh before the
  next push, so a primary replaced in a failover is found.
- **After sending**, a lost connection is `OutcomeUnknown`, and the push
  is not sent again.
- **Redirects.** A `MOVED` answer (the slot has a new owner) or `ASK` (it
  is being migrated) means the node did not run the command, so it goes
  where the answer points: after `MOVED`, once the slot map is read
  again; after `ASK`, to the importing node, behind `ASKING` on the same
  connection, as Redis requires.

Only pushes come here; every other command goes through the cluster
client, whose retries are harmless where a repeat is refused or changes
nothing (settles are fenced by their token).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from redis import exceptions as rx

from ...errors import BrokerUnavailable, OutcomeUnknown
from .connection import translated
from .replication import Durability, HeldWrites

if TYPE_CHECKING:
    from redis.asyncio.cluster import ClusterNode, RedisCluster
    from redis.asyncio.connection import Connection

REDIRECTS = 5
"""Redirects one push follows before it gives up (a slot that keeps moving)."""


def routing_key(command: Sequence[Any]) -> str:
    """The key that places a command: EVALSHA's first key, else the first argument."""
    return str(command[3] if str(command[0]).upper() == "EVALSHA" else command[1])


class ClusterWrites(HeldWrites):
    """Pushes to the node that owns their slot, on a connection held for the answer."""

    def __init__(self, client: RedisCluster, durability: Durability | None = None) -> None:
        super().__init__(client, durability or Durability(0), "the Redis cluster")
        self._cluster = client
        self._stale = False
        """Set when a node failed us: read the slot map again before the next push."""

    async def _write(
        self, commands: Sequence[Sequence[Any]], *, what: str
    ) -> tuple[list[Any], str]:
        key = routing_key(commands[0])
        asked: ClusterNode | None = None
        for _ in range(REDIRECTS):
            node = asked or await self._owner(key, what)
            sent = [("ASKING",), *commands] if asked else list(commands)
            conn = await self._connected(node, what)
            try:
                replies = await self._held(conn, sent, node.name)
            except OutcomeUnknown:
                self._stale = True
                raise
            finally:
                node.release(conn)
            if asked is not None:
                replies = replies[1:]  # ASKING's own OK
            first = replies[0]
            if isinstance(first, rx.MovedError):  # a subclass of AskError: test it first
                self._stale = True
                asked = None
            elif isinstance(first, rx.AskError):
                asked = self._importing(first, what)
            else:
                return replies, node.name
        raise BrokerUnavailable(
            f"the Redis cluster redirected the attempt to {what} {REDIRECTS} times (the slot of "
            f"{key!r} keeps moving); nothing was written, so trying again later is safe"
        )

    async def _owner(self, key: str, what: str) -> ClusterNode:
        async with translated(f"find the cluster node to {what}"):
            if self._stale:
                await self._cluster.nodes_manager.initialize()
                self._stale = False
            node = self._cluster.get_node_from_key(key)
        if node is None:
            raise BrokerUnavailable(f"no Redis cluster node holds {key!r}; cannot {what}")
        return node

    def _importing(self, ask: rx.AskError, what: str) -> ClusterNode:
        """The node an `ASK` points to; an unknown one is an outage (nothing was written)."""
        host, port = self._cluster.nodes_manager.remap_host_port(ask.host, ask.port)
        node = self._cluster.get_node(host=host, port=port)
        if node is None:
            self._stale = True
            raise BrokerUnavailable(
                f"the Redis cluster is moving a slot to {host}:{port}, a node this client does "
                f"not know yet, so it could not {what}; nothing was written, so trying again "
                "is safe"
            )
        return node

    async def _connected(self, node: ClusterNode, what: str) -> Connection:
        """A connection of `node`, connected and idle; failing here, nothing was sent."""
        async with translated(f"connect to the Redis cluster node at {node.name} to {what}"):
            conn = node.acquire_connection()
            try:
                await node.disconnect_if_needed(conn)
                await conn.connect()  # type: ignore[no-untyped-call]
                if await _dirty(conn):  # the node hung up, or an old answer is waiting
                    await conn.disconnect()
                    await conn.connect()  # type: ignore[no-untyped-call]
            except BaseException:
                self._stale = True
                node.release(conn)
                raise
        return conn


async def _dirty(conn: Connection) -> bool:
    try:
        return await conn.can_read()
    except (rx.ConnectionError, rx.TimeoutError, OSError):
        return True


__all__ = ["REDIRECTS", "ClusterWrites", "routing_key"]
