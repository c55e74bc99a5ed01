"""``calsync dlq`` over quarantined messages: list by kind, show the raw body safely, replay what is a job
underneath a broken envelope, refuse the rest with the reason, purge."""

from __future__ import annotations

import base64
import json
import subprocess
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store.crypto import generate_key
from tests.cli.process import calsync
from tests.integration.poison_cases import RawProducer, envelope, payload
from tests.support import Pipeline, wait_until


def _run(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return calsync(*args, settings=settings)  # the real console script, in a subprocess


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow
def test_quarantined_messages_are_listed_shown_replayed_or_refused_and_purged(settings_factory: Any) -> None:
    settings: Settings = settings_factory(secret_key=generate_key())
    pipeline = Pipeline(settings)
    raw = RawProducer(pipeline, "redis")
    try:
        account = pipeline.account(account_id="acc-1")
        with pipeline.worker():
            real = pipeline.submit([account], title="v1")
            pipeline.wait_target(real.entity_id, account, "synced")
        update = pipeline.submit(None, entity_id=real.entity_id, title="v2")  # pending: its job is queued
        pipeline.broker.flush(settings.queue)  # ... and lost, so only the quarantined copy can sync it
        key = f"calendar:tenant-1:{real.entity_id}:{account}:update:v2"
        job = payload("job-fixable", entity=real.entity_id, account=account, target_version=2, idempotency_key=key)
        fixable = raw.push_body(lambda rid: json.dumps(envelope("other", rid, args=[job])).encode())
        garbage = raw.push_body(lambda rid: b"\xff\x00 not json")
        with pipeline.worker():
            wait_until(lambda: len(pipeline.dead_letters(kind="quarantined")) == 2, what="two quarantined messages")
            listed = _json(_run(settings, "dlq", "list", "--kind", "quarantined", "--json"))
            assert {r["reason"] for r in listed} == {"quarantined: wrong queue", "quarantined: not UTF-8"}
            assert _json(_run(settings, "dlq", "list", "--kind", "job", "--json")) == []
            by_reason = {r["reason"]: r for r in listed}
            bad = _json(_run(settings, "dlq", "show", str(by_reason["quarantined: not UTF-8"]["id"])))
            assert base64.b64decode(bad["raw_body_base64"]) == garbage
            assert bad["raw_body_text"] == "\\xff\x00 not json"  # undecodable bytes escaped; JSON escapes the NUL
            assert bad["origin"]["broker"] == "redis"
            assert "\\u0000" in _run(settings, "dlq", "show", str(bad["id"])).stdout
            good = by_reason["quarantined: wrong queue"]
            assert (good["entity_id"], good["job_type"]) == (real.entity_id, "sync_calendar_event")
            assert base64.b64decode(good["raw_body_base64"]) == fixable

            replayed = _json(_run(settings, "dlq", "replay", str(good["id"]), "--json"))
            assert len(replayed["replayed"]) == 1
            assert pipeline.wait_target(real.entity_id, account, "synced").synced_version == update.version
            refused = _run(settings, "dlq", "replay", str(bad["id"]), "--json")
            assert refused.returncode == 0  # every record skipped is a report, not a dependency failure
            [skipped] = json.loads(refused.stdout)["skipped"]
            assert skipped["why"] == "quarantined message cannot be replayed: its body is not UTF-8 JSON; discard it"

        purged = _json(_run(settings, "dlq", "purge-quarantined"))
        assert purged == {"discarded": [{"id": bad["id"], "job_id": bad["job_id"]}], "skipped": []}
        assert _json(_run(settings, "dlq", "list", "--kind", "quarantined", "--json")) == []
    finally:
        raw.close()
        pipeline.close()
