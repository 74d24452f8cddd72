# SPDX-License-Identifier: MIT
"""Who may open the dashboard, and proof that an action came from its own page.

Why this is not optional: the dashboard retries, forgets and flushes jobs
and shows their payloads, so an instance reachable without a login is a
way into the queue for anyone on the network. An app built without an
auth hook therefore refuses to be built, and says how to give one; the
opt-out for a dashboard on one's own machine is a hook of its own,
`allow_anyone`, that reads as what it does wherever it is written.

An auth hook is any callable taking the Starlette `Request` and returning
(or awaiting to) True to let the request in. `basic_auth` builds one from a
user name and password, and asks the browser for them (HTTP Basic; use it
behind TLS). A refused request gets 401, and nothing of the page.

Actions are POST only, and each carries a CSRF token: a random value the
dashboard sets in a cookie (`SameSite=Strict`, `HttpOnly`) and writes into
every form it renders; a POST whose form value is not the cookie's is
refused with 403. Another site can make a browser send the cookie, but it
cannot read it, so it cannot write the matching form value.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import inspect
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.requests import Request

from ..errors import ConfigurationError

AuthHook = Callable[[Request], "bool | Awaitable[bool]"]
"""Lets a request in (True) or not; may be a coroutine function."""

CSRF_COOKIE = "rainier_queue_csrf"
CSRF_FIELD = "csrf"

NO_AUTH = (
    "the dashboard needs to know who may open it, and was given no auth hook: pass "
    "`auth=` a callable taking the request and returning True for those let in, or "
    "`auth=basic_auth(user, password)`; for a dashboard on your own machine only, "
    "`auth=allow_anyone` lets every request in (with `rainier-queue dashboard`: --user "
    "with RAINIER_QUEUE_DASHBOARD_PASSWORD set, or --allow-anyone)"
)


def allow_anyone(request: Request) -> bool:
    """The auth hook that lets every request in: for a dashboard on your own machine."""
    return True


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """An auth hook checking HTTP Basic credentials against one user and password."""

    user: str
    password: str = ""
    realm: str = "rainier-queue"

    def __post_init__(self) -> None:
        if not self.user or not self.password:
            raise ConfigurationError(
                "basic auth needs a user name and a non-empty password (the CLI reads the "
                "password from RAINIER_QUEUE_DASHBOARD_PASSWORD, never from its arguments)"
            )

    @property
    def challenge(self) -> str:
        """The `WWW-Authenticate` header a refused browser is sent, to ask for a login."""
        return f'Basic realm="{self.realm}", charset="UTF-8"'

    def __call__(self, request: Request) -> bool:
        given = request.headers.get("authorization", "")
        scheme, _, encoded = given.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, sep, password = decoded.partition(":")
        same_user = hmac.compare_digest(user.encode(), self.user.encode())
        same_password = hmac.compare_digest(password.encode(), self.password.encode())
        return bool(sep) and same_user and same_password

    def __repr__(self) -> str:
        return f"BasicAuth(user={self.user!r}, password='***')"


def basic_auth(user: str, password: str) -> BasicAuth:
    """An auth hook for HTTP Basic with one user name and password."""
    return BasicAuth(user, password)


def checked_hook(auth: AuthHook | None) -> AuthHook:
    """`auth`, or the error saying how to give one when there is none."""
    if auth is None:
        raise ConfigurationError(NO_AUTH)
    if not callable(auth):
        raise ConfigurationError(
            f"`auth` must be a callable taking the request, not {type(auth).__name__}; "
            + NO_AUTH.split(": ", 1)[1]
        )
    return auth


async def admitted(auth: AuthHook, request: Request) -> bool:
    """Whether `auth` lets `request` in (a hook that raises lets nobody in)."""
    answer = auth(request)
    if inspect.isawaitable(answer):
        answer = await answer
    return answer is True


def challenge_of(auth: AuthHook) -> str | None:
    """The `WWW-Authenticate` value a hook asks a refused browser with, if any."""
    value = getattr(auth, "challenge", None)
    return value if isinstance(value, str) else None


def csrf_token(request: Request) -> str:
    """The request's CSRF token: its cookie's, or a new one the response must set."""
    given = request.cookies.get(CSRF_COOKIE, "")
    return given if _well_formed(given) else secrets.token_urlsafe(32)


def csrf_matches(request: Request, submitted: str | None) -> bool:
    """Whether the token a form carried is the one in the request's cookie."""
    cookie = request.cookies.get(CSRF_COOKIE, "")
    if not _well_formed(cookie) or not submitted:
        return False
    return hmac.compare_digest(cookie.encode(), submitted.encode())


def _well_formed(token: str) -> bool:
    return 32 <= len(token) <= 64 and all(c.isalnum() or c in "-_" for c in token)


__all__ = [
    "CSRF_COOKIE",
    "CSRF_FIELD",
    "NO_AUTH",
    "AuthHook",
    "BasicAuth",
    "admitted",
    "allow_anyone",
    "basic_auth",
    "challenge_of",
    "checked_hook",
    "csrf_matches",
    "csrf_token",
]
