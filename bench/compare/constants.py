# SPDX-License-Identifier: MIT
"""The comparison's fixed names and figures, in a leaf every other module of it may import.

Which systems and backends there are, how the README names them, where
its block and chart go, and the bounds the workloads and the reports share.
Nothing here imports anything of the benchmark's, so no module that needs
a name has to import another that needs it back.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README_CHART = ROOT / "bench" / "results" / "compare.png"
"""The chart the README shows: tracked by git, written only with the README's numbers."""
OURS = "rainier-queue"
BACKEND_ORDER = (
    "memory",
    "sqlite",
    "postgres",
    "mysql",
    "redis",
    "kafka",
    "nats",
    "rabbitmq",
    "sqs",
)
BACKEND_NAMES = {
    "memory": "memory (in-process)",
    "sqlite": "SQLite",
    "postgres": "PostgreSQL",
    "mysql": "MySQL/MariaDB",
    "redis": "Redis",
    "kafka": "Kafka",
    "nats": "NATS JetStream",
    "rabbitmq": "RabbitMQ",
    "sqs": "SQS (moto)",
}
DISPLAY = {
    "pgqueuer": "PgQueuer",
    "procrastinate": "Procrastinate",
    "taskiq": "taskiq",
    "saq": "SAQ",
    "dramatiq": "Dramatiq",
    "huey": "Huey",
    "rq": "RQ (one job at a time per worker)",
    "celery": "Celery",
}
KAFKA_PARTITIONS = 6
"""Partitions of the Kafka row's topic: on a log, at most this many jobs run at once."""
NO_PEER = {
    "memory": (
        "one process that pushes, then works (P is 1); no peer: an in-process queue is not "
        "a deployment the peers offer"
    ),
    "sqlite": "no peer ran on SQLite (of the peers here, only Huey has SQLite storage)",
    "mysql": (
        "no peer ran on MySQL/MariaDB (of the peers here, only Huey has MySQL storage, "
        "SqlHuey; PgQueuer and Procrastinate are PostgreSQL-only)"
    ),
    "kafka": (
        f"one topic of {KAFKA_PARTITIONS} partitions, so at most {KAFKA_PARTITIONS} jobs run at "
        "once whatever the concurrency; no peer ran on Kafka here, and the broker is Tansu "
        "(a Kafka-protocol broker in memory), not Apache Kafka"
    ),
}
TIMES = "\u00d7"  # the README writes ratios as 1.33\u00d7
START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
FAR = 4.0
"""How far behind ours a peer may be before more of its runs stop being worth their time.

The target is 3x the fastest peer. A peer whose first round ran at less than
ours / FAR is not run again in that setting (its ratio comes from one run: no
noise on this machine brings 4x near 3x), and a peer run that has not drained
its jobs after FAR times ours' drain of the same jobs in that round is stopped
there: by then its rate is known to be below ours / FAR."""

PEER_RUN_FLOOR_S = 60.0
"""A peer run is never stopped by `FAR` before this many seconds, so every peer that
finishes within a minute gets a real number rather than a bound."""
