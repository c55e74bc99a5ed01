"""``calsync api-keys``: the key is printed once and stored hashed; list shows no secret; revoke is immediate."""

from __future__ import annotations

import json
from typing import Any

from click.testing import CliRunner, Result

from calsync.actors.cli.main import cli
from calsync.core.store import api_keys
from tests.api.live import LiveApi
from tests.support import Pipeline


def _run(pipeline: Pipeline, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=pipeline.settings.as_environment(), catch_exceptions=False)


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_create_list_revoke(pipeline: Pipeline, api: LiveApi) -> None:
    created = _json(_run(pipeline, "api-keys", "create", "--tenant", "t-cli", "--scope", "read", "--name", "ci"))
    assert created["key"].startswith(api_keys.KEY_PREFIX) and created["id"].startswith("key_")
    with api.client(created["key"]) as http:
        assert http.get("/v1/events/evt-1").status_code == 404  # authenticated, nothing there

        listed = _json(_run(pipeline, "api-keys", "list", "--tenant", "t-cli", "--json"))
        assert [(k["id"], k["scope"], k["name"]) for k in listed] == [(created["id"], "read", "ci")]
        assert listed[0]["last_used_at"] is not None
        assert created["key"] not in json.dumps(listed) and api_keys.key_hash(created["key"]) not in json.dumps(listed)

        assert _json(_run(pipeline, "api-keys", "revoke", created["id"])) == {"revoked": created["id"]}
        assert http.get("/v1/events/evt-1").status_code == 401
    again = _run(pipeline, "api-keys", "revoke", created["id"])
    assert again.exit_code == 2 and "no live API key" in again.output


def test_bad_input_is_refused(pipeline: Pipeline) -> None:
    assert _run(pipeline, "api-keys", "create", "--tenant", "t1", "--scope", "root").exit_code == 2
    bad = _run(pipeline, "api-keys", "create", "--tenant", "bad tenant", "--scope", "read")
    assert bad.exit_code == 2 and "--tenant" in bad.output


def test_last_use_is_written_at_most_every_interval(pipeline: Pipeline, api: LiveApi) -> None:
    key = api.key(scope="read")
    with api.client(key) as http:
        http.get("/v1/events/evt-1")
        with pipeline.clients.db.read() as conn:
            (first,) = api_keys.list_keys(conn, "tenant-1")
        http.get("/v1/events/evt-1")
        with pipeline.clients.db.read() as conn:
            (second,) = api_keys.list_keys(conn, "tenant-1")
    assert first.last_used_at is not None and second.last_used_at == first.last_used_at
