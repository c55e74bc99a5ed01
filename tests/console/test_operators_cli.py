"""``calsync operators``: the key is printed once and opens the console; list shows no key; revoke ends sessions;
every change is in the audit log as the command's ``cli:user@host``."""

from __future__ import annotations

import json
from contextlib import closing
from typing import Any

from click.testing import CliRunner, Result
from sqlalchemy import select

from calsync.actors.cli.main import cli
from calsync.actors.cli.shell import user_at_host
from calsync.core.store import operators
from calsync.core.store.api_keys import key_hash
from calsync.core.store.schema import audit_log
from tests.api.live import LiveApi
from tests.console.conftest import sign_in
from tests.support import Pipeline


def _run(pipeline: Pipeline, *args: str) -> Result:
    return CliRunner().invoke(cli, list(args), env=pipeline.settings.as_environment(), catch_exceptions=False)


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_create_sign_in_list_revoke(pipeline: Pipeline, served: LiveApi) -> None:
    created = _json(_run(pipeline, "operators", "create", "--name", "ada@example.test", "--role", "operator"))
    assert created["key"].startswith(operators.KEY_PREFIX) and created["id"].startswith("op_")
    assert (created["name"], created["role"], created["proxy"]) == ("ada@example.test", "operator", False)
    with closing(sign_in(served, created["key"])) as browser:
        assert browser.get("/audit").status_code == 200

        listed = _json(_run(pipeline, "operators", "list", "--json"))
        assert [(o["id"], o["name"], o["role"], o["revoked_at"]) for o in listed] == [
            (created["id"], "ada@example.test", "operator", None)
        ]
        assert created["key"] not in json.dumps(listed) and key_hash(created["key"]) not in json.dumps(listed)
        assert "ada@example.test" in _run(pipeline, "operators", "list").stdout

        assert _json(_run(pipeline, "operators", "revoke", "ada@example.test")) == {"revoked": "ada@example.test"}
        assert browser.get("/audit").status_code == 303  # the open session is over
    again = _run(pipeline, "operators", "revoke", "ada@example.test")
    assert again.exit_code == 2 and "no live operator" in again.output

    with pipeline.clients.db.read() as conn:
        rows = conn.execute(select(audit_log.c.actor, audit_log.c.action, audit_log.c.subject).order_by(audit_log.c.id))
        logged = [(r.actor, r.action, r.subject) for r in rows if r.action.startswith("operators.")]
    actor = f"cli:{user_at_host()}"
    assert logged == [
        (actor, "operators.create", "operator ada@example.test"),
        (actor, "operators.revoke", "operator ada@example.test"),
    ]


def test_a_proxys_user_gets_no_key(pipeline: Pipeline) -> None:
    created = _json(_run(pipeline, "operators", "create", "--name", "bo@example.test", "--role", "viewer", "--proxy"))
    assert "key" not in created and created["proxy"] is True
    with pipeline.clients.db.read() as conn:
        assert operators.find_by_name(conn, "bo@example.test") is not None


def test_bad_input_is_refused(pipeline: Pipeline) -> None:
    assert _run(pipeline, "operators", "create", "--name", "x", "--role", "admin").exit_code == 2
    for name in ["", " padded ", "a\tb", "x" * 257]:
        bad = _run(pipeline, "operators", "create", "--name", name, "--role", "viewer")
        assert bad.exit_code == 2 and "name" in bad.output, name
    assert _json(_run(pipeline, "operators", "create", "--name", "cy", "--role", "viewer"))
    taken = _run(pipeline, "operators", "create", "--name", "cy", "--role", "operator")
    assert taken.exit_code == 2 and "exists already" in taken.output
