"""Repository of ``provider_accounts``: where events are synced to, and with which credentials (a rotated refresh
token written back by :class:`StoredCredentials`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, NamedTuple

from sqlalchemy import Connection, bindparam, select, update

from calsync.core.model.account_rules import calendar_key
from calsync.core.model.calendar import Account, AccountStatus, ProviderName
from calsync.core.model.errors import AccountStatusConflict, EntityNotFound, InvalidChange
from calsync.core.model.ids import new_id
from calsync.core.model.redaction import register_secrets
from calsync.core.store import targets
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database, given_equal
from calsync.core.store.schema import json_ready, provider_accounts


@dataclass(frozen=True)
class AccountSummary:
    """An account as operators see it: everything but the secret."""

    id: str
    tenant_id: str
    provider: ProviderName
    address: str
    status: AccountStatus
    options: Mapping[str, Any]
    has_credentials: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    calendar_key: str | None = None  # the calendar it writes into (core/model/account_rules.py), if known

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for the CLI (the id as ``account_id``)."""
        doc = asdict(self)
        return json_ready({"account_id": doc.pop("id"), **doc, "options": dict(self.options)})


_ACCOUNT = ("id", "tenant_id", "provider", "address", "status")  # the columns both views take as stored
_SUMMARY = (*_ACCOUNT, "created_at", "updated_at", "calendar_key")


def _summary(row: Mapping[Any, Any]) -> AccountSummary:
    as_stored = {name: row[name] for name in _SUMMARY}
    return AccountSummary(**as_stored, options=row["options"] or {}, has_credentials=row["credentials"] is not None)


def check_calendar_free(conn: Connection, tenant_id: str, key: str | None, *, account_id: str | None = None) -> None:
    """Refuse a second account of ``tenant_id`` writing into the calendar ``key`` (one besides ``account_id``).

    The unique index (tenant_id, calendar_key) is what guarantees it; this check only names the account that
    holds the calendar, before an insert and after one the index refused (a concurrent registration won).
    """
    if key is None:
        return
    holder = conn.execute(
        select(provider_accounts).where(provider_accounts.c.tenant_id == tenant_id,
                                        provider_accounts.c.calendar_key == key)
    ).mappings().first()  # fmt: skip
    if holder is not None and holder["id"] != account_id:
        raise InvalidChange(
            f"account {holder['id']} ({holder['provider']}, {holder['address']}) of tenant {tenant_id} already "
            f"writes into this calendar ({key}): a second account there would show every event twice; change "
            f"that one instead (`calsync accounts update {holder['id']}`, e.g. --provider graph)"
        )


def add_account(
    conn: Connection,
    *,
    tenant_id: str,
    provider: ProviderName,
    address: str,
    credentials: bytes | None,
    options: Mapping[str, Any],
    account_id: str | None = None,
) -> AccountSummary:
    """Insert an active account; ``credentials`` is the already-encrypted blob.

    Refused (InvalidChange) when another account of the tenant writes into the same calendar; a concurrent
    registration of it that commits first makes this insert fail on the unique index (IntegrityError).
    """
    now = dt.datetime.now(dt.UTC)
    key = calendar_key(provider, address, options)
    check_calendar_free(conn, tenant_id, key)
    values = {"id": account_id or new_id("acc"), "tenant_id": tenant_id, "provider": provider, "address": address,
              "credentials": credentials, "options": dict(options), "status": "active", "created_at": now,
              "updated_at": now, "calendar_key": key}  # fmt: skip
    conn.execute(provider_accounts.insert().values(**values))
    return _summary(values)


_GET = select(provider_accounts).where(provider_accounts.c.id == bindparam("k_account"))


def get_summary(conn: Connection, account_id: str) -> AccountSummary | None:
    """One account without its secret."""
    row = conn.execute(_GET, {"k_account": account_id}).mappings().first()
    return _summary(row) if row else None


class AccountStanding(NamedTuple):
    """What a change's account check needs of an account: whose it is and whether it is disabled."""

    tenant_id: str
    status: AccountStatus


_STANDINGS = select(provider_accounts.c.id, provider_accounts.c.tenant_id, provider_accounts.c.status).where(
    provider_accounts.c.id.in_(bindparam("k_accounts", expanding=True))  # one cached statement for any number
)


def get_standings(conn: Connection, account_ids: Collection[str]) -> dict[str, AccountStanding]:
    """The accounts among ``account_ids`` that exist, by id, in one query of three columns (a fan-out checks them
    all at once, without reading their credentials)."""
    if not account_ids:
        return {}
    rows = conn.execute(_STANDINGS, {"k_accounts": list(account_ids)})
    return {account_id: AccountStanding(tenant_id, status) for account_id, tenant_id, status in rows}


def list_accounts(conn: Connection, tenant_id: str | None = None) -> list[AccountSummary]:
    """Accounts of a tenant (or all), oldest first."""
    query = select(provider_accounts).where(*given_equal((provider_accounts.c.tenant_id, tenant_id)))
    query = query.order_by(provider_accounts.c.created_at, provider_accounts.c.id)
    return [_summary(row) for row in conn.execute(query).mappings()]


