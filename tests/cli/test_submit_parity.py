"""``calsync submit`` (the real console script, in a subprocess) accepts exactly the change files the published
schema accepts: the shared fixtures get the same verdict from both, and ``--file -`` reads standard input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from tests.model.test_change_schema_parity import VERDICTS, fixtures, schema_accepts
from tests.support import Pipeline, change

pytestmark = [pytest.mark.slow]


def _calsync(settings: Settings, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    script = shutil.which("calsync", path=str(Path(sys.executable).parent))
    assert script is not None
    env = {**os.environ, **settings.as_environment()}
    return subprocess.run([script, *args], env=env, input=stdin, capture_output=True, text=True, timeout=60)


@pytest.fixture
def submit_target(settings_factory: Any) -> Any:
    """A migrated database with the accounts and events the fixtures name."""
    pipeline = Pipeline(settings_factory())
    pipeline.account(account_id="acc_a")
    pipeline.account(account_id="acc_b")
    pipeline.submit(["acc_a"], entity_id="evt_existing")
    pipeline.submit(["acc_a"], entity_id="evt_to_delete")
    yield pipeline.settings
    pipeline.close()


def _submit_file(settings: Settings, kind: str, path: Path) -> subprocess.CompletedProcess[str]:
    # Valid files by path, the others on standard input: both ways of reading are exercised.
    if kind == "valid":
        return _calsync(settings, "submit", "--tenant", "tenant-1", "--file", str(path))
    return _calsync(settings, "submit", "--tenant", "tenant-1", "--file", "-", stdin=path.read_text())


def test_calsync_submit_and_the_schema_agree_on_every_fixture(submit_target: Settings) -> None:
    disagreements = []
    cases = fixtures()
    with ThreadPoolExecutor(max_workers=4) as pool:  # each call is a fresh interpreter: mostly import time
        results = list(pool.map(lambda case: _submit_file(submit_target, *case), cases))
    for (kind, path), done in zip(cases, results, strict=True):
        text = path.read_text()
        assert done.returncode in (0, 2), f"{path.name}: exit {done.returncode}: {done.stderr}"
        verdict = (schema_accepts(json.loads(text)), done.returncode == 0)
        if verdict != VERDICTS[kind]:
            disagreements.append(f"{kind}/{path.name}: schema, cli = {verdict}; {done.stderr.strip()}")
        if done.returncode == 2:
            assert done.stderr.startswith("calsync: error: ") and done.stderr.count("\n") == 1, done.stderr
    assert disagreements == []


def test_submit_reads_the_change_from_standard_input(submit_target: Settings) -> None:
    document = json.dumps(change(["acc_b"], entity_id="evt_stdin", title="From a pipe"))
    done = _calsync(submit_target, "submit", "--tenant", "tenant-1", "--file", "-", "--request-id", "pipe-1",
                    stdin=document)  # fmt: skip
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert (receipt["entity_id"], receipt["version"], len(receipt["job_ids"])) == ("evt_stdin", 1, 1)
    again = _calsync(submit_target, "submit", "--tenant", "tenant-1", "--file", "-", "--request-id", "pipe-1",
                     stdin=document)  # fmt: skip
    assert json.loads(again.stdout) == receipt  # the same request id returns the first receipt
    broken = _calsync(submit_target, "submit", "--tenant", "tenant-1", "--file", "-", stdin='{"operation": ')
    assert broken.returncode == 2 and "change file (stdin) is not valid JSON" in broken.stderr
