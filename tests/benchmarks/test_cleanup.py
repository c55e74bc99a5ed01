"""A benchmark stopped by SIGTERM or SIGHUP (``timeout``, a closed terminal) leaves no worker or Redis behind."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.cli.process import redis_servers_of
from tests.support import wait_until

ROOT = Path(__file__).resolve().parents[2]

# A benchmark's shape: its own embedded Redis, a worker in a process group of its own, then a wait for a signal.
_BENCHMARK = """
import signal, sys
from pathlib import Path
from benchmarks.drain import running
from benchmarks.support import bench_redis
scratch = Path(sys.argv[1])
with bench_redis(None, scratch) as url:
    with running([sys.executable, "-c", "import signal; signal.pause()"], {}, scratch / "worker.log") as worker:
        print(worker.pid, flush=True)
        signal.pause()  # until the test's signal
"""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_benchmark_stops_its_worker_and_its_redis(tmp_path: Path, signum: signal.Signals) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "emulators")])}  # this checkout's harness
    with subprocess.Popen([sys.executable, "-c", _BENCHMARK, str(tmp_path)], env=env, cwd=ROOT, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as bench:  # fmt: skip
        assert bench.stdout is not None
        worker = psutil.Process(int(bench.stdout.readline()))
        [redis_pid] = redis_servers_of(tmp_path)
        try:
            bench.send_signal(signum)
            assert bench.wait(timeout=60) != 0
            wait_until(lambda: not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE, timeout=30)
            wait_until(lambda: not redis_servers_of(tmp_path), timeout=30)
        finally:  # a failing run must not leave them behind either
            for pid in (worker.pid, redis_pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
