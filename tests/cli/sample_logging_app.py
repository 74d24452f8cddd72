# SPDX-License-Identifier: MIT
"""An application that logs through its own handler, as one with an error tracker does.

Loaded by the CLI with `--app tests.cli.sample_logging_app:registry`; at import
it adds a handler to the root logger that writes each record, with its job
fields, to the file named in RAINIER_QUEUE_TEST_LOG.
"""

from __future__ import annotations

import logging
import os

from .sample_jobs import registry


class _Fields(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = {k: record.__dict__.get(k) for k in ("job_id", "job", "queue", "attempt")}
        return f"{record.levelname} {record.name} {fields} {record.getMessage()}"


_handler = logging.FileHandler(os.environ["RAINIER_QUEUE_TEST_LOG"], encoding="utf-8")
_handler.setFormatter(_Fields())
logging.getLogger().addHandler(_handler)

__all__ = ["registry"]
