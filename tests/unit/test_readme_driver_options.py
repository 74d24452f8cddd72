# SPDX-License-Identifier: MIT
"""The README's list of each driver's options is each driver's `OPTIONS`, no more and no less.

A user reads there which options a driver takes (Kafka's `topic_prefix`,
not `prefix`); a driver that gains or loses one without the list following
would send them to write an option that is refused, or miss one that exists.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rainier_queue.drivers import driver_class

README = Path(__file__).resolve().parents[2] / "README.md"

SCHEMES = {
    "memory": "memory",
    "sync": "sync",
    "SQLite": "sqlite",
    "PostgreSQL": "postgresql",
    "MySQL/MariaDB": "mysql",
    "Redis": "redis",
    "Kafka": "kafka",
    "NATS": "nats",
    "RabbitMQ": "amqp",
    "SQS": "sqs",
}


def listed() -> dict[str, set[str]]:
    """Each bullet `- Driver: `a`, `b`` of the driver-options list (the first of each name)."""
    found: dict[str, set[str]] = {}
    for line in README.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"- ([\w/]+): (.+)", line)
        if match and match.group(1) in SCHEMES and match.group(1) not in found:
            found[match.group(1)] = set(re.findall(r"`([a-z_]+)`", match.group(2)))
    return found


@pytest.mark.parametrize("driver", list(SCHEMES))
def test_the_readme_lists_exactly_the_options_each_driver_takes(driver: str) -> None:
    readme = listed()

    assert driver in readme, f"the README lists no options for {driver}"
    assert readme[driver] == set(driver_class(SCHEMES[driver]).OPTIONS)
