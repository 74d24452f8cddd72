# SPDX-License-Identifier: MIT
"""A network that can go silent: a namespace joined to this one by a virtual cable.

A server that vanishes without closing its connections (a machine that
lost power, a failover to another address, a firewall that drops packets)
sends no reset: the client's packets just go nowhere. Stopping a server or
cutting a TCP relay cannot show how a driver copes with that, because both
answer at once. So the client runs in a network namespace of its own, joined
to this one by a veth pair; servers listen on this side's address; `cut()`
takes this side's end of the cable down, after which the client's packets
vanish without an answer, and `heal()` brings it back.

Needs root and iproute2 (`ip netns`); without them the tests that use it
skip, and fail where services are required.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from .conftest import unreachable

SERVICE = "a network namespace (root and `ip netns`)"


class Partition:
    """The namespace, the cable, and the two addresses: `host` (ours) and the client's."""

    def __init__(self) -> None:
        self.ip = shutil.which("ip")
        if self.ip is None:
            unreachable(SERVICE, "`ip` (iproute2) is not installed")
        token = secrets.token_hex(3)
        self.namespace = f"rq{token}"
        self.outside = f"rqo{token}"
        self.inside = f"rqi{token}"
        used = subprocess.run([self.ip, "-o", "addr"], capture_output=True, text=True).stdout
        free = [n for n in range(1, 251) if f"10.231.{n}." not in used]
        if not free:
            unreachable(SERVICE, "every 10.231.x.0/24 test network is taken")
        subnet = free[secrets.randbelow(len(free))]
        self.host = f"10.231.{subnet}.1"
        """This side's address: what servers listen on and clients in the namespace dial."""
        self.client = f"10.231.{subnet}.2"
        self.network = f"10.231.{subnet}.0/24"
        """Both addresses: what a server lets in."""
        steps = [
            ["netns", "add", self.namespace],
            ["link", "add", self.outside, "type", "veth", "peer", "name", self.inside],
            ["link", "set", self.inside, "netns", self.namespace],
            ["addr", "add", f"{self.host}/24", "dev", self.outside],
            ["link", "set", self.outside, "up"],
            ["-n", self.namespace, "addr", "add", f"{self.client}/24", "dev", self.inside],
            ["-n", self.namespace, "link", "set", self.inside, "up"],
            ["-n", self.namespace, "link", "set", "lo", "up"],
        ]
        for step in steps:
            done = subprocess.run([self.ip, *step], capture_output=True, text=True)
            if done.returncode != 0:
                self.remove()
                unreachable(SERVICE, f"`ip {' '.join(step)}` failed: {done.stderr.strip()}")

    @property
    def prefix(self) -> list[str]:
        """What to put before a command to run it inside the namespace."""
        assert self.ip is not None
        return [self.ip, "netns", "exec", self.namespace]

    def popen(self, *argv: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        """Start `argv` inside the namespace, with pipes for its stdin and stdout."""
        return subprocess.Popen(
            [*self.prefix, *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=cwd,
        )

    def python(self, code: str, *args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
        """Run `code` with this interpreter inside the namespace."""
        return self.popen(sys.executable, "-c", code, *args, cwd=cwd)

    def cut(self) -> None:
        """From now on the client's packets go nowhere, and nothing tells it so."""
        self._link("down")

    def heal(self) -> None:
        self._link("up")

    def _link(self, state: str) -> None:
        assert self.ip is not None
        subprocess.run([self.ip, "link", "set", self.outside, state], check=True)

    def remove(self) -> None:
        """Delete the cable and the namespace (what runs inside should have ended)."""
        if self.ip is None:
            return
        subprocess.run([self.ip, "link", "del", self.outside], capture_output=True)
        subprocess.run([self.ip, "netns", "del", self.namespace], capture_output=True)
