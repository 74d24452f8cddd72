# SPDX-License-Identifier: MIT
"""How the contract suite opens each driver: a URL per namespace, options, and hooks.

Each driver adds itself in a module of its own beside this one,
`backend_<driver>.py`, defining `BACKEND = Backend(...)`; every contract
test then runs on it, each in a namespace of its own (a table, key or
topic prefix), so tests never see each other's jobs. The URL must carry the
namespace, so that `open_queue(url)` alone, in another process, reaches the
same one.

The operational promises (test_operational.py) and the process-level fault
tests (tests/faults) need more than a URL: a URL whose password must never
show (`secret_url`), an address nobody answers on (`unreachable_url`), a
way to lose the answer to a push (`cut`), a server of the test's own to
crash, restart and cut off (`private_server`), a load for the backlog test
(`backlog`), being opened by another process (`processes`, which every
driver but one living in a process's memory has), entries written into its
storage by another program (`plant`, for the foreign-entry acceptance), a
server of the test's own that speaks TLS (`tls`) and a lock store at the
queue's own URL (`lock_store`, an ability like `processes`: the servers with
a cache store of their own, cache/stores.py). Those are `HOOKS`. A test
names the hooks it uses in `@pytest.mark.needs(...)`. A driver that cannot
give one says why in `lacks`, keyed by the hook's name, and the tests that
need it are skipped on that driver with that reason, at collection
(`python -m tests.contract.counts` lists them). A hook neither given nor
explained fails the tests that need it, and test_hooks.py: a new driver
learns what to write from failures, not from a silent skip. A promise a
driver does not keep yet is a strict xfail with its reason
(`known_failures`), so it shows, and the day it is kept, it says so.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

from rainier_queue.connections import open_queue
from rainier_queue.drivers import DriverContext
from rainier_queue.queue import Queue

from ..app_transactions import AppTransaction
from ..tls_certs import Certs
from .raw_storage import Raw

SECRET = "s3cret-Pa55word"
"""The password every `secret_url` carries; no description, error or log may show it."""


@dataclass(frozen=True)
class Cut:
    """How a test loses the answer to a push: a relay (tests/cutting_relay.py) in front of
    the server, cut at the bytes that commit the push."""

    port: int
    """The server's port on 127.0.0.1, which the relay forwards to."""
    url: Callable[[Path, str, int], str]
    """The namespace's URL through the relay on the given port: one pooled connection, so
    the connection set up before the relay is armed is the one the push uses."""
    pushes: Sequence[tuple[int, bytes]]
    """Each way a push commits, as (jobs in one `push_many`, the bytes that commit it)."""


@dataclass(frozen=True)
class Listen:
    """Where else a private server listens: `host`, for clients on `network` (a CIDR), as in
    a network namespace joined to the test's by a cable it can cut (tests/partition.py)."""

    host: str
    network: str


class PrivateServer(Protocol):
    """A server of the test's own, on its own port and data, that the test may crash."""

    outage: str
    """What a worker prints when it cannot reach this server (its `BrokerUnavailable`)."""

    def url(self, tmp: Path, namespace: str) -> str:
        """The URL of a namespace on this server."""

    def crash(self) -> None:
        """Stop it as a crash does: no shutdown, nothing flushed beyond each commit."""

    def stop(self) -> None:
        """Stop it cleanly, as an upgrade or a restart does."""

    def start(self) -> None:
        """Start it (again) on the same port and data, and wait until it answers."""

    def remove(self) -> None:
        """Stop it if it runs and delete its data."""


Planted = tuple[str, Any]
"""One entry another program leaves in storage: (its name, the entry as that program wrote
it: a row's columns, a stream entry's body, a record's value)."""


@dataclass(frozen=True)
class Plant:
    """How another program writes into this driver's storage, and what it may write.

    The foreign-entry acceptance (test_foreign_entries.py) mixes `good` and
    `bad` entries, writes them with `write` and lets CLI workers drain them.
    """

    write: Callable[[Path, str, str, Sequence[Planted]], Coroutine[Any, Any, None]]
    """Write these entries, in order, into a queue of the namespace (tmp, namespace, queue,
    entries) as another program would: SQL rows, stream entries, records with the name as
    key. The namespace's tables or topics exist already."""
    good: Callable[[str, int], list[Planted]]
    """That many well-formed entries of `note` jobs (ledger, count), each appending its name
    to the ledger file when run; the first ones in the lenient shapes a reader must still
    take as jobs (JSON null headers, numbers as header values, SQLite's text times)."""
    bad: Mapping[str, tuple[Any, str]]
    """Malformed entries by name, each with the text its failed record's error must hold
    (the field, mostly)."""
    listed: Callable[[Mapping[str, Any]], str | None]
    """The name of the planted entry a failed record (as `failed --json` lists it) holds."""


