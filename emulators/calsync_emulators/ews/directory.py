"""Who may call the EWS emulator and which mailboxes they reach: the directory, logins, tokens, access rules.

Modelled on Exchange (documented behaviour): Basic logins, Azure AD client-credentials tokens for apps
(``full_access_as_app``: they impersonate anyone), the ``ExchangeImpersonation`` header and the SOAP
faults for refused impersonation, item-level ``ErrorAccessDenied`` for delegate access. Our choices: the
directory format, the default logins, token lifetimes, and that NTLM is not emulated (it binds
authentication to a TCP connection, which the shared server does not expose). There is no autodiscover:
calsync configures exchangelib with ``autodiscover=False``.
"""

from __future__ import annotations

import base64
import binascii
import secrets
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs

from pydantic import BaseModel, ConfigDict, Field

from calsync_emulators.ews.soap import EwsError, T
from calsync_emulators.server import Request, Response


class UserSpec(BaseModel):
    """A Basic-auth login and what it may reach."""

    model_config = ConfigDict(extra="forbid")

    password: str
    impersonation: bool = False
    delegate_for: list[str] = Field(default_factory=list)


class ClientSpec(BaseModel):
    """An app registration for the client-credentials grant (full_access_as_app: impersonates anyone)."""

    model_config = ConfigDict(extra="forbid")

    secret: str
    tenant: str | None = None


class Directory(BaseModel):
    """Who may log in, and which mailboxes exist (None: every address)."""

    model_config = ConfigDict(extra="forbid")

    users: dict[str, UserSpec] = Field(default_factory=dict)
    clients: dict[str, ClientSpec] = Field(default_factory=dict)
    mailboxes: list[str] | None = None

    def user(self, name: str) -> UserSpec | None:
        """Usernames compare case-insensitively, as in Active Directory."""
        wanted = name.lower()
        return next((spec for key, spec in self.users.items() if key.lower() == wanted), None)

    def mailbox_exists(self, address: str) -> bool:
        """Whether the address has a mailbox."""
        return self.mailboxes is None or address.lower() in {m.lower() for m in self.mailboxes}


DEFAULT_DIRECTORY = Directory(
    users={
        "svc@example.com": UserSpec(password="svc-password", impersonation=True, delegate_for=["*"]),
        "alice@example.com": UserSpec(password="alice-password"),
    },
    clients={"calsync-client": ClientSpec(secret="client-secret", tenant="example-tenant")},
)

AuthScheme = Literal["basic", "bearer"]
Identity = tuple[str, AuthScheme, UserSpec | None]


@dataclass
class Caller:
    """Who sent a SOAP request, as whom it acts, and the request's log entry."""

    principal: str
    auth: AuthScheme
    user: UserSpec | None
    impersonating: str | None
    log: dict[str, Any] = field(default_factory=dict)

    @property
    def default_mailbox(self) -> str | None:
        """The mailbox a request without an explicit one addresses."""
        if self.impersonating:
            return self.impersonating
        return self.principal.lower() if "@" in self.principal else None


