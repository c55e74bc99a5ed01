"""Credentials a worker's keys cannot open never dead-letter jobs: the jobs are held, the account is named once,
and a worker with the right key runs them (core/store/unreadable_secrets.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from calsync.core.store import accounts, unreadable_secrets
from calsync.core.store.crypto import CredentialCipher, generate_key
from calsync.providers.memory import MemoryProvider
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.integration


def _account(pipeline: Pipeline, key: str, name: str) -> str:
    with pipeline.clients.db.write() as conn:
        return accounts.add_account(conn, tenant_id="tenant-1", provider="memory", address=f"{name}@example.com",
                                    credentials=CredentialCipher(key).encrypt({"token": f"{name}-token"}),
                                    options={}, account_id=name).id  # fmt: skip


def test_jobs_whose_credentials_the_worker_cannot_open_wait_for_a_worker_with_the_key(
    settings_factory: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unreadable_secrets, "HOLD_SECONDS", 0.2)  # held jobs come back at once, not after a minute
    caplog.set_level(logging.INFO)
    ours, theirs = generate_key(), generate_key()
    provider = MemoryProvider()
    wrong = Pipeline(settings_factory(secret_key=ours), provider=provider)
    try:
        readable, unreadable = _account(wrong, ours, "readable"), _account(wrong, theirs, "unreadable")
        receipts = [wrong.submit([readable, unreadable], title=f"event {n}") for n in range(3)]
        with wrong.worker():
            for receipt in receipts:
                wrong.wait_target(receipt.entity_id, readable, "synced")
            wait_until(lambda: wrong.outcomes().get("deferred", 0) >= 6, what="the unreadable account's jobs held")
        assert wrong.dead_letters() == []  # not one dead letter, and no attempt used
        assert all(wrong.target(r.entity_id, unreadable).status == "pending" for r in receipts)
    finally:
        wrong.close()
    said = [r for r in caplog.records if r.name == "calsync.core.store.unreadable_secrets"]
    assert len(said) == 1 and said[0].levelno == logging.ERROR  # the account named once, not once per job
    assert "account unreadable" in said[0].getMessage() and "CALSYNC_SECRET_KEY" in said[0].getMessage()

    both = Pipeline(settings_factory(secret_keys=f"{ours},{theirs}"), provider=provider)
    try:
        with both.worker():
            for receipt in receipts:
                both.wait_target(receipt.entity_id, unreadable, "synced")
        assert both.dead_letters() == []
        assert {e.body["title"] for e in provider.events(unreadable)} == {f"event {n}" for n in range(3)}
    finally:
        both.close()
