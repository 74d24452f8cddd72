# SPDX-License-Identifier: MIT
"""CLI workers over a Kafka topic that other producers also write to.

Well-formed jobs written by hand mixed with records that are not jobs, two
`work --stop-when-empty` processes sharing the partitions: both exit 0,
every job runs once, nothing is left waiting, and `failed --json` lists
every record that was not a job with an error naming what was wrong.
`retry` is refused with what to do instead, since a log cannot take a
record back.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from urllib.parse import quote

from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name
from rainier_queue.stored import NOT_A_JOB

from ..kafka_broker import broker
from ..kafka_foreign import MALFORMED, envelope, produce_foreign, text
from .harness import PATIENCE, Cli, no_traceback


def test_cli_workers_run_every_good_record_once_and_failed_lists_every_foreign_one(
    tmp_path: Path,
) -> None:
    tansu = broker()
    prefix = f"c{uuid.uuid4().hex[:10]}."
    tansu.create_topics_now(
        [topic_name(prefix, "foreign"), failed_topic_name(prefix, "foreign")], partitions=3
    )
    out = tmp_path / "ran.txt"
    good = [
        envelope(payload={"text": f"job-{n}", "path": str(out)}, id=f"good-{n}") for n in range(8)
    ]
    records: list[tuple[bytes, bytes | None]] = []
    for at, (key, (value, _)) in enumerate(MALFORMED.items()):
        job = good[at % len(good)]
        records.append((job["id"].encode(), text(job)))
        records.append((key.encode(), value))
    records = list(dict.fromkeys(records))  # each good job once
    asyncio.run(produce_foreign(tansu, prefix + "foreign", records))
    locks = quote(f"sqlite:///{tmp_path / 'locks.db'}", safe="")
    cli = Cli(f"kafka://{tansu.bootstrap}/?topic_prefix={prefix}&batch_bytes=1&locks={locks}")

    workers = [cli.start("work", "--queue", "foreign", "--stop-when-empty") for _ in range(2)]
    ended = [worker.communicate(timeout=PATIENCE) for worker in workers]

    for worker, (stdout, stderr) in zip(workers, ended, strict=True):
        assert worker.returncode == 0, stdout + stderr
        assert "Traceback" not in stderr
    assert sorted(out.read_text().splitlines()) == sorted(f"job-{n}" for n in range(8))
    assert cli.sizes("foreign") == {"foreign": 0}
    listed = cli.failed()
    assert sorted(entry["payload"]["key"] for entry in listed) == sorted(MALFORMED)
    for entry in listed:
        assert entry["name"] == NOT_A_JOB
        assert entry["queue"] == "foreign"
        assert MALFORMED[entry["payload"]["key"]][1] in entry["error"], entry
    retried = cli("retry", listed[0]["id"])
    assert retried.code != 0
    assert "cannot retry" in retried.stderr
    assert no_traceback(retried)
    shown = cli("failed")
    assert shown.code == 0, shown.output
    assert "not a job" in shown.stdout
    assert json.loads(cli("failed", "--json", "--queue", "foreign").stdout) == listed
