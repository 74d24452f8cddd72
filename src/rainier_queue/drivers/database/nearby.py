# SPDX-License-Identifier: MIT
"""Wake idle workers in other processes on this machine when a job is pushed.

Why: SQLite and MySQL cannot tell a waiting client that a row arrived, so a
worker in another process heard of a push only at its next poll, half a
poll interval late on average. Processes on one machine can tell each other
directly, for the price of a datagram. So each process that waits for work
on a database binds one UNIX datagram socket in a folder named for that
database (the *rendezvous*), and a push, once committed, sends a one-byte
datagram to every socket there. A process that receives one wakes its idle
workers (`Wakeup`), which look for due work with the poll's own query.

A wake-up is a hint and never the only way work is found: the poll goes
on. A datagram dropped because a receiver's buffer is full (it has wake-ups
waiting already), a folder that cannot be made, a platform without UNIX
datagram sockets (Windows), a worker running as another user, or one on
another machine: each costs latency, up to the poll interval, never a job.
Nothing here raises into a push or a wait; the first failure that turns the
channel off is logged once, as a warning.

What it costs: per push, one listing of the folder and one `sendto` per
waiting process; per waiting process, one socket and one thread that sleeps
in `recv`; per wake-up, one indexed read in each woken process, whether or
not it then gets the job (every idle process is woken, since none can say
which one is idle).

Where: `<temp dir>/rainier-queue-<uid>/<hash of the database>/<pid>-<random>`.
The folder is the user's own (mode 0700, refused if someone else owns it or
may write to it), so no other user can hear or send these hints; a hash
keeps the path far below the 104 bytes a socket path may have. The last
process to leave a database's folder removes it. A process killed with
SIGKILL leaves its socket file behind; a send to it is refused
(`ECONNREFUSED`, since nothing is bound there), and the sender removes it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import secrets
import socket
import stat
import tempfile
import threading
import weakref
from collections.abc import Callable

log = logging.getLogger("rainier_queue.database")

MAX_SOCKET_PATH = 100
"""Bytes a socket's path may take: `sun_path` holds 104 (BSD, macOS) or 108 (Linux)
including the final NUL; a little is kept in hand."""

SUFFIX = ".sock"

_SIGNAL = b"!"
_STOP = b"."
"""Sent by a process to its own socket, to end its listening thread."""


def folder_for(identity: str, base: str | None = None) -> str:
    """The rendezvous folder of a database known by `identity` (a resolved file path, or
    host, port and database name), under `base` (the temp dir by default)."""
    root = base if base is not None else tempfile.gettempdir()
    digest = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return os.path.join(root, f"rainier-queue-{_uid()}", digest)


def _uid() -> int | str:
    getuid: Callable[[], int] | None = getattr(os, "getuid", None)
    return getuid() if getuid is not None else "user"


def _owned_privately(path: str) -> bool:
    """Whether `path` is a real folder of this user's that nobody else may write to."""
    info = os.lstat(path)
    getuid: Callable[[], int] | None = getattr(os, "getuid", None)
    mine = getuid is None or info.st_uid == getuid()
    return stat.S_ISDIR(info.st_mode) and mine and not info.st_mode & 0o022


class Unusable(Exception):
    """Why this process cannot take part in the rendezvous (said once, as a warning)."""


