"""An Exchange account's options and credentials, validated, and the exchangelib credentials they make.

``account.address`` is the mailbox. ``account.options`` (not secret)::

    {"server_url": "https://mail.example.com/EWS/Exchange.asmx",  # required unless autodiscover
     "auth_type": "basic" | "ntlm" | "oauth2",                      # required: no auth probing
     "access_type": "delegate" | "impersonation",                   # default: impersonation for
                                                                    #   oauth2, else delegate
     "autodiscover": false}                                         # true: look the endpoint up
                                                                    #   (exchangelib's own probes:
                                                                    #   serialized per process, 10 s
                                                                    #   each; prefer server_url)

``account.credentials`` (secret), for basic/ntlm ``{"username", "password"}`` (``DOMAIN\\user`` or
a UPN), for oauth2 (client-credentials grant, scope ``https://outlook.office365.com/.default``)
``{"client_id", "client_secret", "tenant_id", "token_url"?}`` where ``token_url`` defaults to
Azure AD's ``https://login.microsoftonline.com/{tenant_id}/oauth2/v2.0/token``. Unknown keys, missing
values or a wrong type raise :class:`~calsync.core.model.errors.ConfigurationError` naming the key, never a value.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from exchangelib import BASIC, NTLM, OAUTH2, Credentials, OAuth2Credentials
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from calsync.core.model.account_rules import is_smtp_address
from calsync.core.model.account_settings import settings_per_account
from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.core.model.validation_wording import field_message

_AUTH_TYPES: dict[str, str] = {"basic": BASIC, "ntlm": NTLM, "oauth2": OAUTH2}


class _TokenEndpointCredentials(OAuth2Credentials):  # type: ignore[misc]
    """Client credentials whose token endpoint is configurable (exchangelib hard-codes Azure AD's)."""

    def __init__(self, *, token_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._token_url = token_url

    @property
    def token_url(self) -> str:
        """Where the client-credentials grant is posted."""
        return self._token_url


def _http_url(value: str | None) -> str | None:
    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http(s) URL such as https://mail.example.com/EWS/Exchange.asmx")
    return value


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    server_url: str | None = None
    auth_type: Literal["basic", "ntlm", "oauth2"]
    access_type: Literal["delegate", "impersonation"] | None = None
    autodiscover: bool = False
    max_concurrency: int | None = Field(default=None, ge=1, strict=True)  # traffic control's, per account

    _url = field_validator("server_url")(_http_url)

    @model_validator(mode="after")
    def _endpoint_known(self) -> _Options:
        if not self.server_url and not self.autodiscover:
            raise ValueError("server_url is required unless autodiscover is true")
        return self


#: The options an Exchange account may have (``accounts add`` refuses any other, naming these).
OPTIONS = frozenset(_Options.model_fields)


class _PasswordLogin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str = Field(min_length=1)
    password: SecretStr = Field(min_length=1)


class _ClientLogin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    client_id: str = Field(min_length=1)
    client_secret: SecretStr = Field(min_length=1)
    tenant_id: str = Field(min_length=1)
    token_url: str | None = None

    _url = field_validator("token_url")(_http_url)


@dataclass(frozen=True)
class AccountConfig:
    """An account's validated options and credentials, plus what identifies them without revealing them."""

    options: _Options
    login: _PasswordLogin | _ClientLogin
    fingerprint: str

    @property
    def oauth(self) -> bool:
        """True for the client-credentials grant (a bearer token), False for a password login."""
        return isinstance(self.login, _ClientLogin)

    @property
    def auth_type(self) -> str:
        """exchangelib's name of the configured authentication: no probing for it."""
        return _AUTH_TYPES[self.options.auth_type]

    @property
    def access_type(self) -> str:
        """Delegate or impersonation, as configured or by the login's kind."""
        # exchangelib's DELEGATE / IMPERSONATION constants are these very strings.
        return self.options.access_type or ("impersonation" if self.oauth else "delegate")

    @property
    def secrets(self) -> tuple[str, ...]:
        """The login's secret values, masked in every message about the account."""
        if isinstance(self.login, _ClientLogin):
            return (self.login.client_secret.get_secret_value(),)
        return (self.login.password.get_secret_value(),)

    def credentials(self) -> Any:
        """exchangelib credentials for this login."""
        login = self.login
        if isinstance(login, _PasswordLogin):
            return Credentials(login.username, login.password.get_secret_value())
        token_url = login.token_url or f"https://login.microsoftonline.com/{login.tenant_id}/oauth2/v2.0/token"
        return _TokenEndpointCredentials(
            client_id=login.client_id,
            client_secret=login.client_secret.get_secret_value(),
            tenant_id=login.tenant_id,
            token_url=token_url,
        )


#: How many accounts' validated configurations a process keeps (a worker reads its account's on every job).
KEPT_CONFIGS = 1024


def _invalid(account_id: str, section: str, exc: ValidationError) -> ConfigurationError:
    # Built from locations and messages only: pydantic's own text would echo the (secret) input.
    problems = "; ".join(f"{'.'.join([section, *(str(p) for p in err['loc'])])}: {field_message(err)}"
                         for err in exc.errors())  # fmt: skip
    return ConfigurationError(f"Exchange account {account_id}: {problems}")


def _read(account_id: str, address: str, options: dict[str, Any], credentials: dict[str, Any]) -> AccountConfig:
    if not is_smtp_address(address):
        raise ConfigurationError(f"Exchange account {account_id}: address must be the mailbox's SMTP address")
    try:
        parsed = _Options.model_validate(options)
    except ValidationError as exc:
        raise _invalid(account_id, "options", exc) from None
    model: type[_PasswordLogin | _ClientLogin] = _ClientLogin if parsed.auth_type == "oauth2" else _PasswordLogin
    try:
        login = model.model_validate(credentials)
    except ValidationError as exc:
        raise _invalid(account_id, "credentials", exc) from None
    identity = {"address": address.lower(), "options": options, "login": credentials}
    fingerprint = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
    return AccountConfig(parsed, login, fingerprint)


_read_kept = settings_per_account(_read, maxsize=KEPT_CONFIGS)


def read_account_config(account: Account) -> AccountConfig:
    """The account's options and credentials, validated, with a fingerprint that changes when either does.

    Kept per (id, address, options, credentials): pydantic's validation and the fingerprint's hash cost every job
    ≈ 1.7 % of an EWS create's CPU in the deployed worker. A changed value is a new key
    (core/model/account_settings.py).
    """
    return _read_kept(account)
