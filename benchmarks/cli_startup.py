"""Wall and CPU time of one ``calsync`` command, from exec to exit: what a script or a CronJob pays per call.

    PYTHONPATH=. .venv/bin/python benchmarks/cli_startup.py [--runs 10] [--compare PATH] [--redis-url URL]

Each command runs as its own interpreter (``python -m calsync.actors.cli.main``, what the console
script runs), against a migrated SQLite file of its own and this run's Redis (an embedded server of
the benchmark's own unless ``--redis-url`` is given; the commands' keys under a ``bench-…``
namespace, deleted afterwards):
``--version`` (the interpreter and the CLI's imports), ``dlq list`` (settings, the schema check, one
database read), ``reconcile`` (what the reconcile CronJob runs every few minutes: the database and
Redis) and ``submit`` (what a script runs per change: a new version of one event for one memory
account, saved and enqueued). Almost all of it is imports: the command's own work is a few tens of milliseconds.
``--compare PATH`` runs the same commands from another checkout with this interpreter, alternating
with this tree run by run, and prints this tree's medians over the other's. CPU is the child's user +
system time. It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.support import add_redis_option, bench_redis, namespace, remove_keys

ROOT = Path(__file__).resolve().parent.parent
CHANGE = "change.json"  # in each tree's data dir, rewritten before every submit so each is a new version
COMMANDS = {
    "--version": ["--version"],
    "dlq list": ["dlq", "list"],
    "reconcile": ["reconcile"],
    "submit": ["submit", "--tenant", "bench", "--file", CHANGE],
}


def _environment(tree: Path, data_dir: Path, redis_url: str, keys: str) -> dict[str, str]:
    kept = {k: v for k, v in os.environ.items() if not k.upper().startswith("CALSYNC_")}
    return {
        **kept,
        "PYTHONPATH": str(tree),
        "CALSYNC_DATA_DIR": str(data_dir),
        "CALSYNC_DATABASE_URL": f"sqlite:///{data_dir / 'calsync.sqlite3'}",
        "CALSYNC_BROKER_URL": redis_url,
        "CALSYNC_REDIS_NAMESPACE": keys,
    }


def _write_change(data_dir: Path, serial: int) -> None:
    event = {"title": f"Benchmark {serial}", "start": "2026-12-03T15:00", "end": "2026-12-03T16:00"}
    document = {"operation": "upsert", "entity_id": "evt_bench", "accounts": ["acc_bench"], "event": event}
    (data_dir / CHANGE).write_text(json.dumps(document))


def run(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """One command's wall and CPU seconds (it must succeed)."""
    if args[0] == "submit":
        _write_change(Path(env["CALSYNC_DATA_DIR"]), time.monotonic_ns())
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    command = [sys.executable, "-m", "calsync.actors.cli.main", *args]
    done = subprocess.run(command, env=env, cwd=env["CALSYNC_DATA_DIR"], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"calsync {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    """Time each command in this tree (and ``--compare``'s), alternating, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compare", type=Path, help="another checkout, timed alternately with this one")
    add_redis_option(parser)
    opts = parser.parse_args()
    trees = {"this tree": ROOT, **({"compared": opts.compare.resolve()} if opts.compare else {})}
    keys = namespace("cli")
    with tempfile.TemporaryDirectory(prefix="calsync-cli-") as tmp, bench_redis(opts.redis_url, Path(tmp)) as url:
        envs = {}
        for name, tree in trees.items():
            (Path(tmp) / name).mkdir()
            envs[name] = _environment(tree, Path(tmp) / name, url, keys)
            run(["migrate"], envs[name])
            run(["accounts", "add", "--tenant", "bench", "--provider", "memory", "--address", "bench@example.com",
                 "--id", "acc_bench"], envs[name])  # fmt: skip
        print(f"calsync commands, each a fresh interpreter: {opts.runs} runs per tree, trees alternating")
        print(f"  CPython {platform.python_version()}, {os.cpu_count()} CPUs, load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, Redis {url}")  # fmt: skip
        timings: dict[tuple[str, str], list[tuple[float, float]]] = {}
        try:
            for _ in range(opts.runs):
                for command, args in COMMANDS.items():
                    for name in trees:
                        timings.setdefault((command, name), []).append(run(args, envs[name]))
        finally:
            remove_keys(url, keys)
    for command in COMMANDS:
        medians = {}
        for name in trees:
            walls, cpus = zip(*timings[(command, name)], strict=True)
            medians[name] = statistics.median(walls), statistics.median(cpus)
            print(f"  calsync {command:10s} {name:10s} wall {medians[name][0] * 1000:6.0f} ms  "
                  f"CPU {medians[name][1] * 1000:6.0f} ms  (median of {opts.runs})")  # fmt: skip
        if len(medians) == 2:
            (wall, cpu), (other_wall, other_cpu) = medians["this tree"], medians["compared"]
            ratios = f"wall {wall / other_wall:.2f}, CPU {cpu / other_cpu:.2f}"
            print(f"  calsync {command:10s} this tree / compared: {ratios}")


if __name__ == "__main__":
    main()
