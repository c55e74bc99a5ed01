"""Access tokens per account from Entra through msal: one msal app and token cache per account, thread-safe.

- App-only (``client_credentials``): ``ConfidentialClientApplication.acquire_token_for_client``, asked only
  when our copy of the token nears expiry (msal's own cache lookup is a cost of every call otherwise).
- Delegated (``refresh_token``): ``acquire_token_by_refresh_token``; a rotated refresh token replaces ours at
  once and is handed to the :class:`~calsync.core.model.adapter_parts.CredentialWriter` (the account row, encrypted).
- msal talks through the adapter's ``httpx.Client`` (same timeout, no retries, proxies read once), with
  ``instance_discovery=False`` so nothing but the configured ``authority`` is contacted.
- Either access token is kept until a minute before its ``expires_in``; ``invalidate`` drops it (and msal's
  copy) after a 401, so the one retry gets a fresh one.
- The adapter keeps one source per account (providers/accounts.py): a rotation adds the fingerprint the
  account will have once the rotated token is stored, so the source outlives the write-back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx
import msal

from calsync.core.model.adapter_parts import CredentialWriter
from calsync.core.model.calendar import Account
from calsync.providers.accounts import fingerprint
from calsync.providers.graph.classification import TokenError
from calsync.providers.graph.credentials import AppLogin, GraphAccount

logger = logging.getLogger(__name__)

_EARLY_REFRESH = 60.0


class TokenSource:
    """One account's tokens; every method may be called from any worker thread."""

    def __init__(
        self, account: Account, config: GraphAccount, scope: str, http: httpx.Client, fingerprints: set[str]
    ) -> None:
        self._account_id = account.id
        self._address = account.address
        self._credentials = dict(account.credentials)
        self._options = dict(account.options)
        self._login = config.login
        self._scopes = [scope]
        self._fingerprints = fingerprints  # its cache entry's: the account's, and each after a rotation
        self._lock = threading.Lock()
        self._token: tuple[str, float] | None = None
        authority = f"{config.login.authority}/{config.login.tenant_id}"
        credential = config.credential()
        self._cache = msal.TokenCache()
        kwargs: dict[str, Any] = {"authority": authority, "token_cache": self._cache, "http_client": http,
                                  "instance_discovery": False}  # fmt: skip
        if credential is None:
            self._app: msal.ClientApplication = msal.PublicClientApplication(config.login.client_id, **kwargs)
        else:
            self._app = msal.ConfidentialClientApplication(
                config.login.client_id, client_credential=credential, **kwargs
            )
        self._refresh_token = self._credentials.get("refresh_token")

    def access_token(self, writer: CredentialWriter) -> str:
        """A valid access token; raises TokenError when Entra refuses."""
        with self._lock:
            if self._token is not None and self._token[1] > time.monotonic():
                return self._token[0]
            if isinstance(self._login, AppLogin):
                result = self._app.acquire_token_for_client(scopes=self._scopes)
            else:
                result = self._app.acquire_token_by_refresh_token(self._refresh_token, scopes=self._scopes)
            token = self._take(result)
            self._token = (token, time.monotonic() + float(result.get("expires_in") or 0) - _EARLY_REFRESH)
            if isinstance(self._login, AppLogin):
                return token
            rotated = result.get("refresh_token")
            if isinstance(rotated, str) and rotated and rotated != self._refresh_token:
                self._rotate(rotated, writer)
            return token

    def invalidate(self) -> None:
        """Forget the access token (after a 401): the next call fetches a new one."""
        with self._lock:
            self._token = None
            for entry in list(self._cache.search(msal.TokenCache.CredentialType.ACCESS_TOKEN)):
                self._cache.remove_at(entry)

    def secrets(self) -> tuple[str, ...]:
        """The live tokens, masked in messages."""
        with self._lock:
            live = [self._refresh_token, self._token[0] if self._token else None]
        return tuple(s for s in live if isinstance(s, str))

    def _rotate(self, rotated: str, writer: CredentialWriter) -> None:
        self._refresh_token = rotated
        self._credentials["refresh_token"] = rotated
        self._fingerprints.add(fingerprint(self._address, self._credentials, self._options))
        try:
            writer.save(self._account_id, self._credentials)
        except Exception:  # the token still works in this process; the next rotation writes again
            logger.exception("Graph account %s: storing the rotated refresh token failed", self._account_id)

    @staticmethod
    def _take(result: Mapping[str, Any] | None) -> str:
        if not result or "access_token" not in result:
            raise TokenError(result or {"error": "no_token", "error_description": "msal returned no token"})
        return str(result["access_token"])
