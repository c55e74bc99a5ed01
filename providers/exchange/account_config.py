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

from dataclasses import dataclass
from typing import Any, Literal

from exchangelib import BASIC, NTLM, OAUTH2, Credentials, OAuth2Credentials
from pydantic import Field, SecretStr, field_validator, model_validator

from calsync.core.model.account_rules import is_smtp_address
from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.providers.accounts import Fields, fingerprint, secret_values, url_check, validated

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
    return None if value is None else url_check(value, https_only=False, example=_EXAMPLE)


_EXAMPLE = "https://mail.example.com/EWS/Exchange.asmx"


class _Options(Fields):
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


class _PasswordLogin(Fields):
    username: str = Field(min_length=1)
    password: SecretStr = Field(min_length=1)


class _ClientLogin(Fields):
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
    secrets: tuple[str, ...]  # the login's secret values, masked in every message about the account

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


def read_account_config(account: Account) -> AccountConfig:
    """The account's options and credentials, validated, with a fingerprint that changes when either does."""
    where = f"Exchange account {account.id}"
    if not is_smtp_address(account.address):
        raise ConfigurationError(f"{where}: address must be the mailbox's SMTP address")
    options, credentials = account.options, account.credentials
    parsed = validated(_Options, options, where, "options")
    login = validated(
        _ClientLogin if parsed.auth_type == "oauth2" else _PasswordLogin, credentials, where, "credentials"
    )
    return AccountConfig(parsed, login, fingerprint(account.address, credentials, options), secret_values(credentials))


#: Refusing an account whose options or credentials cannot be read (at ``accounts add``) is reading them.
check_account = read_account_config