def list_page(
    conn: Connection,
    *,
    tenant_id: str | None = None,
    provider: ProviderName | None = None,
    status: AccountStatus | None = None,
    after: str | None = None,
    limit: int = 50,
) -> list[AccountSummary]:
    """Up to ``limit`` accounts in id order after id ``after``, of one tenant, provider or status when given: the
    primary key's range (``ix_provider_accounts_tenant`` for a tenant's)."""
    a = provider_accounts.c
    filters = given_equal((a.tenant_id, tenant_id), (a.provider, provider), (a.status, status))
    query = select(provider_accounts).where(*filters).order_by(a.id).limit(limit)
    if after is not None:
        query = query.where(a.id > after)
    return [_summary(row) for row in conn.execute(query).mappings()]


def load_account(conn: Connection, account_id: str, cipher: CredentialCipher) -> Account | None:
    """An account with decrypted credentials, for an adapter call; its secrets are registered for redaction."""
    row = conn.execute(_GET, {"k_account": account_id}).mappings().first()
    return account_from_row(row, cipher) if row is not None else None


def account_from_row(row: Mapping[Any, Any], cipher: CredentialCipher) -> Account:
    """Decrypt a stored account row into what adapters take (its secrets registered for redaction)."""
    credentials = cipher.decrypt(row["credentials"]) if row["credentials"] is not None else {}
    register_secrets(credentials)
    as_stored = {name: row[name] for name in _ACCOUNT}
    return Account(**as_stored, credentials=credentials, options=row["options"] or {})


def update_account(
    conn: Connection,
    account_id: str,
    *,
    status: AccountStatus | None = None,
    credentials: bytes | None = None,
    options: Mapping[str, Any] | None = None,
    provider: ProviderName | None = None,
) -> AccountSummary:
    """Change status, credentials, options or provider (EWS → Graph); raises EntityNotFound for an unknown id.

    A move to another provider marks every target of the account as maybe created: the adapter it leaves
    may have sent creates without the marker (Graph, memory), and one it joins (EWS) must look for them.
    """
    current = get_summary(conn, account_id)
    if current is None:
        raise EntityNotFound(f"account {account_id} does not exist")
    values: dict[str, Any] = {"updated_at": dt.datetime.now(dt.UTC)}
    if provider is not None or options is not None:  # the calendar it writes into may change with either
        key = calendar_key(provider or current.provider, current.address,
                           current.options if options is None else options)  # fmt: skip
        check_calendar_free(conn, current.tenant_id, key, account_id=account_id)
        values["calendar_key"] = key
    if provider is not None:
        # The account row locked first (PostgreSQL): a target inserted for it meanwhile waits for this commit
        # (its foreign key check), so no target of the old adapter's escapes the marking.
        conn.execute(select(provider_accounts.c.id).where(provider_accounts.c.id == account_id).with_for_update())
        targets.mark_account_create_attempted(conn, account_id)
    changes = {"provider": provider, "status": status, "credentials": credentials,
               "options": None if options is None else dict(options)}  # fmt: skip
    values.update({column: value for column, value in changes.items() if value is not None})
    changed = update(provider_accounts).where(provider_accounts.c.id == account_id).values(**values)
    return _summary(conn.execute(changed.returning(provider_accounts)).mappings().one())


StatusAction = Literal["disable", "enable"]
# The statuses each action may leave, and the status it sets: a removing account is neither, and one awaiting
# re-authorization is enabled only by new credentials (``calsync accounts update``).
STATUS_ACTIONS: dict[StatusAction, tuple[tuple[AccountStatus, ...], AccountStatus]] = {
    "disable": (("active", "needs_reauth", "disabled"), "disabled"),
    "enable": (("disabled", "active"), "active"),
}


def set_status(
    conn: Connection, account_id: str, action: StatusAction, *, tenant_id: str | None = None
) -> tuple[AccountSummary, bool] | None:
    """Disable or enable an account (of ``tenant_id`` when given: another tenant's reads as absent, None), and
    whether its status changed (both are idempotent); AccountStatusConflict from a status the action may not leave.
    What ``POST /v1/accounts/{id}/disable|enable`` and the console's buttons do."""
    allowed, status = STATUS_ACTIONS[action]
    current = get_summary(conn, account_id)
    if current is None or (tenant_id is not None and current.tenant_id != tenant_id):
        return None
    if current.status not in allowed:
        raise AccountStatusConflict(f"account {account_id} is {current.status}: it cannot be {action}d")
    if current.status == status:
        return current, False
    return update_account(conn, account_id, status=status), True


class StoredCredentials:
    """The worker's :class:`~calsync.core.model.adapter_parts.CredentialWriter`: writes back credentials a provider
    rotated (a new refresh token), encrypted, onto the account row, which so holds the newest."""

    def __init__(self, db: Database, cipher: CredentialCipher) -> None:
        self._db = db
        self._cipher = cipher

    def save(self, account_id: str, credentials: Mapping[str, Any]) -> None:
        """Encrypt and store; the status is left alone (a rotation is not a re-authorization)."""
        blob = self._cipher.encrypt(credentials)
        with self._db.write() as conn:
            update_account(conn, account_id, credentials=blob)
