"""``/v1/webhooks`` over HTTP: admin scope, the key's tenant only, the secret answered once, SSRF refusals."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from calsync.core.api.services import services_from_clients
from calsync.core.store.crypto import generate_key
from tests.api.live import LiveApi, serving
from tests.support import Pipeline


@pytest.fixture
def hooks_api(settings_factory: Any) -> Iterator[LiveApi]:
    """A live server whose webhooks may reach 127.0.0.1 over http (the development settings)."""
    pipeline = Pipeline(settings_factory(secret_key=generate_key(), webhook_allow_http=True,
                                         webhook_allowed_networks="127.0.0.0/8"))  # fmt: skip
    try:
        with serving(replace(services_from_clients(pipeline.clients), key_cache_seconds=0)) as live:
            yield live
    finally:
        pipeline.close()


def test_register_list_rotate_disable_enable_remove(hooks_api: LiveApi) -> None:
    admin = hooks_api.client(hooks_api.key(scope="admin"))
    created = admin.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/hooks", "events": ["sync.succeeded"]})
    assert created.status_code == 201, created.text
    body = created.json()
    endpoint_id, secret = body["id"], body["secret"]
    assert secret.startswith("whsec_") and body["status"] == "enabled"

    listed = admin.get("/v1/webhooks").json()["items"]
    assert [e["id"] for e in listed] == [endpoint_id] and "secret" not in listed[0]
    assert admin.get(f"/v1/webhooks/{endpoint_id}").json()["events"] == ["sync.succeeded"]

    rotated = admin.post(f"/v1/webhooks/{endpoint_id}/rotate-secret").json()
    assert rotated["secret"] not in (secret, None) and rotated["previous_secret_expires_at"]
    disabled = admin.post(f"/v1/webhooks/{endpoint_id}/disable").json()
    assert (disabled["status"], disabled["disabled_by"]) == ("disabled", "operator")
    assert admin.post(f"/v1/webhooks/{endpoint_id}/enable").json()["status"] == "enabled"
    assert admin.delete(f"/v1/webhooks/{endpoint_id}").status_code == 204
    assert admin.get(f"/v1/webhooks/{endpoint_id}").status_code == 404


def test_other_tenants_and_other_scopes_see_nothing(hooks_api: LiveApi) -> None:
    admin = hooks_api.client(hooks_api.key(scope="admin"))
    endpoint_id = admin.post("/v1/webhooks", json={"url": "http://127.0.0.1:9/", "events": ["event.cancelled"]}).json()[
        "id"
    ]
    other = hooks_api.client(hooks_api.key(tenant="tenant-2", scope="admin"))
    assert other.get("/v1/webhooks").json() == {"items": []}
    for method, path in (("get", ""), ("post", "/disable"), ("post", "/rotate-secret"), ("delete", "")):
        assert getattr(other, method)(f"/v1/webhooks/{endpoint_id}{path}").status_code == 404
    submitter = hooks_api.client(hooks_api.key(scope="submit"))
    assert submitter.get("/v1/webhooks").status_code == 403
    assert hooks_api.client().get("/v1/webhooks").status_code == 401


@pytest.mark.parametrize(
    ("body", "field", "why"),
    [
        ({"url": "http://169.254.169.254/latest", "events": ["sync.succeeded"]}, "url", "link-local"),
        ({"url": "http://10.0.0.1/", "events": ["sync.succeeded"]}, "url", "private"),
        ({"url": "ftp://127.0.0.1/", "events": ["sync.succeeded"]}, "url", "must be https"),
        ({"url": "http://127.0.0.1/", "events": []}, "events", "at least 1"),
        ({"url": "http://127.0.0.1/", "events": ["sync.exploded"]}, "events.0", "sync.succeeded"),
    ],
)
def test_refusals_are_problems_naming_the_field(hooks_api: LiveApi, body: dict[str, Any], field: str, why: str) -> None:
    answer = hooks_api.client(hooks_api.key(scope="admin")).post("/v1/webhooks", json=body)
    assert answer.status_code == 422 and answer.headers["content-type"].startswith("application/problem+json")
    problem = answer.json()
    assert any(e["field"].startswith(field) and why in e["message"] for e in problem["errors"]), problem["errors"]
