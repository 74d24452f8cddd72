# SPDX-License-Identifier: MIT
"""A TCP relay to a database server that cuts the connection at a chosen moment.

Whether a driver reports "the outcome is unknown" when a connection dies
mid-commit cannot be tested by stopping the server: the cut must come
exactly between the server receiving the commit and the client reading the
answer. This relay passes bytes both ways and, once armed, watches what the
client sends for `marker` (a `COMMIT` query, a `CopyDone` message). Then it
either delivers those bytes, waits for the server to act on them and cuts
the connection before any answer gets back (`deliver=True`: the write
happened), or cuts it before they reach the server (`deliver=False`: it did
not). Either way the client sees the same thing: a dead connection.
"""

from __future__ import annotations

import asyncio
import contextlib


class CuttingRelay:
    """Relays 127.0.0.1:<its port> to 127.0.0.1:`target`, and cuts once at `marker`."""

    def __init__(self, target: int, marker: bytes, *, deliver: bool) -> None:
        self.target = target
        self.marker = marker
        self.deliver = deliver
        self.armed = False
        """Set by the test once the connection is set up, so only the write under test is cut."""
        self.cut = False
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> int:
        """Start listening; the port to connect to."""
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return int(self._server.sockets[0].getsockname()[1])

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.target)
        self._writers += [client_w, server_w]

        async def upstream() -> None:
            while data := await client_r.read(65536):
                if self.armed and not self.cut and self.marker in data:
                    self.cut = True
                    if self.deliver:
                        server_w.write(data)
                        await server_w.drain()
                        await asyncio.sleep(0.3)  # long enough for the server to commit
                    return
                server_w.write(data)
                await server_w.drain()

        async def downstream() -> None:
            while data := await server_r.read(65536):
                if self.cut:
                    return
                client_w.write(data)
                await client_w.drain()

        with contextlib.suppress(OSError):
            # Whichever side ends first ends the relay: a cut closes both.
            done, pending = await asyncio.wait(
                [asyncio.ensure_future(upstream()), asyncio.ensure_future(downstream())],
                return_when=asyncio.FIRST_COMPLETED,
            )
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in done:
                task.result()
        await _closed(client_w, server_w)

    async def close(self) -> None:
        await _closed(*self._writers)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


async def _closed(*writers: asyncio.StreamWriter) -> None:
    for writer in writers:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
