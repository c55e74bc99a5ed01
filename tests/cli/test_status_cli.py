"""``calsync status`` as scripts and pipes see it: the exit code says whether every source was read, and
``--watch`` prints every refresh when stdout is not a terminal (a table each, or one JSON document a line)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store import migrate
from calsync.core.store.database import Database
from tests.cli.process import calsync

UNREACHABLE = "redis://127.0.0.1:1/0"  # nothing listens on port 1


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory()
    migrate.migrate_to(Database(built.effective_database_url))
    return built


def test_status_exits_1_when_the_broker_is_unreachable_and_still_shows_the_rest(settings: Settings) -> None:
    done = calsync("status", "--json", settings=settings, env={"CALSYNC_BROKER_URL": UNREACHABLE})
    assert done.returncode == 1, (done.stdout, done.stderr)
    doc = json.loads(done.stdout)  # the partial reading is still one JSON document
    assert doc["queues"] is None and "broker" in doc["errors"] and doc["targets"] is not None
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("calsync: error: ") and "broker" in line


def test_status_exits_0_when_every_source_answers(settings: Settings) -> None:
    done = calsync("status", "--json", settings=settings)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["errors"] == {}


def test_the_table_exits_1_too(settings: Settings) -> None:
    done = calsync("status", settings=settings, env={"CALSYNC_BROKER_URL": UNREACHABLE})
    assert done.returncode == 1 and "broker unavailable" in done.stdout, (done.stdout, done.stderr)


def test_watch_into_a_pipe_prints_every_refresh(settings: Settings) -> None:
    done = calsync("status", "--watch", "--interval", "0.05", "--count", "3", settings=settings)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.count("calsync status at") == 3 and done.stdout.count("job outcomes") == 3


def test_json_watch_prints_one_json_document_per_line(settings: Settings) -> None:
    done = calsync("status", "--json", "--watch", "--interval", "0.05", "--count", "3", settings=settings)
    assert done.returncode == 0, (done.stdout, done.stderr)
    lines = done.stdout.splitlines()
    assert len(lines) == 3
    assert [set(json.loads(line)) >= {"at", "queues", "targets", "errors"} for line in lines] == [True] * 3


def test_watch_exits_as_its_last_refresh(settings: Settings) -> None:
    env = {"CALSYNC_BROKER_URL": UNREACHABLE}
    done = calsync("status", "--json", "--watch", "--interval", "0.05", "--count", "2", settings=settings, env=env)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert [json.loads(line)["queues"] for line in done.stdout.splitlines()] == [None, None]
