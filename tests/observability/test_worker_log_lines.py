"""A real ``calsync worker`` with two processes writes its JSON lines to its own stdout, whole, and
Dramatiq's parent process relays none of them (core/config/log_lines.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calsync.providers.memory import MemoryProvider
from tests.observability.conftest import running
from tests.support import Pipeline, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

JOBS = 12


def _job_lines(text: str) -> list[dict[str, Any]]:
    return [entry for entry in map(json.loads, text.splitlines()) if entry["message"] == "job success"]


def test_worker_processes_write_whole_json_lines_to_stdout(settings_factory: Any, tmp_path: Path) -> None:
    settings = settings_factory()
    pipeline = Pipeline(settings, provider=MemoryProvider(settings.effective_memory_provider_path))
    try:
        account = pipeline.account()
        entities = [pipeline.submit([account], title=f"event {n}").entity_id for n in range(JOBS)]
        stdout, stderr = tmp_path / "stdout.log", tmp_path / "stderr.log"
        with running(settings, ["worker", "--processes", "2", "--threads", "2"], stdout, errors=stderr):
            for entity in entities:
                pipeline.wait_target(entity, account, "synced", timeout=60)
            lines = wait_until(lambda: len(found := _job_lines(stdout.read_text())) == JOBS and found,
                               timeout=30, what="every job's line on stdout")  # fmt: skip
        assert sorted(line["entity_id"] for line in lines) == sorted(entities)
        assert all(line["effect"] == "create" for line in lines)
        assert all(json.loads(line) for line in stdout.read_text().splitlines())  # nothing but whole JSON lines
        assert "job success" not in stderr.read_text()  # the parent relayed none of them
    finally:
        pipeline.close()
