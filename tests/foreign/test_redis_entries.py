# SPDX-License-Identifier: MIT
"""Stream entries added to a queue's stream by other software, then worked by CLI workers.

As `test_sql_rows`, for Redis: a foreign producer `XADD`s well-formed
envelopes mixed with bodies that are not jobs (not JSON, not UTF-8, nested
10,000 deep, infinite attempts, a newer envelope version...). Workers must
run each job once, fail each foreign body into the failed list with the
field named, and drain the stream.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from ..cli.harness import Cli, no_traceback
from ..redis_servers import delete_keys
from ..services import require_port
from .catalog import QUEUE, bad_bodies, envelope
from .workers import drain_with_workers, failed_records

REDIS_URL = "redis://127.0.0.1:6379/0"
GOOD = 24


@pytest.fixture
def prefix() -> Iterator[str]:
    require_port("Redis", 6379)
    name = f"rqf:{uuid.uuid4().hex[:10]}:"
    yield name
    asyncio.run(delete_keys(f"{name}*", REDIS_URL))


def test_foreign_stream_entries_are_failed_with_the_field_named_and_every_job_runs_once(
    prefix: str, tmp_path: Path
) -> None:
    cli = Cli(f"{REDIS_URL}?prefix={prefix}")
    ledger = str(tmp_path / "ledger.txt")
    stream = f"{prefix}{{{QUEUE}}}:stream"
    bad = bad_bodies(ledger)
    good_ids = [f"good-{i:02d}" for i in range(GOOD)]
    bodies: list[str | bytes] = []
    bad_list = list(bad.values())
    for i, job_id in enumerate(good_ids):
        if i < len(bad_list):
            bodies.append(bad_list[i][0])
        bodies.append(json.dumps(envelope(job_id, job_id, ledger)))
    bodies += [body for body, _ in bad_list[len(good_ids) :]]
    client = redis.Redis.from_url(REDIS_URL)
    try:
        for body in bodies:
            client.xadd(stream, {"body": body})
    finally:
        client.close()

    results = drain_with_workers(cli, workers=2)

    for result in results:
        assert result.code == 0, result.output
        assert no_traceback(result), result.output
    ran = Counter(Path(ledger).read_text(encoding="utf-8").split())
    assert ran == Counter(good_ids), "each job runs exactly once"
    failed = failed_records(cli)
    assert len(failed) == len(bad)
    assert all(entry["name"] == "rainier-queue:not-a-job" for entry in failed)
    by_id = {entry["id"]: entry for entry in failed}
    errors = [entry["error"] for entry in failed]
    for job_id, (_, names) in bad.items():
        if job_id in by_id:  # a body with a readable id keeps it
            assert names in by_id[job_id]["error"], by_id[job_id]["error"]
        else:
            assert any(names in error for error in errors), (names, errors)
    assert cli.sizes(QUEUE) == {QUEUE: 0}
    json.dumps(failed)  # the listing itself is plain, printable JSON
