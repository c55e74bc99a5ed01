"""``python -m calsync_emulators.chaos``: the options, the run, the report; exit status 0 only when every
invariant holds (1 when one is violated or the run failed, 2 for bad options)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

from calsync_emulators.chaos.backends import BACKENDS
from calsync_emulators.chaos.run import Options, run
from calsync_emulators.harness.signals import cleanup_on_signals


def _positive(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number of seconds greater than 0, not {text}")
    return value


def _at_least(low: int) -> Callable[[str], int]:
    def whole(text: str) -> int:
        value = int(text)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, not {text}")
        return value

    return whole


_count, _non_negative = _at_least(1), _at_least(0)


def parse(argv: list[str] | None = None) -> Options:
    """The options of one run."""
    parser = argparse.ArgumentParser(prog="python -m calsync_emulators.chaos", description=__doc__)
    parser.add_argument("--seconds", type=_positive, default=40, help="how long the load and the faults last")
    parser.add_argument("--workers", type=_count, default=2, help="calsync worker commands (one process each)")
    parser.add_argument("--threads", type=_count, default=4, help="worker threads per worker command")
    parser.add_argument("--kill-every", type=_positive, default=8, help="SIGKILL one worker every this many seconds")
    parser.add_argument("--fault-every", type=_positive, default=2, help="inject a provider fault every this many s")
    parser.add_argument("--accounts", type=_count, default=3)
    parser.add_argument("--entities", type=_count, default=8, help="events, each changed once per round")
    parser.add_argument("--provider", choices=BACKENDS, default="memory", help="the calendars synced into")
    parser.add_argument(
        "--latency-ms", type=_non_negative, default=0, help="every calendar write answers this much later"
    )
    parser.add_argument("--broker-url", help="a Redis (or RabbitMQ) of yours; default: the run's own Sentinel "
                        "topology, whose master it kills")  # fmt: skip
    parser.add_argument("--redis-url", help="the Redis for locks and state when --broker-url is RabbitMQ")
    parser.add_argument("--database-url", help="a PostgreSQL of yours (the run works in a schema of its own, "
                        "dropped afterwards); default: a SQLite file, and no database restart")  # fmt: skip
    parser.add_argument("--database-restart-command", help="restart the database with this command instead of "
                        "terminating the run's own connections")  # fmt: skip
    parser.add_argument("--settle-seconds", type=_positive, default=120, help="how long settling may take")
    parser.add_argument("--directory", type=Path, help="keep logs and data here (default: a temporary directory)")
    args = parser.parse_args(argv)
    return Options(**vars(args))


def main(argv: list[str] | None = None) -> int:
    """Run and print the report; the exit status."""
    options = parse(argv)
    with cleanup_on_signals():  # SIGTERM and SIGHUP clean up as Ctrl-C does
        report = run(options, say=lambda line: print(line, file=sys.stderr, flush=True))  # progress; report: stdout
    print("\n".join(report.lines()), flush=True)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
