"""A small mutation tester: apply each single-point mutation of ``mutations.py`` to a scratch copy of the
repository, run the fast invariant selection there, and report which mutants no test kills.

Not part of the suite (slow: a few minutes). Run from the repository root:
``python -m tests.mutation.run [-j 2] [NAME ...]``. The working tree is never touched: each worker
mutates its own copy (made from ``git ls-files``, symlinks kept), so the calsync namespace layout
imports the mutated file exactly as in production. docs/TESTING.md explains why not mutmut.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.mutation.mutations import MUTATIONS, SELECTION, Mutation


@dataclass(frozen=True)
class Verdict:
    """What the selection said about one mutant."""

    mutation: Mutation
    status: str  # killed | survived | timeout | broken (the mutation no longer applies)
    seconds: float
    first_failure: str = ""


def _copy_repository(root: Path, into: Path) -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source, target = root / name, into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        elif source.is_file():
            shutil.copy2(source, target)


def _first_failure(output: str) -> str:
    for line in output.splitlines():
        if line.startswith(("FAILED tests/", "ERROR tests/")):
            return line.split(" ", 1)[1].split(" - ")[0]
    return ""


def check(mutation: Mutation, copy: Path, *, timeout: float) -> Verdict:
    """Run the selection against ``copy`` with ``mutation`` applied, then restore the file."""
    path = copy / mutation.path
    original = path.read_text()
    if original.count(mutation.old) != 1:
        return Verdict(mutation, "broken", 0.0, f"{mutation.old!r} occurs {original.count(mutation.old)} times")
    path.write_text(original.replace(mutation.old, mutation.new))
    started = time.monotonic()
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--timeout", "60",
               "-k", "not rabbitmq", *(mutation.tests or SELECTION)]  # fmt: skip
    try:
        done = subprocess.run(command, cwd=copy, env={**os.environ, "PYTHONPATH": str(copy)},
                              capture_output=True, text=True, timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return Verdict(mutation, "timeout", time.monotonic() - started)
    finally:
        path.write_text(original)
    status = "survived" if done.returncode == 0 else "killed"
    return Verdict(mutation, status, time.monotonic() - started, _first_failure(done.stdout))


def main() -> int:
    """Check the chosen mutants (all by default) and print one line each, then the score."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("names", nargs="*", help="mutation names (default: all)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    root = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="calsync-mutants-") as scratch:
        copies: queue.Queue[Path] = queue.Queue()
        for n in range(args.jobs):
            _copy_repository(root, Path(scratch) / str(n))
            copies.put(Path(scratch) / str(n))

        def run(mutation: Mutation) -> Verdict:
            copy = copies.get()
            try:
                verdict = check(mutation, copy, timeout=args.timeout)
            finally:
                copies.put(copy)
            print(f"{verdict.status:8} {verdict.seconds:6.1f}s {mutation.name:28} {verdict.first_failure}", flush=True)
            return verdict

        with ThreadPoolExecutor(args.jobs) as pool:
            verdicts = list(pool.map(run, chosen))
    counts = {s: sum(v.status == s for v in verdicts) for s in ("killed", "timeout", "survived", "broken")}
    print(f"score: {counts['killed'] + counts['timeout']}/{len(verdicts)} killed {counts}")
    for verdict in verdicts:
        if verdict.status in ("survived", "broken"):
            print(f"  {verdict.status}: {verdict.mutation.name}: {verdict.mutation.why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
