"""The emulators of ``benchmarks/drift.py``: each seeded in its child process with what calsync's adapter writes.

Every provider's emulator is seeded in place, in the child process that serves it (no seed route exists, and
100,000 writes through the API would time the writes, not the sweeps): ``--accounts`` calendars or mailboxes of
the events' bodies as the adapter builds them, its marker (the target's sync key) included, plus ``user_events``
of the user's own per calendar (no marker). What the child hands back: its URL, the CA file clients must trust
(Graph: msal talks to https authorities only) and, per account and event, the (external id, etag) the adapter
would have recorded, for the targets of the sweep job.

- ``google``: the Google emulator, ``event_body`` with the id ``event_id_for`` gives, inserted as ``events.insert``
  stores it;
- ``graph``: the Exchange server emulator (EWS + Graph over one store, http and https on one port), the Graph
  adapter's ``event_body`` converted by the emulator's own Graph front-end conversion;
- ``ews``: the same server, the EWS adapter's ``item_fields`` and marker serialized by exchangelib as its
  CreateItem sends them, stored as the emulator's CreateItem stores them.

An account's items share the elements of their event's fields (the store replaces elements, never changes one in
place), so 100,000 items fit in the child's memory; each item has its own field dict, marker, ItemId and ChangeKey.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from exchangelib import CalendarItem, Version
from exchangelib.util import xml_to_str
from exchangelib.version import EXCHANGE_2016

from calsync.core.model.calendar import Account, EventState, ProviderName, Target
from calsync.providers.exchange.items import item_fields
from calsync.providers.google.event_body import event_body as google_body
from calsync.providers.google.event_body import event_id_for
from calsync.providers.graph.event_body import event_body as graph_body
from calsync_emulators import google, graph
from calsync_emulators.control import EmulatorControl, EwsControl, GoogleControl, GraphControl
from calsync_emulators.ews.mailbox import Item, MailboxStore
from calsync_emulators.ews.soap import T, local, prop_key, stored
from calsync_emulators.graph.convert import apply, etag_of, graph_id
from calsync_emulators.server import EmulatorApp, RunningEmulator

#: (external id, etag) of one seeded item, as the adapter's write would have recorded them on the target.
Ref = tuple[str, str]
#: Per account, per event (in the events' order).
Refs = list[list[Ref]]
#: The seed's tenant (the targets' sync keys carry it).
TENANT = "bench-drift"
_OWN = EventState(id="own", tenant_id=TENANT, version=1, title="Own", start=dt.datetime(2026, 12, 1, 8),
                  end=dt.datetime(2026, 12, 1, 9), time_zone="UTC", all_day=False)  # fmt: skip


def address(n: int) -> str:
    """The calendar (Google) or mailbox (Graph, EWS) of account ``n``."""
    return f"user{n}@example.com"


def account_id(n: int) -> str:
    """The id of account ``n``."""
    return f"acct{n}"


def _sync_key(event: EventState, n: int) -> str:
    return Target(event_id=event.id, account_id=account_id(n), tenant_id=TENANT).sync_key


@dataclass(frozen=True)
class Seeded:
    """What the child process hands back once it serves."""

    url: str
    refs: Refs
    ca_file: str | None = None


def _serve(queue: Any, app: EmulatorApp, refs: Refs, tls: graph.TlsIdentity | None = None) -> None:
    running = RunningEmulator(app, tls=None if tls is None else tls.context)
    queue.put(Seeded(running.url, refs, None if tls is None else str(tls.ca_file)))
    threading.Event().wait()


def serve_google(queue: Any, accounts: int, states: list[EventState], user_events: int) -> None:
    """The child process: the Google emulator, seeded, until the benchmark ends (module docstring)."""
    app = google.create_app()
    refs: Refs = []
    own = {"summary": "Own", "start": {"date": "2026-12-01"}, "end": {"date": "2026-12-02"}}
    for n in range(accounts):
        refs.append([])
        for event in states:
            target = Target(event_id=event.id, account_id=account_id(n), tenant_id=TENANT)
            event_id = event_id_for(target.sync_key)
            app.events.insert(address(n), {**google_body(event, target), "id": event_id}, {})
            refs[-1].append((event_id, app.events.entry(address(n), event_id).resource["etag"]))
        for _ in range(user_events):
            app.events.insert(address(n), own, {})
    _serve(queue, app, refs)


#: One event's fields as the store keeps them (shared by every account's item) and the item's marker for a sync key.
Template = tuple[dict[str, ET.Element], Callable[[Item, str], None]]


def _graph_template(event: EventState, marked: bool) -> Template:
    """The Graph adapter's create body, through the Graph front end's conversion."""
    body = graph_body(event, "", event.send_updates, create=True)
    properties = body.pop("singleValueExtendedProperties")
    shape = Item("template", "template", "")
    apply(shape, body)

    def mark(item: Item, sync_key: str) -> None:
        if marked:
            apply(item, {"singleValueExtendedProperties": [{**p, "value": sync_key} for p in properties]})

    return shape.fields, mark


def _ews_template(event: EventState, marked: bool) -> Template:
    """The EWS adapter's CalendarItem as exchangelib serializes it for CreateItem, split as CreateItem stores it."""
    version = Version(build=EXCHANGE_2016)
    item = CalendarItem(**item_fields(event), **({"calsync_sync_key": "-"} if marked else {}))
    item.clean(version=version)
    elem = ET.fromstring(xml_to_str(item.to_xml(version=version)))
    fields = {local(c.tag): stored(c) for c in elem if local(c.tag) != "ExtendedProperty"}
    markers = [c for c in elem if local(c.tag) == "ExtendedProperty"]

    def mark(item: Item, sync_key: str) -> None:
        for prop in markers:
            copied = stored(prop)
            copied.findall(f"{T}Value")[0].text = sync_key
            item.extended[prop_key(copied.findall(f"{T}ExtendedFieldURI")[0])] = copied

    return fields, mark


