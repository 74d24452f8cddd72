# SPDX-License-Identifier: MIT
"""Who may open the dashboard, and what a page from elsewhere or a hostile payload cannot do:
no auth hook, no app; no login, 401; no CSRF token, 403; `<script>` in a payload is text;
secrets in a payload are hidden; read-only shows and refuses no action."""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rainier_queue import QueueManager
from rainier_queue.drivers.memory import MemoryQueue
from rainier_queue.errors import ConfigurationError
from rainier_queue.web import basic_auth, create_app

from ..contract.backends import SECRET
from .jobs import FAILING, SCRIPT, Hostile, Toggle
from .server import Served, served_over


def fetch(url: str, *, auth: tuple[str, str] | None = None) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url)
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers)


def one_failed(served: Served, key: str = "stuck") -> str:
    FAILING.add(key)
    try:
        [job_id] = served.dispatch(Toggle(key=key))
        served.work()
    finally:
        FAILING.discard(key)
    return job_id


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with served_over("sqlite", tmp_path) as server:
        yield server


def test_an_app_built_without_an_auth_hook_refuses_to_be_built_saying_how() -> None:
    manager = QueueManager(MemoryQueue())

    with pytest.raises(ConfigurationError, match=r"no auth hook: pass `auth=`") as refused:
        create_app(manager)
    assert "allow_anyone" in str(refused.value)
    with pytest.raises(ConfigurationError, match="must be a callable"):
        create_app(manager, auth="ops:secret")  # type: ignore[arg-type]


def test_a_request_without_the_login_gets_401_and_with_it_the_page(
    tmp_path: Path, browser: Any
) -> None:
    with served_over("sqlite", tmp_path, auth=basic_auth("ops", "pa55")) as served:
        for path in ("/", "/failed", "/static/dashboard.js", "/jobs/x"):
            status, headers = fetch(served.base + path)
            assert status == 401, path
            assert headers.get("www-authenticate", "").startswith("Basic")
        assert fetch(served.base + "/", auth=("ops", "wrong"))[0] == 401
        assert fetch(served.base + "/", auth=("ops", "pa55"))[0] == 200

        context = browser.new_context(http_credentials={"username": "ops", "password": "pa55"})
        try:
            page = context.new_page()
            response = page.goto(served.base + "/")
            assert response is not None
            assert response.status == 200
            assert page.locator("main h1").inner_text() == "Queues"
        finally:
            context.close()


def test_an_action_without_its_csrf_token_is_refused_and_changes_nothing(
    served: Served, browser: Any
) -> None:
    job_id = one_failed(served)
    page = browser.new_page()
    try:
        page.goto(served.base + "/failed")  # the browser now holds the CSRF cookie
        token = page.locator('#selected input[name="csrf"]').get_attribute("value")
        assert token
        action = served.base + "/actions/forget"

        without = page.request.post(action, form={"id": job_id, "back": "/failed"})
        wrong = page.request.post(action, form={"id": job_id, "csrf": "x" * 43, "back": "/"})
        as_get = page.request.get(f"{action}?id={job_id}&csrf={token}")

        assert without.status == 403
        assert "CSRF token is missing or stale" in without.text()
        assert wrong.status == 403
        assert as_get.status == 405
        assert served.status(job_id).status == "failed"
        done = page.request.post(
            action, form={"id": job_id, "csrf": token, "back": "/failed"}, max_redirects=0
        )
        assert done.status == 303
        assert served.status(job_id).status == "unknown"
    finally:
        page.close()


def test_a_payload_holding_a_script_shows_as_text_and_its_secrets_do_not_show(
    served: Served, browser: Any
) -> None:
    [job_id] = served.dispatch(
        Hostile(password="hunter2-secret", dsn="postgresql://app:db-secret@db.internal/app")
    )
    served.work()
    page = browser.new_page()
    dialogs: list[str] = []

    def on_dialog(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    try:
        for path in (f"/jobs/{job_id}", "/failed", "/jobs?state=failed"):
            page.goto(served.base + path)
            page.wait_for_load_state("load")
            assert page.evaluate("() => window.__pwned === undefined"), path
        page.goto(f"{served.base}/jobs/{job_id}")
        payload = page.inner_text("#payload")
        assert SCRIPT in payload  # shown as the text it is
        assert page.locator("main script, main img").count() == 0
        assert "refused <img src=x" in page.inner_text("#error")
        html = page.content()
        assert "hunter2-secret" not in html
        assert "db-secret" not in html
        assert "postgresql://app:***@db.internal/app" in payload
        assert dialogs == []
    finally:
        page.close()


def test_read_only_mode_shows_no_action_and_refuses_one_posted_anyway(
    tmp_path: Path, browser: Any
) -> None:
    with served_over("sqlite", tmp_path, read_only=True) as served:
        job_id = one_failed(served)
        page = browser.new_page()
        try:
            for path in ("/", "/failed", f"/jobs/{job_id}", "/schedules"):
                page.goto(served.base + path)
                assert page.locator("main form[method=post], main button[form]").count() == 0, path
                assert page.inner_text("#read-only") == "read-only"
            cookies = {c["name"]: c["value"] for c in page.context.cookies()}
            token = cookies["rainier_queue_csrf"]
            refused = page.request.post(
                served.base + "/actions/retry", form={"id": job_id, "csrf": token, "back": "/"}
            )
            assert refused.status == 403
            assert "read-only" in refused.text()
            assert served.status(job_id).status == "failed"
        finally:
            page.close()


def test_no_page_shows_the_connections_password(tmp_path: Path, browser: Any) -> None:
    with served_over("postgres", tmp_path, with_password=True) as served:
        served.dispatch(Toggle(key="behind-a-password"))
        page = browser.new_page()
        try:
            for path in ("/", "/jobs", "/failed", "/workers", "/schedules"):
                page.goto(served.base + path)
                assert "postgres" in page.inner_text("header .where")
                assert SECRET not in page.content(), path
        finally:
            page.close()
