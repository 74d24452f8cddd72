# SPDX-License-Identifier: MIT
"""`doctor` names what a queue's server lacks and the command that makes it; `provision` does.

Run as a user runs them, in a subprocess: a database one migration behind
this code, a Kafka topic made by hand with too few partitions, and topics
nobody made. `migrate`, the command's old name, is tested beside the
queue commands (test_queue_commands.py).
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from urllib.parse import quote

from rainier_queue.drivers.database import schema as schema_module
from rainier_queue.drivers.database.sqlite import SQLiteQueue
from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name

from ..kafka_broker import broker
from .harness import Cli, no_traceback


def make_schema_before_migration_3(path: Path) -> None:
    """Tables as the release before migration 3 left them (see test_database_upgrade)."""
    shipped = schema_module.MIGRATIONS
    schema_module.MIGRATIONS = tuple(m for m in shipped if m.version <= 2)
    try:

        async def migrate() -> None:
            queue = SQLiteQueue(str(path))
            try:
                await queue.migrate()
            finally:
                await queue.aclose()

        asyncio.run(migrate())
    finally:
        schema_module.MIGRATIONS = shipped


def test_doctor_names_provision_for_a_database_one_migration_behind_and_provision_fixes_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "jobs.db"
    make_schema_before_migration_3(path)
    refusing = Cli(f"sqlite:///{path}?migrate=false")
    migrating = Cli(f"sqlite:///{path}")

    before = refusing("doctor")
    warned = migrating("doctor")
    provisioned = refusing("provision")
    after = refusing("doctor")

    behind = (
        "the tables `rainier_*` are at schema version 2, and this code needs version 8 "
        "(0003_lease_until, 0004_paused_queues, 0005_records, 0006_batches, 0007_ordering_keys, "
        "0008_held_keys to apply): "
        "run `rainier-queue provision`"
    )
    assert before.code == 4, before.output
    assert behind + "; until then every command on the connection is refused" in before.stdout
    assert warned.code == 0, warned.output
    assert behind + "; otherwise the first command on the connection applies it" in warned.stdout
    assert provisioned.code == 0, provisioned.output
    assert "applied migration 0003_lease_until" in provisioned.stdout
    assert "applied migration 0004_paused_queues" in provisioned.stdout
    assert "applied migration 0005_records" in provisioned.stdout
    assert "applied migration 0006_batches" in provisioned.stdout
    assert "applied migration 0007_ordering_keys" in provisioned.stdout
    assert "applied migration 0008_held_keys" in provisioned.stdout
    assert "done (schema version 8 of 8)" in provisioned.stdout
    assert after.code == 0, after.output
    assert "no problems found" in after.stdout


def kafka_cli(tmp_path: Path, prefix: str, **options: str) -> Cli:
    locks = quote(f"sqlite:///{tmp_path / 'locks.db'}", safe="")
    extra = "".join(f"&{k}={v}" for k, v in options.items())
    bootstrap = broker().bootstrap
    return Cli(f"kafka://{bootstrap}/?topic_prefix={prefix}&batch_bytes=1&locks={locks}{extra}")


def test_doctor_names_the_fix_for_a_kafka_topic_with_too_few_partitions(tmp_path: Path) -> None:
    prefix = f"d{uuid.uuid4().hex[:10]}."
    topic, failed = topic_name(prefix, "default"), failed_topic_name(prefix, "default")
    broker().create_topics_now([topic], partitions=1)
    cli = kafka_cli(tmp_path, prefix, partitions="3")

    found = cli("doctor")
    provisioned = cli("provision")
    again = cli("doctor")
    as_advised = kafka_cli(tmp_path, prefix, partitions="1")("doctor")

    assert found.code == 4, found.output
    assert (
        f"topic `{topic}` has 1 partition, and `partitions` asks for 3: "
        "run `rainier-queue provision --queue default`; growing it moves keys"
    ) in found.stdout
    assert (
        f"topic `{failed}` does not exist: run `rainier-queue provision --queue default`"
    ) in found.stdout
    # Tansu cannot add partitions (no CreatePartitions): provisioning makes the failed topic,
    # then says what to do about the short one instead of failing quietly.
    assert provisioned.code == 3, provisioned.output
    assert "cannot add partitions" in provisioned.stderr
    assert "set `partitions` to 1" in provisioned.stderr
    assert no_traceback(provisioned)
    assert again.code == 4, again.output
    assert f"topic `{failed}` does not exist" not in again.stdout
    assert f"topic `{topic}` has 1 partition" in again.stdout
    assert as_advised.code == 0, as_advised.output
    assert "no problems found" in as_advised.stdout


def test_provision_makes_the_kafka_topics_doctor_found_missing_and_doctor_is_then_clean(
    tmp_path: Path,
) -> None:
    prefix = f"p{uuid.uuid4().hex[:10]}."
    cli = kafka_cli(tmp_path, prefix, partitions="2")

    before = cli("doctor")
    pushed = cli("dispatch", "note", "--payload", '{"text": "early"}')
    provisioned = cli("provision")
    again = cli("provision")
    after = cli("doctor")

    topic = topic_name(prefix, "default")
    assert before.code == 4, before.output
    assert f"topic `{topic}` does not exist: run `rainier-queue provision" in before.stdout
    assert pushed.code != 0, "a push must not create a Kafka topic"
    assert "rainier-queue provision --queue default" in pushed.stderr
    assert provisioned.code == 0, provisioned.output
    assert f"created topic `{topic}` with 2 partitions and 1 replica" in provisioned.stdout
    assert f"created topic `{topic}.failed` with 1 partition" in provisioned.stdout
    assert again.code == 0, again.output
    assert "up to date for queue(s) `default`" in again.stdout
    assert after.code == 0, after.output
    assert "no problems found" in after.stdout
    assert cli.sizes("default") == {"default": 0}, "the refused push left nothing behind"


def test_provision_with_queue_options_makes_only_those_queues(tmp_path: Path) -> None:
    prefix = f"q{uuid.uuid4().hex[:10]}."
    cli = kafka_cli(tmp_path, prefix)

    made = cli("provision", "--queue", "emails,reports", "--queue", "emails")

    assert made.code == 0, made.output
    created = [line for line in made.stdout.splitlines() if "created topic" in line]
    assert [line.split("`")[1] for line in created] == [
        topic_name(prefix, "emails"),
        failed_topic_name(prefix, "emails"),
        topic_name(prefix, "reports"),
        failed_topic_name(prefix, "reports"),
    ]


def test_provision_on_a_driver_that_needs_nothing_made_says_so() -> None:
    result = Cli("memory://")("provision")

    assert result.code == 0, result.output
    assert "nothing to provision" in result.stdout
