# SPDX-License-Identifier: MIT
"""A Django application that dispatches through the outbox in `transaction.atomic()`.

Run as `python -m tests.outbox.django_app KIND CONFIG TABLE` (KIND: postgres or
sqlite). Django refuses database work in a thread with a running event loop, as
a test's has, so it runs in a process of its own, as a Django app would: order 1
is committed, order 2 rolled back with the exception that leaves its `atomic`.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import django  # type: ignore[import-untyped]
from django.conf import settings  # type: ignore[import-untyped]

from rainier_queue.connections import QueueConfig

from .application import Placed


def main(kind: str, config_path: str, table: str) -> None:
    if kind == "postgres":
        database = {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "test",
            "USER": "postgres",
            "HOST": "127.0.0.1",
            "PORT": "5432",
        }
    else:
        database = {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(Path(config_path).parent / "queue.db"),
        }
    settings.configure(DATABASES={"default": database}, USE_TZ=True)
    django.setup()
    from django.db import connection, transaction  # type: ignore[import-untyped]

    config = QueueConfig.load(config_path)
    assert config is not None
    outbox = config.open_outbox("default")
    assert outbox is not None
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} (n) VALUES (%s)", [1])
        outbox.dispatch_in_sync(connection, Placed(order=1))
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f"INSERT INTO {table} (n) VALUES (%s)", [2])
            outbox.dispatch_in_sync(connection, Placed(order=2))
            raise LookupError("the application's write failed")
    except LookupError:
        pass
    connection.close()
    asyncio.run(outbox.aclose())
    print("done", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
