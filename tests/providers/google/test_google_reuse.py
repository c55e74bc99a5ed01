"""What the Google adapter keeps between jobs: each thread's events resource and AuthorizedHttp, and the
credentials per account (so access tokens are reused), never a stale one."""

from __future__ import annotations

import dataclasses
import threading
import types
from typing import Any

import pytest

from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.providers.google.provider import GoogleProvider, SendingHttp
from tests.providers.google.gcal_support import Emulator, make_event, target_for


def test_a_thread_builds_its_events_resource_once(
    provider: GoogleProvider, account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = make_event("ev-1"), make_event("ev-2")
    provider.upsert(account, first, target_for(first, account))
    monkeypatch.setattr(provider._service, "events", lambda: pytest.fail("the events resource was built again"))
    fresh = dataclasses.replace(account, credentials=dict(account.credentials))  # as a job decrypts it
    assert provider.upsert(fresh, second, target_for(second, fresh)).etag
    assert type(provider._local.http) is SendingHttp  # httplib2's own Http, requests counted (provider_io)


def test_one_authorized_http_per_thread_and_credentials(provider: GoogleProvider, emulator: Emulator) -> None:
    one, two = (provider._session(_account(emulator, f"1//t{n}")).credentials for n in (1, 2))
    assert provider._http(one) is provider._http(one)
    assert provider._http(two) is not provider._http(one)
    assert provider._http(two).credentials is two
    assert provider._http(two).http is provider._http(one).http
    elsewhere: list[Any] = []
    thread = threading.Thread(target=lambda: elsewhere.append(provider._http(one)))
    thread.start()
    thread.join()
    assert elsewhere[0] is not provider._http(one)
    assert elsewhere[0].http is not provider._http(one).http


def _account(emulator: Emulator, refresh_token: str = "1//t", **options: Any) -> Account:
    return Account("acct-1", "tenant-1", "google", "alice@example.com",
                   credentials=emulator.user_credentials(refresh_token), options=options)  # fmt: skip


class _Credentials:
    """The credentials the provider uses for an account (one object per account and fingerprint)."""

    def __init__(self, provider: GoogleProvider) -> None:
        self.provider = provider

    def get(self, account: Account) -> Any:
        return self.provider._session(account).credentials


def test_the_credential_cache_keeps_an_accounts_credentials_until_a_field_changes(
    provider: GoogleProvider, emulator: Emulator
) -> None:
    cache, account = _Credentials(provider), _account(emulator, delegate=True)
    built = cache.get(account)
    assert cache.get(dataclasses.replace(account, credentials=dict(account.credentials))) is built
    changed = [
        dataclasses.replace(account, credentials={**account.credentials, "refresh_token": "1//other"}),
        dataclasses.replace(account, credentials={**account.credentials, "token_uri": emulator.token_uri + "/x"}),
        dataclasses.replace(account, options={"delegate": False}),
        dataclasses.replace(account, options={"delegate": "True"}),
        dataclasses.replace(account, options={"delegate": True, "calendar_id": "team@example.com"}),
        dataclasses.replace(account, id="acct-2"),
    ]
    others = [cache.get(other) for other in changed]
    assert all(other is not built for other in others)
    assert cache.get(account) is not built  # replaced by a changed one: built again


def test_credentials_of_another_mapping_type_are_kept_and_no_mapping_is_refused(
    provider: GoogleProvider, emulator: Emulator
) -> None:
    account, cache = _account(emulator), _Credentials(provider)
    proxied = dataclasses.replace(account, credentials=types.MappingProxyType(dict(account.credentials)))
    assert cache.get(proxied) is cache.get(
        dataclasses.replace(account, credentials=types.MappingProxyType(dict(account.credentials)))
    )
    for odd in ("client_id", ["client_id"]):
        with pytest.raises(ConfigurationError, match="must be a JSON object"):
            cache.get(dataclasses.replace(account, credentials=odd))  # type: ignore[arg-type]


def test_the_credential_cache_keys_other_accounts_by_their_json(provider: GoogleProvider, emulator: Emulator) -> None:
    cache, account = _Credentials(provider), _account(emulator, nested={"a": [1]})
    built = cache.get(account)
    assert cache.get(dataclasses.replace(account, options={"nested": {"a": [1]}})) is built
    assert cache.get(dataclasses.replace(account, options={"nested": {"a": [2]}})) is not built
    numbered = dataclasses.replace(account, credentials={**account.credentials, "expiry_ms": 1}, options={})
    assert cache.get(numbered) is cache.get(dataclasses.replace(numbered, credentials=dict(numbered.credentials)))
    for equal_in_python in (True, 1.0):  # == 1, but other JSON
        other = dataclasses.replace(numbered, credentials={**numbered.credentials, "expiry_ms": equal_in_python})
        assert cache.get(other) is not cache.get(numbered)
    flagged = dataclasses.replace(account, options={"delegate": True})
    assert cache.get(dataclasses.replace(flagged, options={"delegate": 1})) is not cache.get(flagged)


def test_an_account_whose_address_changed_gets_credentials_of_its_own(
    provider: GoogleProvider, emulator: Emulator
) -> None:
    # A service account impersonates the account's address by default: a new address is a new subject.
    cache, account = _Credentials(provider), _account(emulator)
    moved = dataclasses.replace(account, address="moved@example.com")
    assert cache.get(moved) is not cache.get(account)
    assert cache.get(moved) is cache.get(dataclasses.replace(moved))