class TLSServer(Protocol):
    """A server of the test's own that speaks TLS with a certificate for `localhost` alone,
    signed by the test's authority (tests/tls_certs.py)."""

    port: int

    def url(self, host: str, namespace: str, query: str) -> str:
        """The namespace's URL on this server dialled as `host`, with `query` added."""

    def stop(self) -> None:
        """Stop it and remove what it wrote."""


@dataclass(frozen=True)
class TLS:
    """How a driver speaks TLS, for the TLS promises (test_tls.py)."""

    server: Callable[[Certs, Path], TLSServer]
    """Start a server speaking TLS with these certificates, its data in the given folder."""
    trusting: Callable[[Path], str]
    """The query that checks the server's certificate against this authority's file."""
    checked: str
    """The query that asks for TLS, checked against the system's authorities alone."""
    insecure: str
    """The query that asks for TLS with `insecure_skip_verify=true` (nothing else checked)."""
    weakenings: Sequence[str] = ()
    """Queries that turn a check off, each refused unless `insecure_skip_verify=true` is
    given too. Empty where the driver has no such option."""
    plain_url: Callable[[str], str] | None = None
    """The URL (given the namespace) of a server that speaks no TLS, with TLS asked for."""


@dataclass(frozen=True)
class Backend:
    """One driver as the suite sees it."""

    name: str
    url: Callable[[Path, str], str]
    """The URL for a namespace, given a per-test temp dir and a unique name."""
    options: dict[str, Any] = field(default_factory=dict)
    check: Callable[[], None] | None = None
    """Skip or fail (see `tests.conftest.unreachable`) when the service is missing."""
    cleanup: Callable[[Path, str], Coroutine[Any, Any, None]] | None = None
    """Remove what a test's namespace left on the server (tables, keys)."""

    # -- hooks for the operational promises and the fault tests ------------------------
    secret_url: Callable[[Path, str], str] | None = None
    """The namespace's URL with the password `SECRET` in it."""
    unreachable_url: Callable[[Path, str], str] | None = None
    """A URL of this driver to a server that is not there (a closed loopback port)."""
    cut: Cut | None = None
    """How to lose the answer to a push."""
    private_server: Callable[[Path, Listen | None], PrivateServer] | None = None
    """Start a server of the test's own (in the given folder), to crash and restart; given a
    `Listen`, it also listens there, and its `url` names that address."""
    backlog: tuple[int, int] | None = (20_000, 4)
    """(jobs, worker processes) for the backlog fault test."""
    prepare: Callable[[Path, str, Sequence[str]], None] | None = None
    """Make what the named queues of a namespace need before the first push (Kafka's
    topics); None when a queue comes into being by being used."""
    plant: Plant | None = None
    """How another program writes into the namespace's storage (the foreign-entry tests)."""
    tls: TLS | None = None
    """How to start a server of the test's own that speaks TLS, and ask for its checks."""
    raw: Raw | None = None
    """Every stored entry of a queue as bytes, read with the server's own client, not the
    driver (raw_storage.py): what the encryption tests search for plaintext."""
    wake_only: Mapping[str, Any] = field(default_factory=dict)
    """Options under which an idle wait ends within the wake-up tests' bound only by being
    woken, for a driver that also polls: its poll pushed out to a minute. Empty where
    nothing but a wake-up ends a wait anyway."""
    transaction: Callable[[Path], Coroutine[Any, Any, AppTransaction]] | None = None
    """Open the application's own connection to the store (given the per-test temp dir),
    with a transaction open on it, for a driver that declares `transactional_enqueue`
    (test_transactional_enqueue.py). None for the rest."""
    dispatches: int = 500
    """Dispatches per request thread in the blocking facade's test (test_blocking.py): fewer
    for a server that answers slowly (moto handles tens of requests a second on a loaded
    machine), where eight threads of 500 single pushes outlast the test's timeout."""
    model_examples: int = 25
    """Examples the model test (test_model.py) runs, each on a namespace of its own: fewer
    for a server that answers slowly and whose namespaces cost many calls to make (SQS)."""
    lacks: Mapping[str, str] = field(default_factory=dict)
    """Hook (or ability, such as `processes`: being opened by another process) -> why this
    driver cannot give it. The tests that need it are skipped here with that reason."""
    known_failures: Mapping[str, str] = field(default_factory=dict)
    """Test function name -> why it fails on this driver today: run as a strict xfail."""
    crash_forgets: tuple[float, str] | None = None
    """For a server that, SIGKILLed, forgets acknowledgements it had already answered:
    (seconds, why). The crash test (tests/faults/test_restarts.py) then lets a job
    finished within that many seconds before the crash run again, and no other.
    None: a crash forgets no answered acknowledgement."""

    def open(
        self, tmp: Path, namespace: str, *, lease: timedelta | None = None, **extra: Any
    ) -> Queue:
        options = {**self.options, **extra}
        if lease is not None:
            options["lease"] = f"{lease.total_seconds()}s"
        return open_queue(self.url(tmp, namespace), options, DriverContext())

    def setup(self, tmp: Path, namespace: str, queues: Sequence[str]) -> None:
        """Run `prepare`, if this driver has one, for these queues of the namespace."""
        if self.prepare is not None:
            self.prepare(tmp, namespace, queues)

    def missing(self, hook: str) -> str | None:
        """Why this driver cannot give `hook`, or None when it can.

        A hook neither given nor explained in `lacks` is reported as such, so
        the test fails on it rather than passing unseen.
        """
        if hook in self.lacks:
            return self.lacks[hook]
        if getattr(self, hook, True) is None:
            return UNEXPLAINED
        return None


