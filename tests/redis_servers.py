# SPDX-License-Identifier: MIT
"""Private Redis servers for tests that must not touch the shared one.

Destructive tests (flushing, restarting) and cluster tests start their own
`redis-server` processes on free loopback ports, in a temporary directory,
with persistence off, and stop them (by process id) when done. A cluster
is three masters joined with `redis-cli --cluster create`.
"""

from __future__ import annotations

import atexit
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .conftest import unreachable


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(*, with_bus: bool = False) -> int:
    """A loopback port nobody listens on (and, for a cluster node, its bus port + 10000)."""
    for _ in range(200):
        port = random.randint(21000, 29000)
        if _free(port) and (not with_bus or _free(port + 10000)):
            return port
    raise RuntimeError("no free loopback port found")


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        unreachable(name, f"`{name}` is not on PATH")
    return found


def _wait_until_up(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"redis-server on {port} exited: {log.read_text(errors='replace')}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"redis-server on {port} did not come up")


@dataclass
class RedisServers:
    """Some redis-server processes this test run started, and their directory."""

    folder: Path
    ports: list[int] = field(default_factory=list)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, *extra: str, cluster: bool = False, port: int | None = None) -> int:
        port = port or free_port(with_bus=cluster)
        node_dir = self.folder / str(port)
        node_dir.mkdir(exist_ok=True)
        args = [_binary("redis-server"), "--port", str(port), "--bind", "127.0.0.1"]
        args += ["--dir", str(node_dir), "--save", "", "--appendonly", "no"]
        args += ["--logfile", str(node_dir / "redis.log"), *extra]
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_until_up(port, proc, node_dir / "redis.log")
        self.ports.append(port)
        self.procs.append(proc)
        return port

    def stop_one(self, port: int) -> None:
        """Terminate the server on `port` and forget it; its directory (and any AOF) stays."""
        index = self.ports.index(port)
        proc = self.procs.pop(index)
        self.ports.pop(index)
        proc.terminate()
        proc.wait(10)

    def kill(self, port: int) -> None:
        """SIGKILL the server on `port`, a crash that flushes nothing, and forget it."""
        index = self.ports.index(port)
        proc = self.procs.pop(index)
        self.ports.pop(index)
        proc.kill()
        proc.wait(10)

    def restart(self, port: int, *extra: str) -> None:
        """Stop the server on `port` and start it again there, with `extra` arguments."""
        self.stop_one(port)
        self.start(*extra, port=port)

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        shutil.rmtree(self.folder, ignore_errors=True)


def standalone() -> tuple[RedisServers, int]:
    """One private redis-server; the caller stops it."""
    servers = RedisServers(Path(tempfile.mkdtemp(prefix="rq-redis-")))
    try:
        return servers, servers.start()
    except BaseException:
        servers.stop()
        raise


def on_socket(*extra: str) -> tuple[RedisServers, Path]:
    """One private redis-server listening on a Unix socket only (`--port 0`); its socket's path.

    The caller stops it. Its `RedisServers` holds this one process and no
    port, so `stop()` is the only way to end it.
    """
    servers = RedisServers(Path(tempfile.mkdtemp(prefix="rq-socket-")))
    path = servers.folder / "redis.sock"
    args = [_binary("redis-server"), "--port", "0", "--unixsocket", str(path)]
    args += ["--unixsocketperm", "700", "--dir", str(servers.folder), "--save", ""]
    args += ["--appendonly", "no", "--logfile", str(servers.folder / "redis.log"), *extra]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers.procs.append(proc)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log = (servers.folder / "redis.log").read_text(errors="replace")
            servers.stop()
            raise RuntimeError(f"redis-server on {path} exited: {log}")
        with socket.socket(socket.AF_UNIX) as sock:
            try:
                sock.connect(str(path))
            except OSError:
                time.sleep(0.02)
                continue
        return servers, path
    servers.stop()
    raise RuntimeError(f"redis-server on {path} did not come up")


