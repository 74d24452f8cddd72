# SPDX-License-Identifier: MIT
"""A payload as the dashboard shows it: secret-sounding keys hidden at any depth, credentials
in URLs hidden, the rest as it was."""

from __future__ import annotations

from rainier_queue.redact import redact_fields


def test_values_under_secret_sounding_keys_are_hidden_at_any_depth() -> None:
    payload = {
        "user": 7,
        "password": "hunter2",
        "nested": {"api_token": "t0k", "items": [{"Secret": "s"}, {"colour": "blue"}]},
        "dsn": "postgresql://app:pw@db/app",
        "link": "https://example.test/page",
    }

    assert redact_fields(payload) == {
        "user": 7,
        "password": "***",
        "nested": {"api_token": "***", "items": [{"Secret": "***"}, {"colour": "blue"}]},
        "dsn": "postgresql://app:***@db/app",
        "link": "https://example.test/page",
    }
    assert payload["password"] == "hunter2"  # a copy: the job's own payload is untouched
