# SPDX-License-Identifier: MIT
"""The database client's own connection under a framework's wrapper (SQLAlchemy, Django).

Why: transactional enqueue and the outbox write with the client's
connection (psycopg, aiomysql, sqlite3), in the transaction the application
has open on it. An application on SQLAlchemy holds a `Session`,
`AsyncSession`, `Connection` or `AsyncConnection` instead, and one on
Django holds `django.db.connection`; each wraps exactly that client
connection, in that transaction (Django's inside `transaction.atomic()`).
This module unwraps them, recognising the frameworks' objects by their
module, so neither framework is imported (nor needed) here. Anything else
is passed through as is.
"""

from __future__ import annotations

from typing import Any


def _is_sqlalchemy(obj: object) -> bool:
    return type(obj).__module__.startswith("sqlalchemy.")


def _is_django(obj: object) -> bool:
    return type(obj).__module__.startswith("django.") and hasattr(obj, "ensure_connection")


async def client_connection(obj: Any) -> Any:
    """The client connection `obj` wraps (opening the session's transaction if it has
    none yet), or `obj` itself when it is no SQLAlchemy object."""
    if not _is_sqlalchemy(obj):
        return obj
    if hasattr(obj, "get_raw_connection"):  # AsyncConnection
        return (await obj.get_raw_connection()).driver_connection
    if hasattr(obj, "sync_session"):  # AsyncSession (or its scoped form)
        return await client_connection(await obj.connection())
    return client_connection_sync(obj)


def client_connection_sync(obj: Any) -> Any:
    """`client_connection` for SQLAlchemy's blocking `Session` and `Connection`, and for
    Django's connection (connected first, as Django does on its first query)."""
    if _is_django(obj):
        obj.ensure_connection()
        return obj.connection
    if not _is_sqlalchemy(obj):
        return obj
    if hasattr(obj, "get_bind") and callable(getattr(obj, "connection", None)):  # Session
        obj = obj.connection()
    return obj.connection.driver_connection  # Connection -> the pool's proxy -> the client's


__all__ = ["client_connection", "client_connection_sync"]
