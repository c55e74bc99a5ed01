"""A Graph account's credentials and options, validated (at ``accounts add`` and before every call).

``account.credentials`` is one of (JSON)::

    {"type": "client_credentials", "tenant_id", "client_id", "client_secret", "authority"?}
    {"type": "client_credentials", "tenant_id", "client_id", "certificate_pem", "thumbprint", "authority"?}
    {"type": "refresh_token", "tenant_id", "client_id", "client_secret"?, "refresh_token", "authority"?}

``authority`` defaults to ``https://login.microsoftonline.com`` (the emulator gives its own https URL).
``account.options``: ``calendar`` (optional): the id of the calendar to create events in (default: the
mailbox's primary calendar). Problems raise :class:`~calsync.core.model.errors.ConfigurationError` naming
the field, never a value.

The adapter reads an account before every call, and an account's fields rarely change, so the validated
result of the last :data:`KEPT_ACCOUNTS` accounts is kept (core/model/account_settings.py, thread-safe), keyed by
everything it is derived from: id, address and the items (with their values' types) of the decrypted
credentials and of the options. Validation and the fingerprint were ~3 % of a Graph worker's CPU (py-spy,
issue 15); kept, a read costs 7 Python calls and 2-6 µs instead of 31 and 28-31 µs (2026-12-02, one
thread, a loaded VM). A changed field (a rotated refresh token, a new secret) is a new key, so it is
validated anew; errors are never kept.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from calsync.core.model.account_rules import is_smtp_address
from calsync.core.model.account_settings import settings_per_account
from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.core.model.validation_wording import field_message

DEFAULT_AUTHORITY = "https://login.microsoftonline.com"
#: How many accounts' validated logins are kept (one per account a worker syncs).
KEPT_ACCOUNTS = 1024
_SECRET_FIELDS = ("client_secret", "certificate_pem", "refresh_token")


def _https(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme != "https" or not parts.netloc:
        raise ValueError("must be an https URL such as https://login.microsoftonline.com")
    return value.rstrip("/")


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: str = Field(min_length=1)
    client_id: str = Field(min_length=1)
    authority: str = DEFAULT_AUTHORITY

    _authority = field_validator("authority")(_https)


class AppLogin(_Base):
    """App-only access (client-credentials grant) with a secret or a certificate."""

    type: Literal["client_credentials"]
    client_secret: SecretStr | None = Field(default=None, min_length=1)
    certificate_pem: SecretStr | None = Field(default=None, min_length=1)
    thumbprint: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _one_credential(self) -> AppLogin:
        if (self.client_secret is None) == (self.certificate_pem is None):
            raise ValueError("give exactly one of client_secret or certificate_pem (+ thumbprint)")
        if self.certificate_pem is not None and self.thumbprint is None:
            raise ValueError("thumbprint is required with certificate_pem")
        return self


class DelegatedLogin(_Base):
    """Delegated access: a user's refresh token (rotated tokens are written back to the account)."""

    type: Literal["refresh_token"]
    client_secret: SecretStr | None = Field(default=None, min_length=1)
    refresh_token: SecretStr = Field(min_length=1)


Login = Annotated[AppLogin | DelegatedLogin, Field(discriminator="type")]
_LOGIN: TypeAdapter[AppLogin | DelegatedLogin] = TypeAdapter(Login)


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    calendar: str | None = Field(default=None, min_length=1)
    max_concurrency: int | None = Field(default=None, ge=1, strict=True)  # traffic control's, per account


#: The options a Graph account may have (``accounts add`` refuses any other, naming these).
OPTIONS = frozenset(_Options.model_fields)


@dataclass(frozen=True)
class GraphAccount:
    """An account's validated login and options, and a fingerprint that changes when either does."""

    login: AppLogin | DelegatedLogin
    calendar: str | None
    fingerprint: str
    secrets: tuple[str, ...]

    def credential(self) -> str | dict[str, str] | None:
        """The ``client_credential`` msal takes: a secret, a certificate, or None (public delegated client)."""
        login = self.login
        if isinstance(login, AppLogin) and login.certificate_pem is not None:
            return {"private_key": login.certificate_pem.get_secret_value(), "thumbprint": login.thumbprint or ""}
        return login.client_secret.get_secret_value() if login.client_secret is not None else None


_TAGS = ("client_credentials", "refresh_token")


def _problems(section: str, exc: ValidationError) -> str:
    # Locations and messages only: pydantic's own text would echo the (secret) input.
    found = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        if len(loc) > 1 and loc[0] in _TAGS:
            loc = loc[1:]
        found.append(f"{'.'.join([section, *loc])}: {field_message(err)}")
    return "; ".join(found)


def fingerprint_of(address: str, credentials: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """Identifies a login without revealing it."""
    identity = {"address": address.lower(), "credentials": dict(credentials), "options": dict(options)}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def read_graph_account(account: Account) -> GraphAccount:
    """The account's login and options, validated (kept per account identity: validation is a per-call cost)."""
    return _kept(account)


def _read(account_id: str, address: str, given_options: dict[str, Any], credentials: dict[str, Any]) -> GraphAccount:
    if not is_smtp_address(address):
        raise ConfigurationError(f"Graph account {account_id}: address must be the mailbox's SMTP address or UPN")
    try:
        login = _LOGIN.validate_python(credentials)
    except ValidationError as exc:
        raise ConfigurationError(f"Graph account {account_id}: {_problems('credentials', exc)}") from None
    try:
        options = _Options.model_validate(given_options)
    except ValidationError as exc:
        raise ConfigurationError(f"Graph account {account_id}: {_problems('options', exc)}") from None
    secrets = tuple(str(credentials[f]) for f in _SECRET_FIELDS if credentials.get(f))
    fingerprint = fingerprint_of(address, credentials, given_options)
    return GraphAccount(login, options.calendar, fingerprint, secrets)


_kept = settings_per_account(_read, maxsize=KEPT_ACCOUNTS)
