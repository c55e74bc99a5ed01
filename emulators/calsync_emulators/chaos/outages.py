"""The outages of a chaos run beyond the provider's faults: a Redis failover and a database restart.

Redis: the run's own master, replica and three sentinels (calsync_emulators.harness.sentinel) with calsync on
their ``redis+sentinel://`` URL; the master is SIGKILLed and the sentinels promote the replica. A Redis the run
was given (``--broker-url``) is not the run's to kill: the failover is skipped.

Database: what clients see of a PostgreSQL restart is every connection closed under them; the run terminates
every connection of its own (``pg_terminate_backend`` of the backends named by its ``application_name``), which
needs no more privilege than the connections' own role, and touches no other client of the server. A
``--database-restart-command`` is run instead when given (a staging database's real restart). SQLite has no
server: the restart is skipped.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from dataclasses import dataclass

import psycopg

from calsync_emulators.harness.scratch import libpq_url
from calsync_emulators.harness.sentinel import Topology, wait_for_promotion

#: What a restart command may take before the run counts it failed.
RESTART_COMMAND_TIMEOUT_S = 300


@dataclass(frozen=True)
class DatabaseRestart:
    """How this run restarts its database: a command, or terminating its own connections at ``url``."""

    url: str
    application_name: str
    command: str | None = None

    def __call__(self) -> str:
        """Restart; what was done."""
        if self.command is not None:
            done = subprocess.run(shlex.split(self.command), capture_output=True, text=True, check=False,
                                  timeout=RESTART_COMMAND_TIMEOUT_S)  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(f"the database restart command exited {done.returncode}: {done.stderr[-500:]}")
            return f"database restarted by {self.command!r}"
        with psycopg.connect(libpq_url(self.url), autocommit=True) as conn:
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = %s AND pid <> pg_backend_pid()",
                (self.application_name,),
            ).fetchall()
        return f"database restart: {sum(1 for (ok,) in rows if ok)} calsync connections terminated"


def fail_over(topology: Topology) -> str:
    """SIGKILL the master and wait for the sentinels to promote the replica; what was done."""
    killed = time.monotonic()
    topology.kill("master")
    promoted = wait_for_promotion(topology)
    return f"Redis master SIGKILLed; the sentinels promoted the replica {promoted - killed:.1f} s later"
