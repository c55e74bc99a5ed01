"""Every row of providers.google.classification.CLASSIFICATION, provoked for real against the emulator."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from google.auth.exceptions import RefreshError

from calsync.core.model.calendar import Account
from calsync.core.model.errors import CalsyncError
from calsync.providers.google.classification import CLASSIFICATION, QUOTA_RETRY_AFTER, classify
from calsync.providers.google.provider import GoogleProvider
from tests.providers.google.gcal_support import Emulator, google_adapter, make_event, target_for


@dataclass
class Scene:
    """What a case may touch: the shared emulator, the default adapter and account, and extra fixtures on demand."""

    emulator: Emulator
    provider: GoogleProvider
    account: Account
    request: pytest.FixtureRequest

    def private(self, timeout: float = 0.5) -> tuple[GoogleProvider, Account, Emulator]:
        """An adapter with a short timeout on an emulator of its own (delayed requests outlive the test)."""
        emulator: Emulator = self.request.getfixturevalue("private_emulator")
        account = dataclasses.replace(self.account, credentials=emulator.user_credentials())
        return google_adapter(emulator.settings(provider_timeout=timeout)), account, emulator


Arrange = Callable[[Scene], tuple[GoogleProvider, Account] | None]


@dataclass(frozen=True)
class Case:
    """One way to provoke a row; ``retry_after`` is the hint the raised error must carry (when checked)."""

    id: str
    row: str
    arrange: Arrange
    retry_after: float | type[Any] | None = object
    event: dict[str, Any] = dataclasses.field(default_factory=dict)


def fault(**rule: Any) -> Arrange:
    """Arrange a fault rule on the shared emulator."""

    def arrange(scene: Scene) -> None:
        scene.emulator.fault(**rule)

    return arrange


def revoke(scene: Scene) -> None:
    scene.emulator.control("POST", "revoke", {"refresh_token": scene.account.credentials["refresh_token"]})


def api_timeout(scene: Scene) -> tuple[GoogleProvider, Account]:
    provider, account, emulator = scene.private()
    emulator.fault(path="/events$", delay_ms=2000, status=503)
    return provider, account


def token_timeout(scene: Scene) -> tuple[GoogleProvider, Account]:
    provider, account, emulator = scene.private()
    emulator.fault(path="^/token$", delay_ms=2000, status=503)
    return provider, account


def refused(scene: Scene) -> tuple[GoogleProvider, Account]:
    port: int = scene.request.getfixturevalue("closed_port")
    nowhere = f"http://127.0.0.1:{port}"
    credentials = {
        **scene.emulator.user_credentials(),
        "token_uri": f"{nowhere}/token",
        "token": "ya29.cached",  # still valid: the API call itself meets the closed port
        "expiry": "2099-01-01T00:00:00Z",
    }
    provider = google_adapter(scene.emulator.settings(google_api_endpoint=f"{nowhere}/calendar/v3/"))
    return provider, dataclasses.replace(scene.account, credentials=credentials)


EVENTS = "/events$"
TOKEN = "^/token$"
#: Google's documented body (``errors[]`` only) and the newer one (``status`` + ``details[]`` as well).
STYLES = ("documented", "details")


def by_reason(row: str, status: int, retry_after: float | type[Any] | None = object) -> list[Case]:
    """A reason row provoked in both body shapes; the shape's ``status`` (e.g. PERMISSION_DENIED) must not matter."""
    return [
        Case(f"{status}-{row}-{style}", row, fault(path=EVENTS, status=status, reason=row, style=style), retry_after)
        for style in STYLES
    ]


def error_style(style: str) -> Arrange:
    """Make every error the emulator answers itself use this body shape."""

    def arrange(scene: Scene) -> None:
        scene.emulator.control("POST", "config", {"error_style": style})

    return arrange


PROJECT_QUOTA = (
    "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service "
    "'calendar-json.googleapis.com' for consumer 'project_number:123456'."
)

