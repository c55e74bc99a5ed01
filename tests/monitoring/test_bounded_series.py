"""Labels stay bounded (issue 35): after 1,000 accounts and 10,000 jobs calsync serves exactly as many series as
after 100 accounts and 100 jobs. No label carries an account, tenant, event or job id.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from tests.monitoring.stack import STACK_SETTINGS, Stack, running_stack
from tests.observability.conftest import scrape
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]

ACCOUNTS_PER_CHANGE = 10


def _series(stack: Stack) -> dict[str, set[str]]:
    """Every series each calsync target serves now (name and labels), from the target itself."""
    after = time.time()  # the worker's series once it has beaten since the last job (the exporter reads at scrape)
    worker = f"http://127.0.0.1:{stack.settings.metrics_port}/metrics"
    wait_until(lambda: max((value for (name, _), value in scrape(worker).samples.items()
                            if name == "calsync_worker_heartbeat_timestamp_seconds"), default=0) >= after,
               what="a heartbeat after the last job")  # fmt: skip
    targets = {
        "worker": f"http://127.0.0.1:{stack.settings.metrics_port}/metrics",
        "exporter": f"http://127.0.0.1:{stack.exporter_port}/metrics",
        "api": f"http://127.0.0.1:{stack.api_port}/metrics",
    }
    return {job: {f"{name}{sorted(labels)}" for name, labels in scrape(url).samples} for job, url in targets.items()}


def _load(stack: Stack, accounts: list[str]) -> None:
    """A change for every group of ``ACCOUNTS_PER_CHANGE`` accounts (a job per account); waits until all are
    synced."""
    for n in range(0, len(accounts), ACCOUNTS_PER_CHANGE):
        stack.pipeline.submit(accounts[n : n + ACCOUNTS_PER_CHANGE])
    stack.pipeline.wait_idle(timeout=600)


def test_series_do_not_grow_with_accounts_or_jobs(settings_factory: Any, tmp_path: Path) -> None:
    with running_stack(settings_factory(**STACK_SETTINGS), tmp_path) as stack:
        accounts = [stack.pipeline.account(account_id=f"bounded-{n}") for n in range(1000)]
        _load(stack, accounts[:100])
        small = _series(stack)
        _load(stack, accounts[100:])
        for _ in range(9):  # 100 + 900 + 9 x 1,000 jobs
            _load(stack, accounts)
        large = _series(stack)
        print("series per target after 100 accounts and jobs:", {job: len(s) for job, s in small.items()})
        print("series per target after 1,000 accounts and 10,000 jobs:", {job: len(s) for job, s in large.items()})
        for job in large:
            assert large[job] == small[job], (job, sorted(large[job] ^ small[job]))
        ids = re.compile(r"'(evt|job|acc|trace)_[0-9a-f]{8}|bounded-\d|tenant-\d")
        assert not [s for series in large.values() for s in series if ids.search(s)]
