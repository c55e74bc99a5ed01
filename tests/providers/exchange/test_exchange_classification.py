"""Every row of the adapter's error table, provoked for real against the emulator through exchangelib."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import pytest

from calsync.core.model.errors import (
    AuthRevoked,
    CalsyncError,
    ConfigurationError,
    EntityNotFound,
    Forbidden,
    InvalidRequest,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    TemporaryError,
)
from calsync.providers.exchange.classification import CLASSIFICATION
from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import ExchangeRig, MakeAccount, MakeEvent, MakeProvider, MakeTarget


@dataclasses.dataclass(frozen=True)
class Scenario:
    """How to make the server (or the library) fail so that one table row applies."""

    row: str
    expected: type[CalsyncError]
    fault: dict[str, Any] | None = None
    operation: Literal["create", "update", "delete"] = "create"
    account: dict[str, Any] = dataclasses.field(default_factory=dict)
    directory: dict[str, Any] | None = None
    provider_timeout: float | None = None
    oauth_over_http: bool = True
    tls: bool = False
    retry_after: float | None = None

    @property
    def id(self) -> str:
        fault = self.fault or {}
        how = fault.get("reason") or fault.get("status") or ("delay" if "delay_ms" in fault else "")
        return f"{self.row}-{how or ('drop' if fault else 'semantic')}"


def item_fault(operation: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"operation": operation, "reason": reason, **extra}


def soap_fault(operation: str, reason: str, **extra: Any) -> dict[str, Any]:
    return {"operation": operation, "reason": reason, "level": "fault", **extra}


OAUTH: dict[str, Any] = {"auth_type": "oauth2", "access_type": None}
TOKEN_PATH = r"/oauth2/v2\.0/token$"

SCENARIOS = [
    Scenario(
        "ErrorServerBusy", RateLimited, soap_fault("CreateItem", "ErrorServerBusy", retry_after=2.5), retry_after=2.5
    ),
    Scenario("ErrorTooManyObjectsOpened", RateLimited, soap_fault("FindItem", "ErrorTooManyObjectsOpened")),
    Scenario("ErrorExceededConnectionCount", RateLimited, item_fault("FindItem", "ErrorExceededConnectionCount")),
    Scenario("HTTP 429", RateLimited, {"operation": "CreateItem", "status": 429, "retry_after": 7}, retry_after=7),
    Scenario(
        "ReadTimeout", ProviderTimeout, {"operation": "FindItem", "delay_ms": 1500, "times": 1}, provider_timeout=0.3
    ),
    Scenario("ErrorTimeoutExpired", ProviderUnavailable, item_fault("CreateItem", "ErrorTimeoutExpired")),
    Scenario("ConnectionError", ProviderUnavailable, {"operation": "CreateItem", "drop": True}),
    Scenario(
        "ConnectionError",
        ProviderUnavailable,
        account={**OAUTH, "credentials": {"token_url": "http://127.0.0.1:9/example-tenant/oauth2/v2.0/token"}},
    ),
    Scenario(
        "ErrorInternalServerTransientError",
        ProviderUnavailable,
        soap_fault("CreateItem", "ErrorInternalServerTransientError"),
    ),
    Scenario("ErrorInternalServerTransientError", ProviderUnavailable, {"operation": "CreateItem", "status": 503}),
    Scenario("ErrorInternalServerError", ProviderUnavailable, item_fault("CreateItem", "ErrorInternalServerError")),
    Scenario(
        "ErrorMailboxStoreUnavailable", ProviderUnavailable, item_fault("CreateItem", "ErrorMailboxStoreUnavailable")
    ),
    Scenario("ErrorConnectionFailed", ProviderUnavailable, item_fault("GetFolder", "ErrorConnectionFailed")),
    Scenario(
        "ErrorConnectionFailedTransientError",
        ProviderUnavailable,
        item_fault("CreateItem", "ErrorConnectionFailedTransientError"),
    ),
    Scenario("ErrorMailboxMoveInProgress", ProviderUnavailable, item_fault("FindItem", "ErrorMailboxMoveInProgress")),
    Scenario("ErrorADUnavailable", ProviderUnavailable, item_fault("CreateItem", "ErrorADUnavailable")),
    Scenario("HTTP 500", ProviderUnavailable, {"operation": "CreateItem", "status": 500}),
    Scenario("HTTP 502", ProviderUnavailable, {"operation": "CreateItem", "status": 502}),
    Scenario("HTTP 504", ProviderUnavailable, {"operation": "DeleteItem", "status": 504}, operation="delete"),
    Scenario(
        "OAuth2Error", ProviderUnavailable, {"path": TOKEN_PATH, "reason": "temporarily_unavailable"}, account=OAUTH
    ),
    Scenario(
        "ErrorIrresolvableConflict",
        TemporaryError,
        item_fault("UpdateItem", "ErrorIrresolvableConflict", times=2),
        operation="update",
    ),
    Scenario(
        "ErrorInvalidChangeKey",
        TemporaryError,
        item_fault("UpdateItem", "ErrorInvalidChangeKey", times=2),
        operation="update",
    ),
    Scenario(
        "ErrorStaleObject", TemporaryError, item_fault("UpdateItem", "ErrorStaleObject", times=2), operation="update"
    ),
    Scenario("UnauthorizedError", AuthRevoked, account={"credentials": {"password": "wrong-password-123"}}),
    Scenario(
        "InvalidClientError", AuthRevoked, account={**OAUTH, "credentials": {"client_secret": "wrong-secret-456"}}
    ),
    Scenario("UnauthorizedClientError", AuthRevoked, account={**OAUTH, "credentials": {"client_id": "nobody"}}),
    Scenario("InvalidGrantError", AuthRevoked, {"path": TOKEN_PATH, "reason": "invalid_grant"}, account=OAUTH),
    Scenario("ErrorAccessDenied", Forbidden, account={"login": "alice", "access_type": "delegate"}),
    Scenario("ErrorImpersonateUserDenied", Forbidden, account={"login": "alice", "access_type": "impersonation"}),
    Scenario("ErrorImpersonationFailed", Forbidden, item_fault("GetFolder", "ErrorImpersonationFailed")),
    Scenario("HTTP 403", Forbidden, {"operation": "GetFolder", "status": 403}),
    Scenario("ErrorQuotaExceeded", Forbidden, item_fault("CreateItem", "ErrorQuotaExceeded")),
    Scenario("ErrorNonExistentMailbox", EntityNotFound, directory={"mailboxes": ["somebody@example.com"]}),
    Scenario(
        "ErrorNonExistentMailbox",
        EntityNotFound,
        account={"access_type": "delegate"},
        directory={"mailboxes": ["svc@example.com"]},
    ),
    Scenario("ErrorFolderNotFound", EntityNotFound, item_fault("GetFolder", "ErrorFolderNotFound")),
    Scenario("ErrorItemNotFound", EntityNotFound, item_fault("FindItem", "ErrorItemNotFound")),
    Scenario("HTTP 404", ConfigurationError, account={"server_path": "/EWS/Exchange.asmx/typo"}),
    Scenario("RedirectError", ConfigurationError, {"operation": "GetFolder", "status": 302}),
    Scenario("SSLError", ConfigurationError, tls=True),
    Scenario("InsecureTransportError", ConfigurationError, account=OAUTH, oauth_over_http=False),
    Scenario("InvalidScopeError", ConfigurationError, {"path": TOKEN_PATH, "reason": "invalid_scope"}, account=OAUTH),
    Scenario(
        "ErrorInvalidExchangeImpersonationHeaderData", ConfigurationError, account={**OAUTH, "access_type": "delegate"}
    ),
    Scenario(
        "ErrorInvalidSchemaVersionForMailboxVersion",
        ConfigurationError,
        soap_fault("FindItem", "ErrorInvalidServerVersion"),
    ),
    Scenario("ErrorCalendar", InvalidRequest, item_fault("CreateItem", "ErrorCalendarDurationIsTooLong")),
    Scenario(
        "ErrorCalendar", InvalidRequest, item_fault("UpdateItem", "ErrorCalendarIsNotOrganizer"), operation="update"
    ),
    Scenario("ErrorSchemaValidation", InvalidRequest, soap_fault("CreateItem", "ErrorSchemaValidation")),
    Scenario(
        "ErrorInvalidExtendedProperty", InvalidRequest, item_fault("CreateItem", "ErrorInvalidExtendedPropertyValue")
    ),
    Scenario("ErrorInvalidPropertyRequest", InvalidRequest, item_fault("CreateItem", "ErrorInvalidPropertyRequest")),
    Scenario(
        "ErrorInvalidIdMalformed",
        InvalidRequest,
        item_fault("DeleteItem", "ErrorInvalidIdMalformed"),
        operation="delete",
    ),
]


#: Each code (a prefix for a family of codes) and status of the table, and the name of its row.
ROWS = {entry: row.name for row in CLASSIFICATION for entry in (*row.codes, *(f"HTTP {s}" for s in row.statuses or ()))}


def test_every_row_of_the_table_has_a_scenario() -> None:
    assert set(ROWS) == {s.row for s in SCENARIOS}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_classification_row(
    scenario: Scenario,
    emulator: RunningEmulator,
    ews: EwsControl,
    make_provider: MakeProvider,
    make_account: MakeAccount,
    make_event: MakeEvent,
    make_target: MakeTarget,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if scenario.oauth_over_http:
        monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")
    else:
        monkeypatch.delenv("OAUTHLIB_INSECURE_TRANSPORT", raising=False)
    settings = {} if scenario.provider_timeout is None else {"provider_timeout": scenario.provider_timeout}
    provider = make_provider(**settings)
    options = dict(scenario.account)
    server_path = options.pop("server_path", "/EWS/Exchange.asmx")
    base = emulator.url.replace("http://", "https://") if scenario.tls else emulator.url
    account = make_account("alpha@example.com", server_url=base + server_path, **options)
    event = make_event()
    target = make_target(account, event)
    if scenario.operation != "create":  # the item to update or delete exists before anything breaks
        ref = provider.upsert(account, event, target)
        target = dataclasses.replace(target, external_id=ref.external_id, etag=ref.etag)
    if scenario.directory is not None:
        ews.set_directory(
            {"users": {"svc@example.com": {"password": "svc-password", "impersonation": True}}, **scenario.directory}
        )
    if scenario.fault is not None:
        ews.add_fault(**scenario.fault)

    with pytest.raises(CalsyncError) as caught:
        if scenario.operation == "delete":
            provider.delete(account, target)
        else:
            provider.upsert(account, dataclasses.replace(event, version=2), target)

    error = caught.value
    assert type(error) is scenario.expected, str(error)
    assert f"failed ({ROWS[scenario.row]}): " in str(error)
    assert scenario.row in str(error)
    if scenario.retry_after is not None:
        assert isinstance(error, RateLimited) and error.retry_after == scenario.retry_after
    for secret in ("svc-password", "client-secret", "wrong-password-123", "wrong-secret-456"):
        assert secret not in str(error)
    if scenario.row == "ReadTimeout" and not ews.faults():
        ews.wait_for_requests("FindItem", 1)  # let the delayed request finish before the next test resets


def test_an_unknown_error_is_temporary_and_says_so(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple()
    ews.add_fault(operation="CreateItem", reason="ErrorFromTheFuture", level="fault")

    with pytest.raises(TemporaryError, match=r"failed \(anything else\): .*SOAPError") as caught:
        provider.upsert(account, event, target)
    assert type(caught.value) is TemporaryError