def _seed_mailboxes(store: MailboxStore, template: Callable[[EventState, bool], Template], accounts: int,
                    states: list[EventState], user_events: int) -> list[list[Item]]:  # fmt: skip
    shapes = [template(event, True) for event in states]
    own_fields, _ = template(_OWN, False)
    seeded: list[list[Item]] = []
    for n in range(accounts):
        seeded.append([])
        for event, (fields, mark) in zip(states, shapes, strict=True):
            item = store.new_item(address(n))
            item.fields = dict(fields)
            mark(item, _sync_key(event, n))
            store.add(item)
            seeded[-1].append(item)
        for _ in range(user_events):
            own = store.new_item(address(n))
            own.fields = dict(own_fields)
            store.add(own)
    return seeded


def _serve_exchange(queue: Any, template: Callable[[EventState, bool], Template], ref: Callable[[Item], Ref],
                    accounts: int, states: list[EventState], user_events: int, *, tls: bool) -> None:  # fmt: skip
    app = graph.create_app()
    seeded = _seed_mailboxes(app.ews.store, template, accounts, states, user_events)
    identity = graph.self_signed(Path(tempfile.mkdtemp(prefix="calsync-bench-drift-tls-"))) if tls else None
    _serve(queue, app, [[ref(item) for item in items] for items in seeded], identity)


def serve_graph(queue: Any, accounts: int, states: list[EventState], user_events: int) -> None:
    """The child process: the Exchange server emulator seeded with Graph's writes (module docstring)."""
    _serve_exchange(queue, _graph_template, lambda i: (graph_id(i.id), etag_of(i)), accounts, states, user_events,
                    tls=True)  # fmt: skip


def serve_ews(queue: Any, accounts: int, states: list[EventState], user_events: int) -> None:
    """The child process: the Exchange server emulator seeded with EWS's writes, over http (module docstring)."""
    _serve_exchange(queue, _ews_template, lambda i: (i.id, i.change_key), accounts, states, user_events, tls=False)


@dataclass(frozen=True)
class Emulated:
    """One provider of the benchmark: its adapter, its seeded emulator, and how the benchmark acts on it."""

    adapter: ProviderName
    serve: Callable[[Any, int, list[EventState], int], None]
    control: Callable[[str], EmulatorControl]
    settings: Callable[[Seeded], dict[str, Any]]  # the Settings fields that point the adapter at the emulator
    login: Callable[[Any, int], tuple[dict[str, Any], dict[str, Any]]]  # (credentials, options) of account n
    edit: Callable[[Any, int, str, str], None]  # the user retitles item (external id) of account n
    refuse_cursors: Callable[[Any], None]  # every cursor issued so far is refused from now on (410 / invalid)
    accept_cursors: Callable[[Any], None] = lambda control: None  # undo what refuse_cursors left on


def _google_edit(control: GoogleControl, n: int, external_id: str, title: str) -> None:
    control.edit_event(address(n), external_id, summary=title)


EMULATED: Mapping[str, Emulated] = {
    "google": Emulated(
        "google", serve_google, GoogleControl, lambda s: {"google_api_endpoint": GoogleControl(s.url).api_endpoint},
        lambda c, n: (c.user_credentials(f"1//bench-{n}", "client", "secret"), {}), _google_edit,
        lambda c: c.control("POST", "config", {"sync_token_lifetime": 0}),
        lambda c: c.control("POST", "config", {"sync_token_lifetime": 86400}),
    ),
    "graph": Emulated(
        "graph", serve_graph, GraphControl,
        lambda s: {"graph_api_endpoint": GraphControl(s.url).api_endpoint, "graph_ca_file": s.ca_file},
        lambda c, n: (c.app_credentials(), {}), lambda c, n, item, title: c.edit_item(item, subject=title),
        lambda c: c.expire_sync_states(),
    ),
    "ews": Emulated(
        "exchange", serve_ews, EwsControl, lambda s: {},
        lambda c, n: ({"username": "svc@example.com", "password": "svc-password"},
                      {"server_url": c.server_url, "auth_type": "basic", "access_type": "impersonation"}),
        lambda c, n, item, title: c.edit_item(item, subject=title), lambda c: c.expire_sync_states(),
    ),
}  # fmt: skip


def accounts(emulated: Emulated, control: Any, count: int) -> list[Account]:
    """The seed's accounts, the first ``count``, each with its login."""
    made = []
    for n in range(count):
        credentials, options = emulated.login(control, n)
        made.append(Account(id=account_id(n), tenant_id=TENANT, provider=emulated.adapter, address=address(n),
                            credentials=credentials, options=options))  # fmt: skip
    return made
