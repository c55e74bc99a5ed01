"""A Node.js service (built-in fetch, no npm install) submits over HTTP, polls until synced, reads its job by id
and finds its target by a paged search, and cannot see another tenant's event."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.api.live import LiveApi
from tests.conftest import missing
from tests.support import Pipeline

SCRIPT = Path(__file__).with_name("node_client.mjs")


@pytest.fixture(scope="session")
def node() -> str:
    found = shutil.which("node")
    if found is None:
        missing("node", "not on PATH (Node.js 20 or later)")
    assert found is not None
    return found


def test_a_node_service_submits_and_polls_until_synced(node: str, api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    env = {**os.environ, "API_URL": api.url, "TENANT_KEY": api.key("tenant-1", "submit"),
           "OTHER_TENANT_KEY": api.key("tenant-2", "admin"), "ACCOUNT_ID": account}  # fmt: skip
    with pipeline.worker():
        done = subprocess.run([node, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["targets"] == [[account, "synced", 1]] and summary["version"] == 1
    assert summary["job"] == [200, "synced", account] and summary["found"] == [[account, "synced", True]]
    assert summary["other_tenant"] == {
        "status": 404, "type": "application/problem+json", "problem": "urn:calsync:problem:not-found"
    }  # fmt: skip
    assert pipeline.target(summary["entity_id"], account).status == "synced"
