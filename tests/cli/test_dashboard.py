# SPDX-License-Identifier: MIT
"""`rainier-queue dashboard`: refuses to serve without saying who may open it, and serves
the same connections as every other command when told."""

from __future__ import annotations

import base64
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .harness import APP, PATIENCE, Cli, clean_env, no_traceback, run, start

PASSWORD = "dash-Pa55"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def get(url: str, *, login: bool) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if login:
        token = base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def test_the_dashboard_refuses_to_start_without_being_told_who_may_open_it(cli: Cli) -> None:
    refused = cli("dashboard")
    no_password = cli("dashboard", "--user", "ops")

    assert refused.code == 2, refused.output
    assert "give --user NAME (or `user` in the config's [dashboard] table) with the password" in (
        refused.stderr
    )
    assert "--allow-anyone" in refused.stderr
    assert no_traceback(refused)
    assert no_password.code == 2, no_password.output
    assert "RAINIER_QUEUE_DASHBOARD_PASSWORD, which is not set" in no_password.stderr


def first_answer(served: Any, url: str) -> int:
    """The status of the first answer from a dashboard that is starting (polling until it
    listens; not a timing assertion)."""
    deadline = time.monotonic() + PATIENCE
    while True:
        try:
            return get(url, login=False)[0]
        except OSError:
            assert served.poll() is None, served.communicate()
            assert time.monotonic() < deadline, "the dashboard never answered"
            time.sleep(0.1)


def stopped(served: Any) -> str:
    """Stop a dashboard as a service manager does; what it said on stderr."""
    served.send_signal(signal.SIGTERM)
    _out, err = served.communicate(timeout=PATIENCE)
    assert served.returncode == 0, err
    return str(err)


def test_the_dashboard_serves_the_connections_failed_jobs_behind_its_login(cli: Cli) -> None:
    assert cli("dispatch", "boom", "--payload", '{"reason": "card declined"}').code == 0
    cli("work", "--once")
    port = free_port()
    env = clean_env(RAINIER_QUEUE_DASHBOARD_PASSWORD=PASSWORD)
    served = start(*cli.args("dashboard", "--user", "ops", "--port", str(port)), env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        assert first_answer(served, base + "/") == 401
        status, page = get(base + "/failed", login=True)
        assert status == 200
        assert "card declined" in page
        assert PASSWORD not in page
    finally:
        err = stopped(served)
    assert f"dashboard on http://127.0.0.1:{port}/" in err


def config(tmp_path: Path, table: str) -> Path:
    path = tmp_path / "rainier-queue.toml"
    path.write_text(
        f'app = "{APP}"\n[connections.main]\nurl = "sqlite:///{tmp_path / "jobs.db"}"\n'
        f"[dashboard]\n{table}\n",
        encoding="utf-8",
    )
    return path


def test_the_config_says_who_may_open_the_dashboard_and_how_it_is_served(
    tmp_path: Path,
) -> None:
    port = free_port()
    table = f'user = "ops"\npassword_env = "OPS_PASSWORD"\nread_only = true\nport = {port}'
    env = clean_env(OPS_PASSWORD=PASSWORD)
    served = start("--config", str(config(tmp_path, table)), "dashboard", env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        assert first_answer(served, base + "/") == 401
        status, page = get(base + "/", login=True)
        assert status == 200
        assert 'id="read-only"' in page
    finally:
        err = stopped(served)
    assert "(read-only)" in err


def test_a_password_in_the_config_or_an_unknown_key_is_refused_saying_what_to_do(
    tmp_path: Path,
) -> None:
    in_file = run("--config", str(config(tmp_path, 'user = "ops"\npassword = "x"')), "dashboard")
    typo = run("--config", str(config(tmp_path, 'usr = "ops"')), "dashboard")

    assert in_file.code == 2, in_file.output
    assert "holds a password; keep it out of the file" in in_file.stderr
    assert typo.code == 2, typo.output
    assert "does not take `usr`. Did you mean `user`?" in typo.stderr
    assert no_traceback(typo)
