# SPDX-License-Identifier: MIT
"""The database client's own connection under a framework's wrapper (SQLAlchemy).

Why: transactional enqueue and the outbox write with the client's
connection (psycopg, aiomysql, sqlite3), in the transaction the application
has open on it. An application on SQLAlchemy holds a `Session`,
`AsyncSession`, `Connection` or `AsyncConnection` instead; each wraps
exactly that client connection, in that transaction. This module unwraps
them, recognising SQLAlchemy's objects by their module, so SQLAlchemy is
never imported (nor needed) here. Anything else is passed through as is.

A Django connection needs no unwrapping: `django.db.connection.connection`
is already the client's (docs/outbox.md).
"""

from __future__ import annotations

from typing import Any


def _is_sqlalchemy(obj: object) -> bool:
    return type(obj).__module__.startswith("sqlalchemy.")


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
    """`client_connection` for SQLAlchemy's blocking `Session` and `Connection`."""
    if not _is_sqlalchemy(obj):
        return obj
    if hasattr(obj, "get_bind") and callable(getattr(obj, "connection", None)):  # Session
        obj = obj.connection()
    return obj.connection.driver_connection  # Connection -> the pool's proxy -> the client's


__all__ = ["client_connection", "client_connection_sync"]
