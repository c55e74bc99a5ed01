"""A Redis master, its replica and three sentinels as plain ``redis-server`` processes: the failover test's and
the chaos run's (``python -m calsync_emulators.chaos``).

Every process listens on a free loopback port and keeps its files in the test's directory; the sentinels
declare the master down after :data:`DOWN_AFTER_MS` and need two of three votes to fail it over.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from calsync_emulators.harness.waiting import free_port, wait_until

SERVICE = "mymaster"
DOWN_AFTER_MS = 1000


class Topology:
    """The processes of one master, one replica and three sentinels; :meth:`url` is calsync's URL for them."""

    def __init__(self, directory: Path, binary: str) -> None:
        self.directory = directory
        self.binary = binary
        self.ports = {"master": free_port(), "replica": free_port()}
        self.sentinel_ports = [free_port() for _ in range(3)]
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """The ``redis+sentinel://`` URL calsync is configured with."""
        members = ",".join(f"127.0.0.1:{port}" for port in self.sentinel_ports)
        return f"redis+sentinel://{members}/{SERVICE}/0"

    def start(self) -> None:
        """Start every process; wait until the replica is in sync and all three sentinels know both and each other."""
        self.start_server("master")
        self.start_server("replica", "--replicaof", "127.0.0.1", str(self.ports["master"]))
        for n, port in enumerate(self.sentinel_ports):
            conf = self.directory / f"sentinel-{n}.conf"
            conf.write_text(
                f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                f"sentinel monitor {SERVICE} 127.0.0.1 {self.ports['master']} 2\n"
                f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                f"sentinel failover-timeout {SERVICE} 10000\n"
            )
            self._spawn(f"sentinel-{n}", str(conf), "--sentinel")
        wait_until(self._agreed, timeout=30, what="the sentinels to see the master, its replica and each other")

    def start_server(self, name: str, *extra: str) -> None:
        """(Re)start the data server ``name`` on its port, with an append-only file in its own directory."""
        data = self.directory / name
        data.mkdir(exist_ok=True)
        port = str(self.ports[name])
        self._spawn(name, "--port", port, "--bind", "127.0.0.1", "--dir", str(data), "--appendonly", "yes",
                    "--save", "", *extra)  # fmt: skip
        wait_until(lambda: self.answers(int(port)), timeout=10, what=f"{name} to answer")

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL) -> None:
        """Send ``sig`` to ``name`` and wait for it to exit."""
        process = self.processes[name]
        process.send_signal(sig)
        process.wait(timeout=10)

    def master_port(self) -> int | None:
        """The master's port as the first sentinel that answers names it."""
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=1) as sentinel:
                    found = sentinel.sentinel_get_master_addr_by_name(SERVICE)
                    return int(found[1]) if found else None
            except redis.RedisError:
                continue
        return None

    def stop(self) -> None:
        """Kill every process that still runs."""
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)

    def _spawn(self, name: str, *args: str) -> None:
        log = open(self.directory / f"{name}.log", "ab")  # noqa: SIM115  # the process writes it until it exits
        self.processes[name] = subprocess.Popen([self.binary, *args], stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def answers(self, port: int) -> bool:
        """Whether the server on ``port`` answers a PING."""
        try:
            with redis.Redis(port=port, socket_timeout=1) as client:
                return bool(client.ping())
        except redis.RedisError:
            return False

    def _agreed(self) -> bool:
        for port in self.sentinel_ports:
            try:
                with redis.Redis(port=port, socket_timeout=1, decode_responses=True) as sentinel:
                    state = sentinel.sentinel_master(SERVICE)
            except redis.RedisError:
                return False
            if (state["num-other-sentinels"], state["num-slaves"], state["port"]) != (2, 1, self.ports["master"]):
                return False
        with redis.Redis(port=self.ports["replica"], socket_timeout=1, decode_responses=True) as replica:
            return bool(replica.info("replication").get("master_link_status") == "up")  # the initial sync is done

    def logs(self) -> str:
        """The tail of every process' log, for a failing test's report."""
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}" for p in self.directory.glob("*.log"))


def redis_server_binary() -> str | None:
    """The ``redis-server`` on the PATH (it also runs the sentinels, with ``--sentinel``), or None."""
    return shutil.which("redis-server")


@contextmanager
def sentinel_topology(directory: Path, binary: str) -> Iterator[Topology]:
    """A started :class:`Topology` in ``directory``, every process killed afterwards; the processes' logs are
    printed when it fails to start or the block raises."""
    topology = Topology(directory, binary)
    try:
        topology.start()
        yield topology
    except BaseException:
        print(topology.logs())
        raise
    finally:
        topology.stop()


def wait_for_promotion(topology: Topology, *, timeout: float = 30) -> float:
    """Wait until the sentinels name the replica as master; the monotonic time they first did."""
    wait_until(lambda: topology.master_port() == topology.ports["replica"], timeout=timeout, what="the promotion")
    return time.monotonic()
