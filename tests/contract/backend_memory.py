# SPDX-License-Identifier: MIT
from __future__ import annotations

from .backends import Backend

NO_SERVER = "memory:// is a queue in this process's memory: there is no server"

BACKEND = Backend(
    "memory",
    lambda tmp, ns: "memory://",
    lacks={
        "raw": "the memory driver keeps Python objects in the process: nothing is stored as bytes",
        "secret_url": "memory:// carries no credentials",
        "unreachable_url": f"{NO_SERVER} to be unreachable",
        "cut": f"{NO_SERVER} and no connection whose answer could be lost",
        "private_server": f"{NO_SERVER} to restart",
        "processes": "memory:// lives in one process: another process opening it gets its own",
        "backlog": "worker processes cannot share memory://",
        "plant": "memory:// is this process's own: no other program can write into it",
        "tls": f"{NO_SERVER} to speak TLS to",
    },
)
