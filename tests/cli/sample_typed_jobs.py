# SPDX-License-Identifier: MIT
"""A job with typed fields (an Enum, a Literal, a timedelta, a dataclass list), for the CLI tests
of payload errors: `--app tests.cli.sample_typed_jobs:registry`."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

from rainier_queue import Job, JobContext, JobRegistry


class Size(enum.Enum):
    SMALL = "small"
    LARGE = "large"


@dataclass
class Line:
    sku: str
    size: Size


class Order(Job):
    """Writes its `wait` in seconds to `path`."""

    name = "order"
    order_id: int
    customer: str
    size: Size
    speed: Literal["standard", "express"]
    wait: timedelta
    path: str
    lines: list[Line]

    def handle(self, ctx: JobContext) -> None:
        Path(self.path).write_text(str(self.wait.total_seconds()), encoding="utf-8")


registry = JobRegistry([Order])