CASES = [
    Case(
        "429-project-quota",
        "per-project quota",
        fault(path=EVENTS, status=429, message=PROJECT_QUOTA, retry_after=20),
        retry_after=20,
    ),
    Case("429-retry-after", "429 too many requests", fault(path=EVENTS, status=429, retry_after=7), retry_after=7),
    Case("429-no-hint", "429 too many requests", fault(path=EVENTS, status=429), retry_after=None),
    *by_reason("rateLimitExceeded", 403),
    *by_reason("userRateLimitExceeded", 403),
    Case(
        "403-userRateLimitExceeded-retry-after",
        "userRateLimitExceeded",
        fault(path=EVENTS, status=403, reason="userRateLimitExceeded", style="details", retry_after=30),
        retry_after=30,
    ),
    *by_reason("quotaExceeded", 403, retry_after=QUOTA_RETRY_AFTER),
    # Google's real body for a read-only calendar: no status; it used to be retried to exhaustion.
    *by_reason("requiredAccessLevel", 403, retry_after=None),
    *by_reason("forbiddenForNonOrganizer", 403),
    *by_reason("forbiddenForServiceAccounts", 403),
    *by_reason("insufficientPermissions", 403),
    *by_reason("notACalendarUser", 403),
    *by_reason("cannotChangeOrganizer", 403),
    Case("403-forbidden", "403 any other reason", fault(path=EVENTS, status=403)),
    Case(
        "403-insufficient-scopes",
        "403 any other reason",
        fault(path=EVENTS, status=403, message="Request had insufficient authentication scopes.", style="status_only"),
    ),
    Case("401-after-refresh", "401 after refresh", fault(path=EVENTS, status=401)),
    *[
        Case(
            f"400-timeRangeEmpty-{style}",
            "timeRangeEmpty",
            error_style(style),
            event={"end": dt.datetime(2026, 12, 1, 8)},
        )
        for style in STYLES
    ],
    *by_reason("required", 400),
    *by_reason("invalid", 400),
    Case("400-badRequest", "400 any other reason", fault(path=EVENTS, status=400)),
    *by_reason("deleted", 410),
    *by_reason("fullSyncRequired", 410),
    Case("404-calendar", "404/410 calendar or event gone", fault(path=EVENTS, status=404)),
    Case("500", "5xx server error", fault(path=EVENTS, status=500)),
    Case("503-retry-after", "5xx server error", fault(path=EVENTS, status=503, retry_after=5), retry_after=5),
    Case("502-html", "5xx server error", fault(path=EVENTS, status=502, style="html")),
    Case("revoked-refresh-token", "token grant refused", revoke),
    Case("invalid_client", "token grant refused", fault(path=TOKEN, status=401, reason="invalid_client")),
    Case("unauthorized_client", "token grant refused", fault(path=TOKEN, status=400, reason="unauthorized_client")),
    Case("token-502-html", "token endpoint failure", fault(path=TOKEN, status=502, style="html")),
    # JSON 5xx: google-auth itself tries three times, sleeping ~1 s and ~2 s (docs/notes/google-calendar.md).
    Case("token-503-json", "token endpoint failure", fault(path=TOKEN, status=503)),
    Case("api-timeout", "timeout", api_timeout),
    Case("token-timeout", "timeout", token_timeout),
    Case("dropped-connection", "connection failure", fault(path=EVENTS, drop=True)),
    Case("connection-refused", "connection failure", refused),
    Case("unexpected-status", "anything else", fault(path=EVENTS, status=418)),
]


def test_every_row_has_a_case() -> None:
    assert [row.name for row in CLASSIFICATION] == list(dict.fromkeys(case.row for case in CASES))
    reason_rows = {row.name for row in CLASSIFICATION if row.name in row.codes}
    shapes = {(case.row, style) for case in CASES for style in STYLES if case.id.endswith(f"-{style}")}
    assert shapes == {(row, style) for row in reason_rows for style in STYLES}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_classification_row(
    case: Case, emulator: Emulator, provider: GoogleProvider, account: Account, request: pytest.FixtureRequest
) -> None:
    row = next(row for row in CLASSIFICATION if row.name == case.row)
    arranged = case.arrange(Scene(emulator, provider, account, request))
    provider, account = arranged or (provider, account)
    event = make_event(**case.event)
    with pytest.raises(CalsyncError) as caught:
        provider.upsert(account, event, target_for(event, account))
    assert type(caught.value) is row.error
    assert f"({row.name})" in str(caught.value)
    if case.retry_after is not object:
        assert getattr(caught.value, "retry_after", None) == case.retry_after


def test_a_refused_grant_names_its_code_once() -> None:
    body = {"error": "invalid_grant", "error_description": "Token has been expired or revoked."}
    message = str(classify(RefreshError("invalid_grant: Token has been expired or revoked.", body), "upsert"))
    assert message.endswith("(token grant refused): invalid_grant: Token has been expired or revoked.")
    assert message.count("invalid_grant") == 1
