"""CPU instructions per job of the calsync pipeline, counted by valgrind: a figure the machine's load cannot move.

    PYTHONPATH=. .venv/bin/python benchmarks/instructions.py [--jobs 500] [--warmup-jobs 100] [--compare PATH]
        [--sides calsync,hand,bare]

Wall-clock rates on a shared VM spread by ± 20-30 % between rounds, more than most single changes
gain. This counts instructions instead: it runs ``benchmarks/pipeline.py``'s calsync side (every
middleware, a SQLite file, the lock, the memory provider, Prometheus' multiprocess values; one worker
thread) under ``valgrind --tool=callgrind`` twice, with ``--warmup-jobs`` and with ``--jobs`` jobs,
and prints the difference per job, so start-up and imports cancel out. Work that scales with time
rather than with jobs is kept small: idle consumers poll every 5 s and the finish check every 0.5 s.
What it cannot see: system calls' cost in the kernel, and contention between threads (one thread).
``--compare PATH`` counts another checkout the same way, at the same time (before/after in one run).
``--sides`` also counts pipeline.py's other sides in this checkout: ``hand`` (the seed's job
written by hand, benchmarks/hand_written.py: the floor) and ``bare`` (Dramatiq's no-op), and prints
calsync's count over each: how far calsync's own code sits above the floor, in a figure the host
cannot move.
The counts barely move with the machine's load, but that work which scales with time grows when a
loaded machine stretches a run: run it on a quiet one, and compare trees counted in the same run.
Under valgrind a job takes about 40 times longer: 500 jobs take two to four minutes. Needs ``valgrind``
on the PATH. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs in the measured tree: pipeline.py's calsync side, with the polls that scale with time slowed down.
_CHILD = """
import os, sys, tempfile, time
from pathlib import Path
scratch = Path(tempfile.mkdtemp(prefix="calsync-instructions-"))
os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.environ["dramatiq_prom_db"] = str(scratch / "metrics")
(scratch / "metrics").mkdir()
import dramatiq
import benchmarks.pipeline as pl
from benchmarks.support import bench_redis

def timed(name, broker, client, jobs, threads, finished):
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=5000)
    worker.start()
    while finished() < jobs:
        time.sleep(0.5)
    worker.stop()
    return None

pl._timed = timed
side, jobs = sys.argv[1], int(sys.argv[2])
with bench_redis(None, scratch) as url:
    if side == "calsync":
        pl.calsync(url, jobs, 1, scratch, None)
    elif side == "hand":
        pl.hand_written(url, jobs, 1, scratch)
    else:
        pl.bare(url, jobs, 1)
"""

SIDES = ("calsync", "hand", "bare")


def count(tree: Path, jobs: int, side: str = "calsync") -> int:
    """Instructions valgrind counted for one run of ``jobs`` jobs of ``side`` in ``tree``."""
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'emulators'}"}
    with tempfile.TemporaryDirectory(prefix="calsync-callgrind-") as tmp:
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", sys.executable, "-c", _CHILD,
                   side, str(jobs)]  # fmt: skip
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind run in {tree} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_job(trees: dict[str, tuple[Path, str]], jobs: int, warmup: int) -> dict[str, float]:
    """Instructions per job of each (tree, side): the difference of two runs, so start-up cancels out.

    All runs go at once, so that the work which scales with time (heartbeats, the housekeeping thread)
    weighs the same in each count.
    """
    runs = [(name, n) for name in trees for n in (warmup, jobs)]

    def one(run: tuple[str, int]) -> int:
        tree, side = trees[run[0]]
        return count(tree, run[1], side)

    with ThreadPoolExecutor(len(runs)) as pool:
        counted = dict(zip(runs, pool.map(one, runs), strict=True))
    return {name: (counted[name, jobs] - counted[name, warmup]) / (jobs - warmup) for name in trees}


def main() -> None:
    """Count this checkout's sides (and ``--compare``'s calsync) and print instructions per job."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--warmup-jobs", type=int, default=100)
    parser.add_argument("--compare", type=Path, help="also count this calsync checkout (before/after)")
    parser.add_argument("--sides", default="calsync", help=f"of this checkout, comma-separated: {', '.join(SIDES)}")
    args = parser.parse_args()
    sides = list(dict.fromkeys(part.strip() for part in args.sides.split(",")))
    if "calsync" not in sides or set(sides) - set(SIDES):
        raise SystemExit(f"--sides takes calsync and optionally {', '.join(SIDES[1:])}; not {args.sides!r}")
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on the PATH (apt-get install valgrind)")
    if args.jobs <= args.warmup_jobs:
        raise SystemExit("--jobs must be more than --warmup-jobs")
    trees = {side: (ROOT, side) for side in sides}
    if args.compare:
        trees["compared"] = (args.compare.resolve(), "calsync")
    print(f"instructions per job (valgrind callgrind), {args.warmup_jobs} and {args.jobs} jobs per side", flush=True)
    measured = per_job(trees, args.jobs, args.warmup_jobs)
    for name, (tree, _) in trees.items():
        print(f"  {name:<9} {measured[name] / 1e6:7.3f} M instructions/job  ({tree})")
    for other in ("compared", *SIDES[1:]):
        if other in measured:
            print(f"  calsync/{other}: {measured['calsync'] / measured[other]:.3f}")


if __name__ == "__main__":
    main()
