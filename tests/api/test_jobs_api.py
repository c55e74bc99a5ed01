"""Jobs over HTTP against a live server and a real worker: found by the receipt's id, cancelled while queued (a
worker then skips it), replayed from the cancel's dead letter; a running job cannot be cancelled."""

from __future__ import annotations

from typing import Any

import httpx

from calsync.core.model.vocabulary import Outcome
from tests.api.live import LiveApi
from tests.support import Pipeline, change, wait_until


def _submit(api: LiveApi, account: str) -> tuple[str, str]:
    """A change accepted over HTTP while no worker runs: its job waits on the queue."""
    with api.client(api.key(scope="submit")) as http:
        receipt = http.post("/v1/changes", json=change([account])).json()
    [job_id] = receipt["job_ids"]
    return receipt["entity_id"], job_id


def _job(http: httpx.Client, job_id: str) -> dict[str, Any]:
    answer = http.get(f"/v1/jobs/{job_id}")
    assert answer.status_code == 200, answer.text
    doc: dict[str, Any] = answer.json()
    return doc


def test_a_job_is_found_by_its_receipts_id_and_only_by_its_tenant(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    entity, job_id = _submit(api, account)
    with api.client(api.key(scope="read")) as http, api.client(api.key("tenant-2", "admin")) as other:
        queued = _job(http, job_id)
        theirs, missing = other.get(f"/v1/jobs/{job_id}"), http.get("/v1/jobs/job-unknown")
        with pipeline.worker():
            pipeline.wait_target(entity, account, "synced")
        synced = _job(http, job_id)
    assert queued["state"] == "pending" and (queued["entity_id"], queued["account_id"]) == (entity, account)
    assert queued["target"]["status"] == "pending" and queued["dead_letter"] is None and queued["attempts"] is None
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"].replace(job_id, "J") == missing.json()["detail"].replace("job-unknown", "J")
    assert synced["state"] == "synced" and synced["target"]["synced_version"] == 1


def test_a_cancelled_job_is_skipped_and_its_dead_letter_replays_it(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    entity, job_id = _submit(api, account)
    with api.client(api.key(scope="admin")) as http:
        reader = http.post(f"/v1/jobs/{job_id}/cancel", headers={"Authorization": f"Bearer {api.key(scope='read')}"})
        cancelled = http.post(f"/v1/jobs/{job_id}/cancel", json={"note": "wrong calendar"})
        again = http.post(f"/v1/jobs/{job_id}/cancel")
        with pipeline.worker():
            wait_until(lambda: pipeline.outcomes().get(Outcome.STALE, 0) >= 1, what="the cancelled job to be skipped")
            after_worker = _job(http, job_id)
            record = cancelled.json()["dead_letter"]
            report = http.post("/v1/dead-letters/replay", json={"ids": [record["id"]]}).json()
            pipeline.wait_target(entity, account, "synced")
        [replayed] = report["replayed"]
        replay = _job(http, replayed["job_id"])
    assert reader.status_code == 403
    assert cancelled.status_code == 200, cancelled.text
    assert record["cause"] == "cancelled" and record["reason"] == "cancelled by operator"
    assert record["job_id"] == job_id and "wrong calendar" in record["last_error"]
    assert again.status_code == 409 and "is dead-lettered" in again.json()["detail"]
    # The worker took the cancelled job's message and called no provider: the target stayed dead-lettered.
    assert after_worker["state"] == "dead-lettered" and after_worker["dead_letter"]["status"] == "open"
    assert replay["state"] == "synced" and len(pipeline.provider.calls()) == 1


def test_a_running_job_cannot_be_cancelled(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    entity, job_id = _submit(api, account)
    keys = pipeline.clients.keys
    held = pipeline.app.locks.acquire(keys.lock("tenant-1", entity, account))  # a delivery of the job is running
    assert held is not None
    with api.client(api.key(scope="admin")) as http:
        running = http.post(f"/v1/jobs/{job_id}/cancel")
        assert pipeline.app.locks.release(held)
        cancelled = http.post(f"/v1/jobs/{job_id}/cancel")
    assert running.status_code == 409 and "running" in running.json()["detail"]
    assert cancelled.status_code == 200
    assert pipeline.target(entity, account).status == "failed"
