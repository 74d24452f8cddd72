# SPDX-License-Identifier: MIT
"""A payload that does not fit its job: every problem at once, with what each field allows."""

from __future__ import annotations

import json
from pathlib import Path

from .harness import Cli, no_traceback

APP = "tests.cli.sample_typed_jobs:registry"


def order(**fields: object) -> str:
    payload: dict[str, object] = {
        "order_id": 7,
        "customer": "ada",
        "size": "small",
        "speed": "express",
        "wait": "PT30S",
        "path": "/dev/null",
        "lines": [],
    }
    payload.update(fields)
    return json.dumps({k: v for k, v in payload.items() if v is not None})


def test_a_payload_missing_four_fields_names_all_four(db_url: str) -> None:
    cli = Cli(db_url, app=APP)

    result = cli("dispatch", "order", "--payload", json.dumps({"order_id": 1, "lines": []}))

    assert result.code == 2, result.output
    for name in ("customer", "size", "speed", "wait"):
        assert f"`{name}`: missing required field" in result.stderr, result.stderr
    assert "5 problems" in result.stderr, "path too is missing"
    assert no_traceback(result)


def test_an_invalid_enum_or_literal_value_lists_the_allowed_ones(db_url: str) -> None:
    cli = Cli(db_url, app=APP)
    lines = [{"sku": "a1", "size": "medium"}]

    result = cli("dispatch", "order", "--payload", order(size="xl", speed="slow", lines=lines))

    assert result.code == 2, result.output
    assert "3 problems" in result.stderr, result.stderr
    assert '`size`: invalid enum value \'xl\'; allowed: "small", "large"' in result.stderr
    assert '`speed`: invalid enum value \'slow\'; allowed: "standard", "express"' in (result.stderr)
    assert "`lines[0].size`: invalid enum value 'medium'; allowed:" in result.stderr


def test_an_invalid_duration_says_how_to_write_one(db_url: str) -> None:
    cli = Cli(db_url, app=APP)

    result = cli("dispatch", "order", "--payload", order(wait="soon"))

    assert result.code == 2, result.output
    assert "at `wait`" in result.stderr
    assert '"PT30S"' in result.stderr
    assert '"1h30m"' in result.stderr


def test_a_duration_field_takes_the_forms_delay_takes(db_url: str, tmp_path: Path) -> None:
    cli = Cli(db_url, app=APP)
    out = tmp_path / "wait.txt"

    dispatched = cli("dispatch", "order", "--payload", order(wait="1h30m", path=str(out)))
    worked = cli("work", "--stop-when-empty")

    assert dispatched.code == 0, dispatched.output
    assert worked.code == 0, worked.output
    assert out.read_text(encoding="utf-8") == "5400.0"
