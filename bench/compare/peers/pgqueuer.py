# SPDX-License-Identifier: MIT
"""PgQueuer adapter: `Queries.enqueue` with lists (its bulk form), `pgq run` workers.

PgQueuer has one worker model (asyncio); `pgq run` runs it on uvloop when
uvloop is installed (it is, in the peers' venv). Its knobs for speed are
the concurrency limit and the jobs fetched a query (`--batch-size`,
default 10); pgq refuses a limit below twice the batch, so the batch is
`min(10, C/2)`. Its tables are logged, as ours are (an unlogged install
would trade durability for speed).

The schema lives in a PostgreSQL schema of its own (`PGQUEUER_SCHEMA`), dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.queries import Queries

from ..latency_check import record
from ._async import incr_counter
from ._common import PG_DSN, Adapter, bin_of, main, tag

BATCH = 1000
ENTRYPOINT = "compare_incr"
LATENCY = "compare_latency"


def _schema() -> str:
    return f"rqcmp_pgq_{tag()}"


@contextlib.asynccontextmanager
async def create_pgqueuer() -> AsyncIterator[PgQueuer]:
    """The worker factory `pgq run` calls."""
    connection = await asyncpg.connect(PG_DSN)
    pgq = PgQueuer(AsyncpgDriver(connection))

    @pgq.entrypoint(ENTRYPOINT)
    async def incr(job: Job) -> None:
        await incr_counter()

    @pgq.entrypoint(LATENCY)
    async def latency(job: Job) -> None:
        seq, pushed_at = (job.payload or b"").decode().split()
        record(int(seq), float(pushed_at))

    try:
        yield pgq
    finally:
        await connection.close()


class PgQueuerAdapter(Adapter):
    backend = "postgres"
    runner: asyncio.Runner | None = None

    def setup(self) -> None:
        os.environ["PGQUEUER_SCHEMA"] = _schema()
        asyncio.run(self._install())

    async def _install(self) -> None:
        connection = await asyncpg.connect(PG_DSN)
        try:
            await Queries(AsyncpgDriver(connection)).install(create_schema=True)
        finally:
            await connection.close()

    def enqueue(self) -> float:
        return asyncio.run(self._enqueue())

    async def _enqueue(self) -> float:
        connection = await asyncpg.connect(PG_DSN)
        try:
            queries = Queries(AsyncpgDriver(connection))
            payloads = [str(n).encode() for n in range(self.jobs)]
            started = time.perf_counter()
            for i in range(0, self.jobs, BATCH):
                chunk = payloads[i : i + BATCH]
                await queries.enqueue([ENTRYPOINT] * len(chunk), chunk, [0] * len(chunk))
            return time.perf_counter() - started
        finally:
            await connection.close()

    def worker_commands(self) -> list[list[str]]:
        command = [
            bin_of("pgq"),
            "run",
            "bench.compare.peers.pgqueuer:create_pgqueuer",
            "--max-concurrent-tasks",
            str(self.concurrency),
            # pgq refuses a limit below twice the batch size (default batch: 10)
            "--batch-size",
            str(max(1, min(10, self.concurrency // 2))),
        ]
        return [command] * self.processes

    def push_one(self, seq: int, pushed_at: float) -> None:
        if self.runner is None:
            self.runner = asyncio.Runner()
            self.connection = self.runner.run(asyncpg.connect(PG_DSN))
            self.queries = Queries(AsyncpgDriver(self.connection))
        payload = f"{seq} {pushed_at!r}".encode()
        self.runner.run(self.queries.enqueue([LATENCY], [payload], [0]))

    def close(self) -> None:
        if self.runner is not None:
            self.runner.run(self.connection.close())
            self.runner.close()

    def teardown(self) -> None:
        asyncio.run(self._drop())

    async def _drop(self) -> None:
        connection = await asyncpg.connect(PG_DSN)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{_schema()}" CASCADE')
        finally:
            await connection.close()


if __name__ == "__main__":
    main(PgQueuerAdapter)
