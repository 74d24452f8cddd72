# SPDX-License-Identifier: MIT
"""The Redis driver over a Unix socket (`unix:///path/to/redis.sock`).

The tests that connect start a private redis-server listening on a socket
only (`--port 0`), with a password, so the URL's password, database and
this driver's own options are all seen to reach it. The tests of refused
URLs connect to nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from rainier_queue.cache import LockManager
from rainier_queue.cache.stores import open_cache
from rainier_queue.drivers import open_queue
from rainier_queue.drivers.redis import RedisQueue
from rainier_queue.envelope import QueuedJob
from rainier_queue.errors import (
    BrokerUnavailable,
    ConfigurationError,
    OutcomeUnknown,
    UnknownOption,
)
from rainier_queue.queue import Queue

from ..redis_servers import on_socket
from ..worker.jobs import Journal, quick, worker_for

PASSWORD = "s3cret-socket"


def a_job(queue: str = "default") -> QueuedJob:
    return QueuedJob.create("note", {"text": uuid.uuid4().hex}, queue=queue)


@pytest.fixture(scope="module")
def socket_server() -> Iterator[Path]:
    servers, path = on_socket("--requirepass", PASSWORD)
    try:
        yield path
    finally:
        servers.stop()


@pytest.fixture
def open_at(socket_server: Path, opened: list[Queue]) -> Any:
    def opener(query: str = "", **options: Any) -> RedisQueue:
        queue = open_queue(f"unix://:{PASSWORD}@{socket_server}{query}", options)
        assert isinstance(queue, RedisQueue)
        opened.append(queue)
        return queue

    return opener


async def test_a_queue_on_a_unix_socket_takes_the_database_and_the_drivers_own_options(
    socket_server: Path, open_at: Any
) -> None:
    queue = open_at("?db=3&prefix=app:&lease=30s")
    await queue.push(job := a_job())

    [got] = await queue.reserve("default")

    assert got.job.id == job.id
    assert got.lease == timedelta(seconds=30)
    db3 = Redis(unix_socket_path=str(socket_server), password=PASSWORD, db=3)
    db0 = Redis(unix_socket_path=str(socket_server), password=PASSWORD, db=0)
    try:
        keys = [key.decode() async for key in db3.scan_iter(match="*")]
        assert keys
        assert all(key.startswith("app:") for key in keys), keys
        assert await db0.dbsize() == 0
    finally:
        await db3.aclose()
        await db0.aclose()
    await queue.acknowledge(got)
    assert await queue.size("default") == 0


async def test_a_worker_drains_a_queue_it_reaches_over_a_unix_socket(open_at: Any) -> None:
    queue = open_at("?prefix=drain:")
    jobs = [a_job() for _ in range(3)]
    await queue.push_many(jobs)

    journal = Journal()
    await worker_for(queue, journal, quick(stop_when_empty=True)).run()

    assert sorted(journal.ran) == sorted(j.payload["text"] for j in jobs)


async def test_doctor_reaches_redis_over_a_unix_socket_and_reads_its_settings(
    socket_server: Path,
) -> None:
    from ..cli.harness import APP, run

    url = f"unix://:{PASSWORD}@{socket_server}?db=1"
    result = await asyncio.to_thread(run, "--app", APP, "--url", url, "doctor")

    assert result.code == 0, result.output
    assert "reachable" in result.stdout, result.output
    assert "keeps nothing on disk" in result.stdout, result.output
    assert PASSWORD not in result.output


async def test_a_unix_socket_nobody_listens_on_is_a_plain_outage(
    tmp_path: Path, opened: list[Queue]
) -> None:
    queue = open_queue(f"unix://{tmp_path / 'nobody.sock'}")
    opened.append(queue)

    with pytest.raises(BrokerUnavailable) as raised:
        await queue.push(a_job())

    assert not isinstance(raised.value, OutcomeUnknown), "nothing was sent"


def test_the_description_of_a_unix_url_hides_the_password() -> None:
    queue = open_queue(f"unix://:{PASSWORD}@/run/redis/redis.sock?db=2")

    assert queue.describe().startswith("redis unix://")
    assert "@/run/redis/redis.sock" in queue.describe()
    assert PASSWORD not in queue.describe()
    assert PASSWORD not in repr(queue)


@pytest.mark.parametrize(
    "url",
    ["unix:///run/redis/redis.sock?cluster=true", "unix:///run/redis/redis.sock"],
    ids=["in-url", "in-options"],
)
def test_a_cluster_over_a_unix_socket_is_refused_saying_what_to_use(url: str) -> None:
    options = {} if "cluster" in url else {"cluster": "yes"}

    with pytest.raises(ConfigurationError, match="cannot be reached over a Unix socket"):
        open_queue(url, options)


@pytest.mark.parametrize("url", ["unix://run/redis.sock", "unix://localhost/run/redis.sock"])
def test_a_unix_url_naming_a_host_is_refused_with_the_three_slash_form(url: str) -> None:
    with pytest.raises(ConfigurationError, match="three slashes"):
        open_queue(url)


@pytest.mark.parametrize("url", ["unix://", "unix:///", "unix:///?db=0"])
def test_a_unix_url_without_a_socket_path_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="needs the path"):
        open_queue(url)


@pytest.mark.parametrize(
    ("setting", "says"),
    [("socket_keepalive=true", "does not apply to a Unix-socket"), ("ssl_min_version=2", "TLS")],
)
def test_a_tcp_or_tls_setting_on_a_unix_url_is_refused_saying_it_does_not_apply(
    setting: str, says: str
) -> None:
    with pytest.raises(ConfigurationError, match=says) as raised:
        open_queue(f"unix:///run/redis/redis.sock?{setting}")

    assert not isinstance(raised.value, UnknownOption), "it is known, just not for a socket"


def test_a_misspelt_option_on_a_unix_url_gets_a_suggestion() -> None:
    with pytest.raises(UnknownOption, match="Did you mean `prefix`"):
        open_queue("unix:///run/redis/redis.sock?prefxi=app:")


async def test_the_lock_store_works_over_a_unix_socket(socket_server: Path) -> None:
    url = f"unix://:{PASSWORD}@{socket_server}?db=0&prefix=locks-{uuid.uuid4().hex}:"
    async with open_cache(url) as one, open_cache(url) as other:
        mine, theirs = LockManager(one), LockManager(other)
        held = await mine.acquire("nightly-report", timedelta(seconds=30))
        assert held is not None
        assert await theirs.acquire("nightly-report", timedelta(seconds=30)) is None
        assert await theirs.is_held("nightly-report")
        assert await mine.release(held)
        assert await theirs.acquire("nightly-report", timedelta(seconds=30)) is not None


def test_a_unix_socket_lock_store_refuses_a_cluster_with_what_to_write() -> None:
    with pytest.raises(ConfigurationError, match="unix"):
        open_cache("unix:///run/redis/redis.sock?cluster=true")