def with_tls(cert: Path, key: Path, ca: Path) -> tuple[RedisServers, int]:
    """One private redis-server that speaks only TLS, on a free port; the caller stops it.

    Clients need not show a certificate of their own (`--tls-auth-clients no`);
    the server shows `cert`, which a client can check against `ca`.
    """
    servers = RedisServers(Path(tempfile.mkdtemp(prefix="rq-tls-")))
    port = free_port()
    args = [_binary("redis-server"), "--port", "0", "--tls-port", str(port)]
    args += ["--bind", "127.0.0.1", "--dir", str(servers.folder), "--save", ""]
    args += ["--appendonly", "no", "--logfile", str(servers.folder / "redis.log")]
    args += ["--tls-cert-file", str(cert), "--tls-key-file", str(key)]
    args += ["--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers.procs.append(proc)
    servers.ports.append(port)
    try:
        _wait_until_up(port, proc, servers.folder / "redis.log")
    except BaseException:
        servers.stop()
        raise
    return servers, port


PRIMARY = ("--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0")
"""A primary that streams its snapshot to a new replica at once, and never writes one to disk
(an RDB file left in its folder would bring data back on a restart that should be empty)."""


def replicated() -> tuple[RedisServers, int, int]:
    """A primary and one replica following it, neither persisting; returns once they are linked.

    The caller stops them. `wait_for_replica` again after restarting either.
    """
    servers = RedisServers(Path(tempfile.mkdtemp(prefix="rq-replicated-")))
    try:
        primary = servers.start(*PRIMARY)
        replica = servers.start("--replicaof", "127.0.0.1", str(primary))
        wait_for_replica(primary, replica)
    except BaseException:
        servers.stop()
        raise
    return servers, primary, replica


def wait_for_replica(primary: int, replica: int, timeout: float = 30) -> None:
    """Wait until `replica` has synced with `primary` and the primary counts it as online."""
    cli = _binary("redis-cli")
    deadline = time.monotonic() + timeout

    def info(port: int) -> str:
        return subprocess.run(
            [cli, "-p", str(port), "info", "replication"], capture_output=True, text=True
        ).stdout

    while time.monotonic() < deadline:
        if "master_link_status:up" in info(replica) and f"port={replica},state=online" in info(
            primary
        ):
            break
        time.sleep(0.05)
    else:
        raise RuntimeError(f"the replica on {replica} never synced with the primary on {primary}")
    # Online is not yet answering: the first WAIT after a sync has been seen to take a
    # second. One write confirmed by WAIT on its own connection proves the link works.
    from redis import Redis

    client = Redis(port=primary)
    try:
        pipe = client.pipeline(transaction=False)
        pipe.set("rq-test:replication-probe", "1")
        pipe.wait(1, int(timeout * 1000))
        pipe.delete("rq-test:replication-probe")
        if pipe.execute()[1] < 1:
            raise RuntimeError(f"the replica on {replica} did not confirm a write")
    finally:
        client.close()


def cluster(nodes: int = 3, *, replicas: int = 0) -> RedisServers:
    """A cluster of `nodes` masters covering every slot, each with `replicas` replicas
    that have synced, ready to serve.

    Formed again on new ports, up to three times, when `redis-cli --cluster create`
    fails: with test processes side by side, a port found free can be taken by another
    before its node binds it, and a loaded machine can outlast the tool's own waits.
    """
    for attempt in range(3):
        try:
            return _cluster(nodes, replicas)
        except subprocess.CalledProcessError as exc:
            if attempt == 2:
                said = (exc.stdout or b"").decode(errors="replace")[-2000:]
                raise RuntimeError(f"redis-cli --cluster create failed 3 times: {said}") from exc
    raise AssertionError("unreachable")


def _cluster(nodes: int, replicas: int) -> RedisServers:
    servers = RedisServers(Path(tempfile.mkdtemp(prefix="rq-cluster-")))
    try:
        for _ in range(nodes * (1 + replicas)):
            servers.start(cluster=True)
        seeds = [f"127.0.0.1:{port}" for port in servers.ports]
        subprocess.run(
            [
                _binary("redis-cli"),
                "--cluster",
                "create",
                *seeds,
                "--cluster-replicas",
                str(replicas),
                "--cluster-yes",
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        _wait_for_cluster_ok(servers.ports)
        if replicas:
            _wait_for_replicas(servers.ports, nodes * replicas)
    except BaseException:
        servers.stop()
        raise
    return servers


def _wait_for_cluster_ok(ports: list[int]) -> None:
    deadline = time.monotonic() + 30
    cli = _binary("redis-cli")
    while time.monotonic() < deadline:
        states = [
            subprocess.run(
                [cli, "-p", str(port), "cluster", "info"], capture_output=True, text=True
            ).stdout
            for port in ports
        ]
        if all("cluster_state:ok" in state for state in states):
            return
        time.sleep(0.1)
    raise RuntimeError("the test cluster never reached cluster_state:ok")


def _wait_for_replicas(ports: list[int], expected: int) -> None:
    """Wait until `expected` replicas in all have synced with their primaries."""
    deadline = time.monotonic() + 30
    cli = _binary("redis-cli")
    while time.monotonic() < deadline:
        linked = sum(
            "master_link_status:up"
            in subprocess.run(
                [cli, "-p", str(port), "info", "replication"], capture_output=True, text=True
            ).stdout
            for port in ports
        )
        if linked >= expected:
            return
        time.sleep(0.1)
    raise RuntimeError(f"the test cluster's {expected} replicas never all synced")


_SHARED_CLUSTER: RedisServers | None = None


def shared_cluster() -> RedisServers:
    """One cluster for this whole test process, started on first use, stopped at exit."""
    global _SHARED_CLUSTER
    if _SHARED_CLUSTER is None:
        _SHARED_CLUSTER = cluster()
        atexit.register(_SHARED_CLUSTER.stop)
    return _SHARED_CLUSTER


async def delete_keys(pattern: str, url: str = "redis://127.0.0.1:6379/0") -> None:
    """Delete the keys matching `pattern` on the server at `url` (a test's namespace)."""
    from redis.asyncio import Redis

    client = Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=pattern, count=1000)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
