"""What an account's registration must be, whatever adapter serves it: its address, and the calendar it writes into.

**Addresses**, by provider (checked at ``accounts add``; the Exchange and Graph adapters check theirs again
before every call):

- ``exchange``, ``graph``: the mailbox's SMTP address, by the rule attendees follow in a change (:data:`Email`:
  one ``@``, a dot in the domain, no whitespace, at most 320 characters);
- ``google``: a calendar id (Calendar API ``calendarId``): ``primary`` (the primary calendar of whoever the
  credentials are), or an id shaped like an address, which is what ``calendarList.list`` gives: a user's
  address (their primary calendar), ``…@group.calendar.google.com`` (a secondary or shared calendar),
  ``…@resource.calendar.google.com`` (a room), ``…@group.v.calendar.google.com`` (a public one);
- ``memory``: an SMTP address too (it stands in for a mailbox in tests and the demo).

**One calendar, one account, per tenant.** Two accounts of one tenant writing into one calendar each sync
the event there: one event, two items (their sync keys differ by account). :func:`calendar_key` names the
calendar an account writes into, and the store keeps it unique per tenant:

- ``exchange`` and ``graph`` share one key, ``exchange:`` + the address lower-cased (+ ``/`` + Graph's
  ``calendar`` option when set: another calendar of the mailbox). The same address on EWS and on Graph is
  the same mailbox of the same Exchange organisation: an SMTP address is delivered to one mailbox, and its
  domain is an accepted domain of one organisation (Exchange Online verifies a domain in one Microsoft 365
  tenant only). What else an account holds cannot tell organisations apart: the server URL (EWS) and the
  Entra tenant id (Graph; OAuth EWS) are exactly what differs between the two adapters of one mailbox, and
  a hybrid deployment reaches one organisation under several URLs. Two separate servers that both host an
  address (test labs) are registered under two calsync tenants.
- ``google``: ``google:`` + the calendar id lower-cased (the ``calendar_id`` option, else the address). None
  for ``primary``: whose primary calendar that is depends on the credentials.
- ``memory``: None: its calendar is the account itself (the memory store keys events by account id).

None means "not known from the registration": such accounts are not checked against each other.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from calsync.core.model.calendar import ProviderName
from calsync.core.model.change import Email
from calsync.core.model.errors import ConfigurationError
from calsync.core.model.ids import quoted

PRIMARY = "primary"  # Google's keyword for the authorised user's primary calendar
_EMAIL: TypeAdapter[str] = TypeAdapter(Email)
_EXCHANGE_FAMILY: frozenset[ProviderName] = frozenset({"exchange", "graph"})


def is_smtp_address(value: object) -> bool:
    """Whether ``value`` is an email address by the rule change documents' attendees follow."""
    try:
        _EMAIL.validate_python(value)
    except ValidationError:
        return False
    return True


def is_google_calendar_id(value: object) -> bool:
    """Whether ``value`` can be a Google ``calendarId``: ``primary`` or an address-shaped id."""
    return value == PRIMARY or is_smtp_address(value)


_ADDRESSES: dict[ProviderName, tuple[Callable[[object], bool], str]] = {
    "exchange": (is_smtp_address, "the mailbox's SMTP address, such as alice@example.com"),
    "graph": (is_smtp_address, "the mailbox's SMTP address, such as alice@example.com"),
    "memory": (is_smtp_address, "an email address, such as team@example.com"),
    "google": (is_google_calendar_id, "a calendar id: primary, a user's address, or an id such as "
               "team@group.calendar.google.com"),
}  # fmt: skip


def check_address(account_id: str, provider: ProviderName, address: str) -> None:
    """Refuse an address the provider cannot have (ConfigurationError naming what it must be)."""
    accepts, what = _ADDRESSES[provider]
    if not accepts(address):
        raise ConfigurationError(f"account {account_id}: address {quoted(address)} is not {what}")


def calendar_key(provider: ProviderName, address: str, options: Mapping[str, Any]) -> str | None:
    """The calendar an account writes into, the same for every account that writes there (module docstring)."""
    if provider in _EXCHANGE_FAMILY:
        mailbox = f"exchange:{address.lower()}"
        calendar = options.get("calendar") if provider == "graph" else None
        return f"{mailbox}/{calendar}" if isinstance(calendar, str) and calendar else mailbox
    if provider == "google":
        calendar_id = options.get("calendar_id")
        chosen = calendar_id if isinstance(calendar_id, str) and calendar_id else address
        return None if chosen == PRIMARY else f"google:{chosen.lower()}"
    return None