class Access:
    """The directory, the issued bearer tokens and the access rules; shares the app's lock."""

    def __init__(self, initial: Directory, lock: threading.RLock) -> None:
        self._initial = initial.model_copy(deep=True)
        self._lock = lock
        # Another token issuer whose app-only tokens EWS accepts too (the shared Entra of the Exchange server).
        self.bearer: Callable[[str], str | None] | None = None
        self.reset()

    def reset(self) -> None:
        """Restore the directory the app was created with and forget every token."""
        with self._lock:
            self.directory = self._initial.model_copy(deep=True)
            self._tokens: dict[str, tuple[str, float]] = {}

    def replace_directory(self, directory: Directory) -> None:
        """Replace who may log in and which mailboxes exist."""
        with self._lock:
            self.directory = directory

    def revoke_tokens(self) -> int:
        """Invalidate every issued bearer token; returns how many there were."""
        with self._lock:
            revoked = len(self._tokens)
            self._tokens.clear()
        return revoked

    def authenticate(self, request: Request) -> Identity | None:
        """The caller of a request (Basic login or bearer token), None when refused."""
        header = request.header("Authorization") or ""
        scheme, _, value = header.partition(" ")
        with self._lock:
            if scheme.lower() == "basic":
                try:
                    username, _, password = base64.b64decode(value).decode().partition(":")
                except (binascii.Error, UnicodeDecodeError):
                    return None
                user = self.directory.user(username)
                if user is None or not secrets.compare_digest(user.password, password):
                    return None
                return username, "basic", user
            if scheme.lower() == "bearer":
                token = self._tokens.get(value.strip())
                if token is None or token[1] < time.monotonic():
                    app = self.bearer(value.strip()) if self.bearer is not None else None
                    return None if app is None else (app, "bearer", None)
                return token[0], "bearer", None
        return None

    def token(self, request: Request, tenant: str) -> Response:
        """Serve the client-credentials grant of ``POST /{tenant}/oauth2/v2.0/token``."""
        form = {k: v[0] for k, v in parse_qs(request.body.decode(errors="replace")).items()}
        client_id, client_secret = form.get("client_id", ""), form.get("client_secret", "")
        basic = request.header("Authorization") or ""
        if basic.lower().startswith("basic "):
            try:
                client_id, _, client_secret = base64.b64decode(basic[6:]).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                client_id = client_secret = ""
        log: dict[str, Any] = {"operation": "token", "client_id": client_id}

        def refuse(status: int, error: str, text: str) -> Response:
            answer = Response.json(status, {"error": error, "error_description": text})
            answer.log = {**log, "outcome": error}
            return answer

        if form.get("grant_type") != "client_credentials":
            return refuse(400, "unsupported_grant_type", "Only client_credentials is supported.")
        with self._lock:
            client = self.directory.clients.get(client_id)
            if client is None:
                return refuse(400, "unauthorized_client", f"Application {client_id!r} was not found.")
            if client.tenant is not None and client.tenant != tenant:
                return refuse(400, "invalid_request", f"Tenant {tenant!r} not found.")
            if not secrets.compare_digest(client.secret, client_secret):
                return refuse(401, "invalid_client", "Invalid client secret provided.")
            token = secrets.token_urlsafe(24)
            self._tokens[token] = (client_id, time.monotonic() + 3600)
        answer = Response.json(
            200, {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}
        )
        answer.log = {**log, "outcome": "issued"}
        return answer

    def caller(self, header: ET.Element | None, identity: Identity) -> Caller:
        """Apply the ExchangeImpersonation header, or the SOAP fault Exchange answers for it."""
        principal, auth, user = identity
        impersonation = None if header is None else header.find(f"{T}ExchangeImpersonation")
        caller = Caller(principal, auth, user, None)
        if impersonation is None:
            if user is None:
                raise EwsError(
                    "ErrorInvalidExchangeImpersonationHeaderData",
                    "ExchangeImpersonation SOAP header must be present for this type of OAuth token.",
                    fault=True,
                )
            return caller
        address = (
            impersonation.findtext(f"{T}ConnectingSID/{T}PrimarySmtpAddress")
            or impersonation.findtext(f"{T}ConnectingSID/{T}SmtpAddress")
            or ""
        ).lower()
        if user is not None and not user.impersonation:
            raise EwsError(
                "ErrorImpersonateUserDenied", "The account does not have permission to impersonate.", fault=True
            )
        with self._lock:
            exists = self.directory.mailbox_exists(address)
        if not exists:
            raise EwsError("ErrorNonExistentMailbox", f"The SMTP address {address} has no mailbox.", fault=True)
        caller.impersonating = address
        return caller

    def authorize(self, caller: Caller, mailbox: str | None) -> str:
        """The mailbox the caller may touch, or an item-level error."""
        if not mailbox:
            raise EwsError("ErrorMissingEmailAddress", "The mailbox could not be determined.")
        mailbox = mailbox.lower()
        with self._lock:
            exists = self.directory.mailbox_exists(mailbox)
        if not exists:
            raise EwsError("ErrorNonExistentMailbox", f"The SMTP address {mailbox} has no mailbox.")
        if caller.impersonating:
            allowed = mailbox == caller.impersonating
        else:
            delegates = {d.lower() for d in (caller.user.delegate_for if caller.user else [])}
            allowed = mailbox == caller.default_mailbox or "*" in delegates or mailbox in delegates
        if not allowed:
            raise EwsError("ErrorAccessDenied", "Access is denied. Check credentials and try again.")
        return mailbox
