"""An account's Google credentials: built from Google's own JSON, scoped, and cached per account and secret.

``account.credentials`` is Google's JSON, as a mapping:

- ``authorized_user``: ``client_id``, ``client_secret``, ``refresh_token``, optional ``token_uri`` (honoured,
  although google-auth's ``from_authorized_user_info`` ignores it), optional cached ``token``/``expiry``;
  ``type`` may be absent (google-auth-oauthlib's ``to_json()`` omits it);
- ``service_account``: the key file (``client_email``, ``private_key``, ``token_uri``, ...).

``account.options`` (all optional):

- ``calendar_id``: the calendar to write into (default ``account.address``, i.e. the user's primary calendar);
- ``subject``: the user a service account impersonates through domain-wide delegation (default
  ``account.address``);
- ``delegate``: ``false`` makes a service account act as itself instead of impersonating (default ``true``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from google.auth.credentials import Credentials
from google.auth.exceptions import GoogleAuthError
from google.oauth2 import credentials as user_credentials
from google.oauth2 import service_account

from calsync.core.model.account_rules import is_google_calendar_id, is_smtp_address
from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.core.model.ids import quoted

SCOPES = ("https://www.googleapis.com/auth/calendar.events",)


def account_option(account: Account, name: str, kind: type, default: Any) -> Any:
    """One of the account's options, checked for its type (a wrong one is a configuration error)."""
    value = account.options.get(name, default)
    if not isinstance(value, kind):
        raise ConfigurationError(f"Google account {account.id}: option {name!r} must be a {kind.__name__}")
    return value


def _require(info: Mapping[str, Any], fields: Collection[str], where: str) -> None:
    missing = [f for f in fields if not isinstance(info.get(f), str) or not info[f]]
    if missing:
        raise ConfigurationError(f"{where} lack {', '.join(missing)}")


def build_credentials(account: Account) -> Credentials:
    """google-auth credentials for the account, scoped explicitly (else a service account asks for 18 scopes)."""
    info = account.credentials
    kind = info.get("type", "authorized_user" if "refresh_token" in info else None)
    where = f"Google account {account.id}: {kind} credentials"
    try:
        if kind == "authorized_user":
            _require(info, ("client_id", "client_secret", "refresh_token"), where)
            user: user_credentials.Credentials = user_credentials.Credentials.from_authorized_user_info(  # type: ignore[no-untyped-call]
                dict(info), scopes=list(SCOPES)
            )
            if info.get("token_uri"):
                user = user.with_token_uri(info["token_uri"])
            return user
        if kind == "service_account":
            _require(info, ("client_email", "private_key", "token_uri"), where)
            robot: service_account.Credentials = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
                dict(info), scopes=list(SCOPES)
            )
            if account_option(account, "delegate", bool, True):
                subject = account_option(account, "subject", str, account.address)
                delegated: Credentials = robot.with_subject(subject)  # type: ignore[no-untyped-call]
                return delegated
            return robot
    except (ValueError, TypeError, GoogleAuthError) as exc:
        # Only the class name: google-auth's messages may quote the key material.
        raise ConfigurationError(f"{where} are malformed ({type(exc).__name__})") from None
    raise ConfigurationError(
        f"Google account {account.id}: credentials must be Google's authorized_user or service_account JSON"
    )


_OPTIONS: dict[str, type] = {"calendar_id": str, "subject": str, "delegate": bool}
#: The options a Google account may have (``accounts add`` refuses any other, naming these); max_concurrency
#: is traffic control's, checked for every provider by the registry.
OPTIONS = frozenset({*_OPTIONS, "max_concurrency"})


def check_account(account: Account) -> None:
    """Refuse mistyped options, a calendar id or subject that cannot be one, and credentials that are not Google's
    JSON (at ``accounts add``; unknown option names are refused before, by the registry)."""
    for name, kind in _OPTIONS.items():
        account_option(account, name, kind, kind())
    where = f"Google account {account.id}"
    calendar_id = account.options.get("calendar_id")
    if calendar_id is not None and not is_google_calendar_id(calendar_id):
        raise ConfigurationError(f"{where}: option calendar_id {quoted(calendar_id)} is not a calendar id")
    subject = account.options.get("subject")
    if subject is not None and not is_smtp_address(subject):
        raise ConfigurationError(f"{where}: option subject {quoted(subject)} is not a user's email address")
    built = build_credentials(account)  # whatever option delegate (a bool: typed above) says, they must be valid
    impersonates = isinstance(built, service_account.Credentials) and account.options.get("delegate", True)
    # "primary" and the ids of secondary, resource and public calendars (…@group.calendar.google.com,
    # …@resource.calendar.google.com, …@group.v.calendar.google.com) name no user to impersonate.
    a_user = is_smtp_address(account.address) and not account.address.lower().endswith("calendar.google.com")
    if impersonates and subject is None and not a_user:
        raise ConfigurationError(
            f"{where}: a service account acts as the user named by option subject (default: the address), and "
            f"{quoted(account.address)} is no user: add --option subject=USER (or --option delegate=false)"
        )
