# SPDX-License-Identifier: MIT
"""Small things a new user reads: option typos, URLs shown, delays, the first Ctrl-C."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

from ..postgres import PG_URL, require_postgres
from ..services import require_port
from .harness import APP, PATIENCE, Cli, no_traceback, run


def test_a_misspelt_postgresql_url_option_reads_as_a_sentence_and_suggests_the_option() -> None:
    require_postgres()

    result = run("--app", APP, "--url", f"{PG_URL}?leese=90s", "size")

    assert result.code == 2, result.output
    assert "nor libpq" not in result.stderr
    assert "does not take `leese`" in result.stderr
    assert "Did you mean `lease`?" in result.stderr
    assert no_traceback(result)


def test_a_redis_connection_is_shown_with_its_prefix_and_no_mangled_query() -> None:
    require_port("Redis", 6379)

    result = run("--app", APP, "--url", "redis://127.0.0.1:6379/0?prefix=newbie_rq:", "size")

    assert result.code == 0, result.output
    assert "connection `default`: redis redis://127.0.0.1:6379/0 prefix='newbie_rq:'" in (
        result.output
    )
    assert "?***" not in result.output


def test_a_retry_delay_is_rounded_for_a_person(cli: Cli, tmp_path: Path) -> None:
    payload = json.dumps({"path": str(tmp_path / "attempts.txt"), "retry_after": 0.96752})
    cli("dispatch", "fails-first", "--payload", payload)

    worked = cli("work", "--stop-when-empty", "--sleep", "0.1s")

    assert worked.code == 0, worked.output
    assert "retrying in 0.97s" in worked.stderr, worked.stderr
    assert "0.96752" not in worked.stderr


def test_the_first_ctrl_c_says_how_long_the_grace_lasts_and_what_a_second_one_does(
    cli: Cli, tmp_path: Path
) -> None:
    marker = tmp_path / "slow.txt"
    cli("dispatch", "slow", "--payload", json.dumps({"path": str(marker), "seconds": 2}))
    proc = cli.start("work", "--once", "--grace", "90s")
    try:
        deadline = time.monotonic() + PATIENCE
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=PATIENCE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()

    assert "received SIGINT" in stderr, stderr
    assert "finish for up to 1m30s" in stderr
    assert "send SIGINT again to stop at once" in stderr


def test_failed_with_an_id_shows_that_record_with_its_whole_traceback(cli: Cli) -> None:
    cli("dispatch", "boom", "--payload", '{"reason": "the card was declined"}')
    cli("work", "--once")
    [record] = cli.failed()
    short = record["id"][-12:]

    shown = cli("failed", short)

    assert shown.code == 0, shown.output
    assert record["id"] in shown.stdout
    assert "Traceback (most recent call last)" in shown.stdout
    assert "RuntimeError: the card was declined" in shown.stdout
    assert '"reason": "the card was declined"' in shown.stdout
    missing = cli("failed", "0123456789ab")
    assert missing.code == 1, missing.output
    assert "no failed job has id 0123456789ab" in missing.stderr
