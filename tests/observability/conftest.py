"""Helpers for observability tests: free ports, scraping and parsing /metrics, promtool, calsync subprocesses."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from calsync.core.config.settings import Settings, child_environment
from tests.support import wait_until

PROMTOOL_LINT_FAILED = 3  # promtool check metrics: exit code when the lint found problems


@dataclass(frozen=True)
class Exposition:
    """A parsed /metrics page: the raw text and every sample by (name, labels)."""

    text: str
    samples: Mapping[tuple[str, frozenset[tuple[str, str]]], float]

    def value(self, name: str, **labels: str) -> float | None:
        """The sample with exactly these labels, or None."""
        return self.samples.get((name, frozenset(labels.items())))

    def series(self, name: str) -> dict[frozenset[tuple[str, str]], float]:
        """Every sample of one name, by label set."""
        return {labels: value for (sample, labels), value in self.samples.items() if sample == name}

    def total(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(value for series, value in self.series(name).items() if wanted <= series)


def parse(text: str) -> Exposition:
    """Parse Prometheus text exposition."""
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return Exposition(text, samples)


def fetch(url: str) -> str | None:
    """GET a page; None while nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, ConnectionError):
        return None


def scrape(url: str, *, timeout: float = 30) -> Exposition:
    """Wait until ``url`` answers and parse it."""
    return parse(wait_until(lambda: fetch(url), timeout=timeout, what=f"{url} to answer"))


@pytest.fixture(scope="session")
def promtool(promtool_binary: str) -> str:
    """The promtool binary (skipped where missing, unless TEST_REQUIRE_SERVICES names it)."""
    return promtool_binary


def check_metrics(promtool: str, text: str) -> tuple[int, list[str]]:
    """``promtool check metrics`` on an exposition: its exit code and the problems it printed."""
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    problems = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return done.returncode, problems


def calsync_executable() -> str:
    """The calsync console script of this environment."""
    found = shutil.which("calsync", path=str(Path(sys.executable).parent))
    assert found, "the calsync console script is not installed in this environment"
    return found


class CalsyncProcess:
    """A long-running ``calsync`` subprocess in its own session, with its output in a log file.

    ``errors``: a file of its own for stderr (default: with stdout, in ``log``).
    """

    def __init__(self, settings: Settings, args: list[str], log: Path, errors: Path | None = None) -> None:
        self.log = log
        with open(log, "ab") as out, open(errors or os.devnull, "ab") as err:
            self.proc = subprocess.Popen(
                [calsync_executable(), *args], env=child_environment(settings),
                stdout=out, stderr=subprocess.STDOUT if errors is None else err, start_new_session=True,
            )  # fmt: skip

    def output(self) -> str:
        """What the process logged so far (the tail, for failure messages)."""
        return self.log.read_text(errors="replace")[-5000:]

    def stop(self) -> None:
        """SIGTERM the whole session (the Dramatiq main process, its workers and forks) and reap it."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def running(settings: Settings, args: list[str], log: Path, errors: Path | None = None) -> Iterator[CalsyncProcess]:
    """Run ``calsync ARGS`` for the duration of the block; its log is printed if the block fails."""
    process = CalsyncProcess(settings, args, log, errors)
    try:
        yield process
    except BaseException:
        print(process.output())
        raise
    finally:
        process.stop()