UNEXPLAINED = "<unexplained>"

HOOKS = (
    "secret_url",
    "unreachable_url",
    "cut",
    "private_server",
    "backlog",
    "processes",
    "plant",
    "tls",
    "lock_store",
    "raw",
    "batches",
    "ordered_retries",
    "ordering_across_queues",
    "shared_backlog",
    "dedup_outlives_delete",
)
"""Every hook a contract or fault test may need."""

ABILITIES = (
    "processes",
    "lock_store",
    "batches",
    "ordered_retries",
    "ordering_across_queues",
    "shared_backlog",
    "dedup_outlives_delete",
)
"""The hooks that are no field of `Backend`: had unless `lacks` says otherwise.

`dedup_outlives_delete`: where the broker drops a message sent again under an id it has
had (`batchstate.DropsRepeatedCallbacks`), it drops it though the first copy was received
and deleted meanwhile; had, trivially, where it drops nothing."""


def batch_locks(tmp: Path) -> str:
    """`&locks=...` for a broker that counts batches in a lock store its URL names (SQS,
    RabbitMQ): an SQLite file in the test's own directory, which every process of the test
    shares, as Kafka's URL names its lock store."""
    return "&locks=" + quote(f"sqlite:///{tmp / 'batch-locks.db'}", safe="")


def closed_port() -> int:
    """A loopback port nothing listens on (just released by the OS), for unreachable URLs."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


"""`Backend.missing` for a hook neither given nor listed in `lacks` with a reason."""


def _discover() -> dict[str, Backend]:
    found: dict[str, Backend] = {}
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name):
        if info.name.startswith("backend_"):
            module = importlib.import_module(f"{__package__}.{info.name}")
            backend: Backend = module.BACKEND
            found[backend.name] = backend
    return found


BACKENDS: dict[str, Backend] = _discover()


def choose(request: Any) -> Backend:
    """The `backend` fixture's value: the driver named by the test's parameter.

    Skips or fails when its service is missing, and fails a test that needs a
    hook this driver neither gives nor explains in `lacks`.
    """
    import pytest

    chosen = BACKENDS[str(request.param)]
    for mark in request.node.iter_markers("needs"):
        for hook in mark.args:
            if chosen.missing(hook) == UNEXPLAINED:
                pytest.fail(
                    f"backend {chosen.name!r} neither gives the `{hook}` hook nor says why"
                    f" not in `lacks` (tests/contract/backend_{chosen.name}.py)"
                )
    if chosen.check is not None:
        chosen.check()
    return chosen


def mark_collected(items: Sequence[Any]) -> None:
    """Skip each collected test a driver lacks a hook for, and mark its known failures.

    Done at collection, so the skips and their reasons show in
    `pytest --collect-only` (tests/contract/counts.py) as well as in `-ra`.
    """
    import pytest

    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("backend") not in BACKENDS:
            continue
        backend = BACKENDS[str(callspec.params["backend"])]
        for mark in item.iter_markers("needs"):
            for hook in mark.args:
                why = backend.missing(hook)
                if why is not None and why != UNEXPLAINED:
                    item.add_marker(pytest.mark.skip(reason=f"{backend.name} lacks {hook}: {why}"))
        known = backend.known_failures.get(item.originalname)
        if known is not None:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"{backend.name}: {known}"))
