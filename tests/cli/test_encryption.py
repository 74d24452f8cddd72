# SPDX-License-Identifier: MIT
"""Encrypted payloads from the command line: a rotation as an operator runs it, keys unseen.

The keys come from one environment variable named in the config file, as a
deployment would hand them over; every command's output and every log line
(`-vv`) is searched for the keys' text.
"""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

from .harness import APP, Result, clean_env, no_traceback, run

KEYS_VAR = "RQ_TEST_QUEUE_KEYS"


def a_key() -> str:
    made = run("encryption-key")
    assert made.code == 0, made.output
    key = made.stdout.strip()
    assert len(base64.urlsafe_b64decode(key)) == 32
    return key


def configured(folder: Path) -> Path:
    config = folder / "rainier-queue.toml"
    config.write_text(
        f'app = "{APP}"\n'
        f'[connections.main]\nurl = "sqlite:///jobs.db"\nencryption = "${{{KEYS_VAR}}}"\n',
        encoding="utf-8",
    )
    return config


class Operator:
    """The CLI on one config, with a key ring of the operator's choosing in the environment."""

    def __init__(self, folder: Path) -> None:
        self.config = configured(folder)
        self.db = folder / "jobs.db"
        self.keys = {"k1": a_key(), "k2": a_key(), "k9": a_key()}
        self.seen: list[str] = []

    def run(self, ring: str, *args: str) -> Result:
        pairs = " ".join(f"{kid}:{self.keys[kid]}" for kid in ring.split(","))
        result = run("-vv", "--config", str(self.config), *args, env=clean_env(**{KEYS_VAR: pairs}))
        self.seen.append(result.output)
        assert no_traceback(result), result.output
        return result

    def stored(self) -> str:
        with sqlite3.connect(self.db) as conn:
            rows = conn.execute("SELECT payload FROM rainier_jobs").fetchall()
            rows += conn.execute("SELECT payload FROM rainier_failed_jobs").fetchall()
        return "\n".join(row[0] for row in rows)

    def no_key_shown(self) -> None:
        for output in self.seen:
            for key in self.keys.values():
                assert key not in output


def test_a_rotation_from_the_command_line(tmp_path: Path) -> None:
    op = Operator(tmp_path)
    assert op.run("k1", "dispatch", "note", "--payload", '{"text": "secret-one"}').code == 0
    assert op.run("k1,k2", "dispatch", "note", "--payload", '{"text": "secret-two"}').code == 0
    stored = op.stored()
    assert '"key":"k1"' in stored
    assert '"key":"k2"' in stored
    assert "secret-one" not in stored
    assert "secret-two" not in stored

    moved = op.run("k1,k2", "reencrypt")
    assert moved.code == 0, moved.output
    assert "main: 1 job(s) moved to key `k2` (1 from `k1`)" in moved.stdout
    assert '"key":"k1"' not in op.stored()

    worked = op.run("k2", "work", "--stop-when-empty")  # key 1 is gone
    assert worked.code == 0, worked.output
    assert "2 processed" in worked.output or '"processed": 2' in worked.output, worked.output
    for command in (("doctor",), ("size",), ("failed",)):
        op.run("k2", *command)
    op.no_key_shown()


def test_a_job_sealed_with_a_key_the_worker_lacks_is_failed_naming_the_key_id(
    tmp_path: Path,
) -> None:
    op = Operator(tmp_path)
    op.run("k9", "dispatch", "note", "--payload", '{"text": "x"}')

    worked = op.run("k1", "work", "--stop-when-empty")
    assert worked.code == 1, worked.output
    listed = op.run("k1", "failed")
    assert "sealed with key `k9`" in listed.output, listed.output

    left = op.run("k1", "reencrypt")  # it cannot be moved either, and says so
    assert left.code == 1, left.output
    assert "sealed with key `k9`" in left.stderr
    op.no_key_shown()


def test_reencrypt_without_a_key_ring_says_there_is_nothing_to_do(tmp_path: Path) -> None:
    result = run("--url", f"sqlite:///{tmp_path / 'jobs.db'}", "reencrypt")
    assert result.code == 4, result.output
    assert "no `encryption` key ring" in result.output


def test_a_url_connection_takes_its_key_ring_from_one_variable(tmp_path: Path) -> None:
    """`--url` has no config table for `encryption`, so RAINIER_QUEUE_ENCRYPTION_KEYS holds it."""
    db = tmp_path / "jobs.db"
    key = a_key()
    env = clean_env(RAINIER_QUEUE_ENCRYPTION_KEYS=f"k1:{key}")
    url = ("--app", APP, "--url", f"sqlite:///{db}")
    sent = run(*url, "dispatch", "note", "--payload", '{"text": "by-url"}', env=env)
    assert sent.code == 0, sent.output
    with sqlite3.connect(db) as conn:
        [(payload,)] = conn.execute("SELECT payload FROM rainier_jobs").fetchall()
    assert '"key":"k1"' in payload
    assert "by-url" not in payload

    unopened = run(*url, "work", "--stop-when-empty")  # no ring: failed, saying why
    assert unopened.code == 1, unopened.output
    assert "sealed with key `k1`" in run(*url, "failed").output
    retried = run(*url, "retry", "--all", env=env)
    assert retried.code == 0, retried.output
    worked = run("-vv", *url, "work", "--stop-when-empty", env=env)
    assert worked.code == 0, worked.output
    for result in (sent, unopened, retried, worked):
        assert key not in result.output
