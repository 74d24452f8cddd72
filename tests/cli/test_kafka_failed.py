# SPDX-License-Identifier: MIT
"""The failed commands over a Kafka topic, where a record that is not a job was failed.

That CLI workers fail every foreign record with what was wrong is the
contract suite's (tests/contract/test_foreign_entries.py). What is Kafka's
own: `retry` is refused with what to do instead, since a log cannot take a
record back, and `failed` lists the record in words and in JSON.
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
from ..kafka_foreign import produce_foreign
from .harness import Cli, no_traceback


def test_retry_is_refused_with_what_to_do_and_failed_lists_the_record(tmp_path: Path) -> None:
    tansu = broker()
    prefix = f"c{uuid.uuid4().hex[:10]}."
    tansu.create_topics_now(
        [topic_name(prefix, "foreign"), failed_topic_name(prefix, "foreign")], partitions=1
    )
    asyncio.run(produce_foreign(tansu, prefix + "foreign", [(b"odd", b"{this is not json")]))
    locks = quote(f"sqlite:///{tmp_path / 'locks.db'}", safe="")
    cli = Cli(f"kafka://{tansu.bootstrap}/?topic_prefix={prefix}&batch_bytes=1&locks={locks}")
    worked = cli("work", "--queue", "foreign", "--stop-when-empty")
    assert worked.code == 0, worked.output

    [listed] = cli.failed()
    retried = cli("retry", listed["id"])

    assert listed["name"] == NOT_A_JOB
    assert listed["payload"]["key"] == "odd"
    assert retried.code != 0
    assert "cannot retry" in retried.stderr
    assert no_traceback(retried)
    shown = cli("failed")
    assert shown.code == 0, shown.output
    assert "not a job" in shown.stdout
    assert json.loads(cli("failed", "--json", "--queue", "foreign").stdout) == [listed]
