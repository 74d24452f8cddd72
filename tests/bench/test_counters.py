# SPDX-License-Identifier: MIT
"""The benchmark's counters count every INCR exactly once, on the real Redis.

Every throughput run is judged by a counter landing on exactly N, so the
two hand-written INCR clients (`peers/_async.py`, `peers/_sync.py`) must
neither drop nor double a count, under concurrency and across threads.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from bench.compare.peers import _async, _sync
from bench.compare.peers._common import KEY_ENV, REDIS_URL

from ..services import require_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    require_port("redis", 6379)
    name = f"rqtest:counter:{uuid.uuid4().hex}"
    monkeypatch.setenv(KEY_ENV, name)
    monkeypatch.setattr(_async, "_incr", None)
    client = redis.Redis.from_url(REDIS_URL)
    yield name
    client.delete(name)
    client.close()


def count(key: str) -> int:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        return int(client.get(key) or 0)
    finally:
        client.close()


def test_the_async_counter_counts_each_of_many_concurrent_incrs_once(key: str) -> None:
    async def run() -> list[int]:
        return await asyncio.gather(*(_async.incr_counter() for _ in range(500)))

    answers = asyncio.run(run())

    assert sorted(answers) == list(range(1, 501)), "each INCR got its own reply"
    assert count(key) == 500


def test_the_async_counter_reconnects_in_a_new_event_loop(key: str) -> None:
    asyncio.run(_async.incr_counter())
    asyncio.run(_async.incr_counter())

    assert count(key) == 2


def test_the_sync_counter_counts_from_several_threads_once_each(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sync, "_local", threading.local())  # connections made for this key

    def work() -> None:
        try:
            for _ in range(100):
                _sync.incr_counter()
        finally:
            _sync.close_counter()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert count(key) == 400


def test_the_counter_a_worker_imports_loads_no_redis_client() -> None:
    """Every system's workers import the counter: redis-py there would slow each start-up alike."""
    probe = (
        "import sys, bench.compare.ours_jobs, bench.compare.peers._sync; "
        "print(sorted(m for m in sys.modules if m == 'redis' or m.startswith('redis.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"
