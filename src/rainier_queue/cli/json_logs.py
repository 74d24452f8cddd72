# SPDX-License-Identifier: MIT
"""`--log-format json`: one JSON object per log line, for log shippers.

A worker's log goes to a collector (Loki, Elasticsearch, CloudWatch) far
more often than to a person, and a collector wants fields, not a sentence
to parse with a regular expression. Each record becomes one line with its
time, level, logger and message, plus the job's fields where the record
is about one job (`job_id`, `job`, `queue`, `attempt`, given by the worker
through `extra=`) and the traceback, if any, as text.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

JOB_FIELDS = ("job_id", "job", "queue", "attempt")
"""The structured fields the worker attaches to records about one job."""


class JsonFormatter(logging.Formatter):
    """Formats each record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in JOB_FIELDS:
            value = record.__dict__.get(name)
            if value is not None:
                entry[name] = value
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


__all__ = ["JOB_FIELDS", "JsonFormatter"]
