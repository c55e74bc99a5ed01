"""Account disable/enable over HTTP: admin scope, only the key's tenant, the intake refuses a disabled account."""

from __future__ import annotations

from calsync.core.store import accounts
from tests.api.live import LiveApi
from tests.support import Pipeline, change


def test_disable_and_enable_an_account_of_the_tenant(api: LiveApi, pipeline: Pipeline) -> None:
    mine, theirs = pipeline.account(account_id="acc-mine"), pipeline.account("tenant-2", "acc-theirs")
    with api.client(api.key(scope="admin")) as http, api.client(api.key(scope="submit")) as submitter:
        refused = submitter.post(f"/v1/accounts/{mine}/disable")
        disabled, twice = http.post(f"/v1/accounts/{mine}/disable"), http.post(f"/v1/accounts/{mine}/disable")
        change_refused = submitter.post("/v1/changes", json=change([mine]))
        enabled = http.post(f"/v1/accounts/{mine}/enable")
        change_accepted = submitter.post("/v1/changes", json=change([mine]))
        foreign, missing = http.post(f"/v1/accounts/{theirs}/disable"), http.post("/v1/accounts/acc-none/enable")
    assert refused.status_code == 403
    assert disabled.status_code == twice.status_code == 200 and disabled.json()["status"] == "disabled"
    assert "credentials" not in disabled.json() and disabled.json()["account_id"] == mine
    assert change_refused.status_code == 422 and "disabled" in change_refused.text
    assert enabled.json()["status"] == "active" and change_accepted.status_code == 202
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["detail"].replace(theirs, "A") == missing.json()["detail"].replace("acc-none", "A")
    with pipeline.clients.db.read() as conn:
        assert accounts.get_summary(conn, theirs).status == "active"  # type: ignore[union-attr]


def test_an_account_being_removed_or_awaiting_reauthorization_is_a_conflict(api: LiveApi, pipeline: Pipeline) -> None:
    removing, reauth = pipeline.account(account_id="acc-removing"), pipeline.account(account_id="acc-reauth")
    with pipeline.clients.db.write() as conn:
        accounts.update_account(conn, removing, status="removing")
        accounts.update_account(conn, reauth, status="needs_reauth")
    with api.client(api.key(scope="admin")) as http:
        disable_removing, enable_reauth = (
            http.post(f"/v1/accounts/{removing}/disable"),
            http.post(f"/v1/accounts/{reauth}/enable"),
        )
        disable_reauth = http.post(f"/v1/accounts/{reauth}/disable")
    assert disable_removing.status_code == enable_reauth.status_code == 409
    assert enable_reauth.json()["type"] == "urn:calsync:problem:conflict" and "needs_reauth" in enable_reauth.text
    assert disable_reauth.json()["status"] == "disabled"
