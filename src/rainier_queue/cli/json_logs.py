# SPDX-License-Identifier: MIT
"""`--log-format json`: one JSON object per log line, for log shippers.

A worker's log goes to a collector (Loki, Elasticsearch, CloudWatch) far
more often than to a person, and a collector wants fields, not a sentence
to parse with a regular expression. Each record becomes one line with its
time, level, logger and message, plus the job's fields where the record
is about one job (`job_id`, `job`, `queue`, `attempt`, given by the worker
through `extra=`) and the traceback, if any, as text. What the command line
says itself (the start line, warnings, errors, `work`'s summary) comes in
the same shape from `json_line`, so in this mode every line on stderr, and
`work`'s summary on stdout, is one JSON object.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

JOB_FIELDS = ("job_id", "job", "queue", "attempt")
"""The structured fields the worker attaches to records about one job."""


CLI_LOGGER = "rainier_queue.cli"
"""The `logger` of the lines the command line writes itself (its start line, warnings,
errors and the summary), so a collector can tell them from the worker's records."""


def json_line(level: str, message: str, **fields: object) -> str:
    """One JSON line in the shape of the log records, for what the CLI says itself.

    The start line, the warnings, the errors and the summary are not log
    records (they are shown at every log level), but under `--log-format
    json` a collector must get them as JSON too, with the same keys.
    """
    entry: dict[str, object] = {
        "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "level": level,
        "logger": CLI_LOGGER,
        "message": message,
        **fields,
    }
    return json.dumps(entry, ensure_ascii=False, default=str)


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


__all__ = ["CLI_LOGGER", "JOB_FIELDS", "JsonFormatter", "json_line"]