class Rendezvous:
    """The wake-up channel of one database between the processes of one machine.

    One per database per process, shared by its queues. A queue that waits
    `join`s once and calls `listen` before each wait (from then on, a
    datagram calls `on_signal`); it `release`s when it closes, and the last
    release closes the socket. A push calls `signal` once it has committed.
    """

    def __init__(
        self, identity: str, on_signal: Callable[[], None], *, base: str | None = None
    ) -> None:
        self.folder = folder_for(identity, base)
        self._on_signal = on_signal
        self._lock = threading.Lock()
        self._members = 0
        self._pid = os.getpid()
        """The process the socket below belongs to: after a fork, the parent's."""
        self._socket: socket.socket | None = None
        self._path: str | None = None
        self._thread: threading.Thread | None = None
        self._sender: socket.socket | None = None
        self._folder_checked = False
        self._off: str | None = None
        """Why the channel is off in this process; the poll alone finds work then."""

    @property
    def listening(self) -> bool:
        """Whether this process has a socket in the folder now."""
        return self._path is not None and self._pid == os.getpid()

    @property
    def off(self) -> str | None:
        """Why the channel is off in this process (warned once), or None while it works."""
        return self._off

    # -- the waiting side ------------------------------------------------------------

    def join(self) -> None:
        """One more queue waits on this database in this process (`release` when closed)."""
        with self._lock:
            self._members += 1

    def listen(self) -> None:
        """Make sure this process hears pushes from the others; cheap once it does, and
        never raises."""
        if self._off is not None or self.listening:
            return
        with self._lock:
            self._forget_parent()
            if self._socket is not None or self._off is not None:
                return
            try:
                self._bind()
            except Unusable as why:
                self._turn_off(str(why))
            except OSError as exc:
                self._turn_off(f"{type(exc).__name__}: {exc}")

    def release(self) -> None:
        """One `join` fewer; the last closes this process's socket and removes its file."""
        with self._lock:
            self._forget_parent()
            self._members = max(0, self._members - 1)
            if self._members or self._socket is None:
                return
            sock, path, thread = self._socket, self._path, self._thread
            self._socket = self._path = self._thread = None
        assert path is not None
        # A byte of its own ends the thread's `recv` (it sees it is no longer the
        # listener); then the file goes, so no sender finds it again.
        with contextlib.suppress(OSError), socket.socket(sock.family, socket.SOCK_DGRAM) as s:
            s.setblocking(False)
            s.sendto(_STOP, path)
        with contextlib.suppress(OSError):
            os.unlink(path)
        with contextlib.suppress(OSError):
            os.rmdir(self.folder)  # only if it is empty: one folder per database is not left
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1)
        sock.close()

    def _forget_parent(self) -> None:
        """In a forked child: the socket, its file and its thread are the parent's. Close
        the child's copy of the descriptor and leave the file alone."""
        if self._pid == os.getpid():
            return
        inherited, self._socket, self._path, self._thread = self._socket, None, None, None
        self._pid = os.getpid()
        if inherited is not None:
            with contextlib.suppress(OSError):
                inherited.close()

    def _bind(self) -> None:
        family = getattr(socket, "AF_UNIX", None)
        if family is None:
            raise Unusable("this platform has no UNIX sockets")
        path = os.path.join(self.folder, f"{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}")
        if len(os.fsencode(path)) > MAX_SOCKET_PATH:
            raise Unusable(f"the socket path {path!r} is longer than a socket path may be")
        sock = socket.socket(family, socket.SOCK_DGRAM)
        try:
            for last in (False, True):
                try:
                    self._make_folder()
                    sock.bind(path)
                    break
                except FileNotFoundError:
                    # The last process to leave removed the folder between our making
                    # it and binding in it: make it again, once.
                    if last:
                        raise
        except BaseException:
            sock.close()
            raise
        self._socket, self._path = sock, path
        self._thread = threading.Thread(
            target=self._hear, args=(sock,), name="rainier-queue wake-ups", daemon=True
        )
        self._thread.start()

    def _make_folder(self) -> None:
        parent = os.path.dirname(self.folder)
        for folder in (parent, self.folder):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)
            if not _owned_privately(folder):
                raise Unusable(f"{folder} belongs to another user or others may write to it")
        self._folder_checked = True

    def _hear(self, sock: socket.socket) -> None:
        """The listening thread: each datagram (or burst of them) wakes this process once."""
        while True:
            try:
                sock.recv(64)
            except OSError:
                return
            if self._socket is not sock:
                return  # released: the byte was `release`'s own
            # Take what else is queued, so a burst of pushes is one wake-up.
            with contextlib.suppress(OSError):
                while sock.recv(64, socket.MSG_DONTWAIT):
                    pass
            try:
                self._on_signal()
            except Exception:  # pragma: no cover - `Wakeup.notify` does not raise
                log.exception("waking this process's workers failed")

    # -- the pushing side ------------------------------------------------------------

    def signal(self) -> None:
        """Tell every other waiting process on this machine that work was pushed; never
        raises, and never waits for anyone."""
        if self._off is not None:
            return
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return  # nobody waits on this machine yet
        except OSError as exc:
            self._turn_off(f"cannot list {self.folder}: {exc}")
            return
        own = self._path if self._pid == os.getpid() else None
        for name in names:
            if not name.endswith(SUFFIX):
                continue
            path = os.path.join(self.folder, name)
            if path == own:
                continue  # this process was woken directly
            if not self._folder_checked and not self._check_folder():
                return
            self._send(path)

    def _check_folder(self) -> bool:
        try:
            if not _owned_privately(self.folder):
                raise Unusable(f"{self.folder} belongs to another user or others may write to it")
        except (OSError, Unusable) as exc:
            self._turn_off(str(exc))
            return False
        self._folder_checked = True
        return True

    def _send(self, path: str) -> None:
        sender = self._sender
        if sender is None:
            try:
                sender = self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                sender.setblocking(False)
                weakref.finalize(self, sender.close)
            except OSError as exc:
                self._turn_off(f"cannot open a socket to send wake-ups: {exc}")
                return
        try:
            sender.sendto(_SIGNAL, path)
        except OSError as exc:
            if exc.errno == errno.ECONNREFUSED:
                # Nothing is bound there: the process that made it is gone (SIGKILL, a
                # crash), so the file is stale. A live process's socket never refuses.
                with contextlib.suppress(OSError):
                    os.unlink(path)
            # Otherwise: gone since the listing (ENOENT), or its buffer is full of
            # wake-ups it has not read yet (EAGAIN, ENOBUFS); either way, nothing to do.

    def _turn_off(self, why: str) -> None:
        if self._off is None:
            self._off = why
            log.warning(
                "idle workers in other processes on this machine are not woken at once "
                "when a job is pushed (%s); they find it at their next poll",
                why,
            )


_SHARED: weakref.WeakValueDictionary[str, Rendezvous] = weakref.WeakValueDictionary()
_SHARED_LOCK = threading.Lock()


def shared_rendezvous(identity: str, on_signal: Callable[[], None]) -> Rendezvous:
    """This process's rendezvous for the database known by `identity`, made on first use.

    Every queue on one database in a process shares it, so the process has
    one socket and one thread per database however many queues it opens;
    `on_signal` must be the same for every caller (the database's `Wakeup`).
    """
    with _SHARED_LOCK:
        found = _SHARED.get(identity)
        if found is None:
            found = _SHARED[identity] = Rendezvous(identity, on_signal)
        return found


__all__ = ["MAX_SOCKET_PATH", "Rendezvous", "folder_for", "shared_rendezvous"]
