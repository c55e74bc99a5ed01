"""``/v1/pause``: operators' keys only, viewers read, operators pause and resume, each flip audited."""

from __future__ import annotations

from dataclasses import replace

import redis

from calsync.core.api.services import services_from_clients
from calsync.core.model.vocabulary import OperatorRole
from calsync.core.redis.pause import PauseSwitch
from calsync.core.store import audit, operators
from tests.api.live import LiveApi, serving
from tests.support import Pipeline, free_port


def _operator(api: LiveApi, name: str, role: OperatorRole) -> str:
    with api.db.write() as conn:
        key, _record = operators.create(conn, name=name, role=role)
    assert key is not None
    return key


def test_operators_pause_and_resume_viewers_read_tenants_cannot(api: LiveApi, pipeline: Pipeline) -> None:
    ann, vic = _operator(api, "ann@example.test", "operator"), _operator(api, "vic@example.test", "viewer")
    with api.client(ann) as op, api.client(vic) as viewer, api.client(api.key(scope="admin")) as tenant:
        assert viewer.get("/v1/pause").json()["paused"] is False
        refused = viewer.put("/v1/pause", json={"reason": "viewers may not"})
        assert refused.status_code == 403 and refused.headers["content-type"] == "application/problem+json"
        assert tenant.get("/v1/pause").status_code == tenant.put("/v1/pause").status_code == 401
        assert op.get("/v1/dead-letters").status_code == 401  # an operator's key is no tenant's
        paused = op.put("/v1/pause", json={"reason": "provider incident"}).json()
        again = op.put("/v1/pause", json={"reason": "later"}).json()
        state = pipeline.clients.redis.get(pipeline.clients.keys.paused())
        read = viewer.get("/v1/pause").json()
        resumed = op.delete("/v1/pause").json()
        idle = op.delete("/v1/pause").json()
        nul = op.put("/v1/pause", json={"reason": "a\x00b"})
    assert (paused["paused"], paused["changed"], paused["by"], paused["reason"]) == (
        True, True, "ann@example.test", "provider incident")  # fmt: skip
    assert (again["changed"], again["reason"]) == (False, "provider incident")  # the first pause wins
    assert state is not None and read["paused"] is True and read["by"] == "ann@example.test"
    assert (resumed["paused"], resumed["changed"], resumed["reason"]) == (False, True, "provider incident")
    assert (idle["paused"], idle["changed"]) == (False, False)
    assert nul.status_code == 422
    assert pipeline.clients.redis.get(pipeline.clients.keys.paused()) is None
    with api.db.read() as conn:
        entries = audit.page(conn, actor="ann@example.test")
    assert [(e.action, e.count) for e in reversed(entries)] == [
        ("pipeline.pause", 1), ("pipeline.pause", 0), ("pipeline.resume", 1), ("pipeline.resume", 0)]  # fmt: skip


def test_a_revoked_or_unknown_operator_key_is_refused(api: LiveApi) -> None:
    key = _operator(api, "gone@example.test", "operator")
    with api.db.write() as conn:
        operators.revoke(conn, "gone@example.test")
    with api.client(key) as gone, api.client("cso_not-a-key") as unknown:
        assert gone.put("/v1/pause").status_code == unknown.get("/v1/pause").status_code == 401


def test_redis_unreachable_is_503_and_nothing_is_audited(pipeline: Pipeline) -> None:
    down = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    services = replace(services_from_clients(pipeline.clients), pause=PauseSwitch(down, pipeline.clients.keys))
    with serving(services) as api:
        ann = _operator(api, "ann@example.test", "operator")
        with api.client(ann) as op:
            answers = [op.get("/v1/pause"), op.put("/v1/pause", json={"reason": "incident"}), op.delete("/v1/pause")]
    for answer in answers:
        assert answer.status_code == 503 and answer.headers["retry-after"] == "5", answer.text
        assert answer.json()["detail"] == "Redis, which holds the pause switch, is unreachable (ConnectionError)"
    with api.db.read() as conn:
        assert audit.page(conn, actor="ann@example.test") == []
