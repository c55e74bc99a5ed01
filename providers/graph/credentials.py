"""A Graph account's credentials and options, validated (at ``accounts add`` and before every call).

``account.credentials`` is one of (JSON)::

    {"type": "client_credentials", "tenant_id", "client_id", "client_secret", "authority"?}
    {"type": "client_credentials", "tenant_id", "client_id", "certificate_pem", "thumbprint", "authority"?}
    {"type": "refresh_token", "tenant_id", "client_id", "client_secret"?, "refresh_token", "authority"?}

``authority`` defaults to ``https://login.microsoftonline.com`` (the emulator gives its own https URL).
``account.options``: ``calendar`` (optional): the id of the calendar to create events in (default: the
mailbox's primary calendar). Problems raise :class:`~calsync.core.model.errors.ConfigurationError` naming
the field, never a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import Field, RootModel, SecretStr, field_validator, model_validator

from calsync.core.model.account_rules import is_smtp_address
from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.providers.accounts import Fields, fingerprint, secret_values, url_check, validated

DEFAULT_AUTHORITY = "https://login.microsoftonline.com"


def _https(value: str) -> str:
    return url_check(value, https_only=True, example=DEFAULT_AUTHORITY).rstrip("/")


class _Base(Fields):
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


class _Login(RootModel[Annotated[AppLogin | DelegatedLogin, Field(discriminator="type")]]):
    """Either login, told apart by its ``type``."""


class _Options(Fields):
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


def read_graph_account(account: Account) -> GraphAccount:
    """The account's login and options, validated, with a fingerprint that changes when either does."""
    where = f"Graph account {account.id}"
    if not is_smtp_address(account.address):
        raise ConfigurationError(f"{where}: address must be the mailbox's SMTP address or UPN")
    login = validated(_Login, account.credentials, where, "credentials").root
    options = validated(_Options, account.options, where, "options")
    fingerprinted = fingerprint(account.address, account.credentials, account.options)
    return GraphAccount(login, options.calendar, fingerprinted, secret_values(account.credentials))


#: Refusing an account whose options or credentials cannot be read (at ``accounts add``) is reading them.
check_account = read_graph_account
