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

from .harness import PATIENCE, Cli, clean_env, no_traceback, start

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
    assert "give --user NAME with the password in RAINIER_QUEUE_DASHBOARD_PASSWORD" in (
        refused.stderr
    )
    assert "--allow-anyone" in refused.stderr
    assert no_traceback(refused)
    assert no_password.code == 2, no_password.output
    assert "RAINIER_QUEUE_DASHBOARD_PASSWORD, which is not set" in no_password.stderr


def test_the_dashboard_serves_the_connections_failed_jobs_behind_its_login(cli: Cli) -> None:
    assert cli("dispatch", "boom", "--payload", '{"reason": "card declined"}').code == 0
    cli("work", "--once")
    port = free_port()
    env = clean_env(RAINIER_QUEUE_DASHBOARD_PASSWORD=PASSWORD)
    served = start(*cli.args("dashboard", "--user", "ops", "--port", str(port)), env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PATIENCE
        while True:
            try:
                status, _ = get(base + "/", login=False)
                break
            except OSError:
                assert served.poll() is None, served.communicate()
                assert time.monotonic() < deadline, "the dashboard never answered"
                time.sleep(0.1)
        assert status == 401
        status, page = get(base + "/failed", login=True)
        assert status == 200
        assert "card declined" in page
        assert PASSWORD not in page
    finally:
        served.send_signal(signal.SIGTERM)
        _out, err = served.communicate(timeout=PATIENCE)
    assert served.returncode == 0, err
    assert f"dashboard on http://127.0.0.1:{port}/" in err
