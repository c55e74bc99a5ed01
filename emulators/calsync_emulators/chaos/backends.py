"""The calendars a chaos run syncs into, their faults, and what they say they did.

Two backends, chosen with ``--provider``:

- ``memory``: calsync's memory provider in the run's data dir (a SQLite file every worker process shares); its
  fault rules (``MemoryProvider.add_fault``) raise calsync's own errors; its call log names each write's effect
  and version;
- ``google``: the Google Calendar v3 emulator in this process, the real adapter (google-api-python-client)
  talking to it over HTTP; its fault rules (calsync_emulators/faults.py) answer Google's documented errors or
  drop the connection. Its request log is put in the memory provider's words (:class:`EffectLog`).

Each backend cycles through a list of faults, one injected at a time: temporary failures (retried), lost
answers after the write happened (the retry must not repeat it) and one permanent failure (a dead letter).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from calsync.core.clients import Clients
from calsync.core.store import accounts
from calsync.providers.memory import MemoryProvider
from calsync.providers.memory_store import CALL_LOG_LIMIT, Call
from calsync_emulators import google
from calsync_emulators.chaos.invariants import Applied, Shown, TargetId
from calsync_emulators.control import GoogleControl
from calsync_emulators.server import Request, RunningEmulator

BackendName = Literal["memory", "google"]
BACKENDS: tuple[BackendName, ...] = ("memory", "google")

#: The Google adapter's private extended properties (providers/google/event_body.py): the target's sync key and
#: the version the write carried.
SYNC_KEY_PROPERTY, VERSION_PROPERTY = "calsyncKey", "calsyncVersion"
_EVENTS = re.compile(r"/calendar/v3/calendars/([^/]+)/events(/[^/]+)?$")


class Backend(Protocol):
    """What the run needs of a calendar backend."""

    name: BackendName
    settings: Mapping[str, Any]  # what the workers' settings need to reach it

    def add_account(self, clients: Clients, tenant: str, n: int) -> str:
        """Register calendar ``n`` of ``tenant`` and return its account id."""
        ...

    def inject(self, n: int, entity: str) -> str:
        """Inject the ``n``-th fault of the cycle (``entity``: the one a permanent fault breaks); what it was."""
        ...

    def refuse(self, entity: str, times: int) -> str:
        """Refuse the next ``times`` writes (of ``entity`` where the backend can tell) for good; what it was."""
        ...

    def faults_off(self) -> None:
        """Remove every fault rule."""
        ...

    def applied(self, targets: Mapping[str, TargetId]) -> list[Applied]:
        """Every effect in the order applied; ``targets`` names the target of each sync key."""
        ...

    def shown(self, targets: Mapping[str, TargetId]) -> dict[TargetId, Shown]:
        """What the calendar shows of each target now."""
        ...

    def unchecked(self) -> list[str]:
        """What the effects it reports leave out (a log's limit reached), for the report."""
        ...

    def close(self) -> None:
        """Stop what the backend started."""
        ...


#: One live event at the provider: its target's sync key, the version and the title it shows.
Live = tuple[str, int | None, str | None]


def shown_of(live: Iterable[Live], targets: Mapping[str, TargetId]) -> dict[TargetId, Shown]:
    """Group live events, each ``(sync key, version, title)``, by target: the last one shown, and how many."""
    grouped: dict[TargetId, list[tuple[int | None, str | None]]] = defaultdict(list)
    for sync_key, version, title in live:
        if sync_key in targets:
            grouped[targets[sync_key]].append((version, title))
    return {target: Shown(target, *seen[-1], copies=len(seen)) for target, seen in grouped.items()}


def memory_writes(calls: Iterable[Call]) -> list[Applied]:
    """The memory provider's upserts that answered, in order, with the effect its log names (the invariants count
    only those in :data:`~calsync_emulators.chaos.invariants.EFFECTS`)."""
    return [Applied(TargetId(c.account_id, c.entity_id), c.effect or "", c.version or 0) for c in calls
            if c.op == "upsert" and c.error is None]  # fmt: skip


class MemoryBackend:
    """The memory provider in the run's data dir, shared with the worker processes through its SQLite file."""

    name: BackendName = "memory"

    def __init__(self, path: Path, latency_ms: int) -> None:
        self.settings: Mapping[str, Any] = {}
        self.provider = MemoryProvider(path)
        if latency_ms:
            self.provider.add_fault(error=None, delay_ms=latency_ms)  # a slower calendar: a delay-only rule
        self._latency_ms = latency_ms

    def add_account(self, clients: Clients, tenant: str, n: int) -> str:
        """A memory calendar ``chaos-N@example.com``."""
        with clients.db.write() as conn:
            return accounts.add_account(conn, tenant_id=tenant, provider="memory", address=f"chaos-{n}@example.com",
                                        credentials=None, options={}).id  # fmt: skip

    def inject(self, n: int, entity: str) -> str:
        """Unavailable x3, a lost answer after the write x2, rate limited x2 (retry after 1 s), or one forbidden
        write of ``entity`` (permanent)."""
        faults: list[tuple[str, dict[str, Any]]] = [
            ("3 x unavailable", {"error": "unavailable", "times": 3}),
            ("2 x timeout after the write", {"error": "timeout", "after": True, "times": 2}),
            ("2 x rate limited, retry after 1 s", {"error": "rate_limited", "retry_after": 1, "times": 2}),
        ]
        if n % (len(faults) + 1) == len(faults):
            return self.refuse(entity, 1)
        what, rule = faults[n % (len(faults) + 1)]
        self.provider.add_fault(op="upsert", **rule)
        return what

    def refuse(self, entity: str, times: int) -> str:
        """Forbidden (a permanent error) for the next ``times`` writes of ``entity``."""
        self.provider.add_fault(op="upsert", error="forbidden", entity_id=entity, times=times)
        return f"{times} x forbidden for {entity} (permanent)"

    def faults_off(self) -> None:
        """Remove every rule (the latency's too)."""
        self.provider.clear_faults()

    def applied(self, targets: Mapping[str, TargetId]) -> list[Applied]:
        """The call log's upserts, of known targets."""
        known = set(targets.values())
        return [write for write in memory_writes(self.provider.calls()) if write.target in known]

    def unchecked(self) -> list[str]:
        """The calls before the newest CALL_LOG_LIMIT, once the log dropped some."""
        if len(self.provider.calls()) < CALL_LOG_LIMIT:
            return []
        return [f"effects older than the memory calendar's newest {CALL_LOG_LIMIT} calls (its log's limit): "
                "run shorter, or with --provider google"]  # fmt: skip

    def shown(self, targets: Mapping[str, TargetId]) -> dict[TargetId, Shown]:
        """The stored events that are not cancelled."""
        live = [(e.sync_key, e.body.get("version"), e.body.get("title")) for e in self.provider.events()
                if e.status == "confirmed"]  # fmt: skip
        return shown_of(live, targets)

    def close(self) -> None:
        """Close the provider's file."""
        self.provider.close()


@dataclass
class EffectLog:
    """The Google emulator's writes in the memory provider's words: a 2xx insert is ``created``, a 2xx update or
    patch ``updated``; a write of the version the event already shows is no effect (the memory provider logs it
    ``unchanged``), so a retried update after a lost answer does not count twice."""

    writes: list[tuple[str, str, int]] = field(default_factory=list)  # sync key, effect, version
    _last: dict[str, int] = field(default_factory=dict)

    def record(self, request: Request, status: int | None) -> None:
        """Note one answered request (called with the emulator's request log entry)."""
        found = _EVENTS.search(request.path)
        if found is None or status is None or not 200 <= status < 300 or request.method not in ("POST", "PUT",
                                                                                                  "PATCH"):  # fmt: skip
            return
        body = request.json()
        private = ((body or {}).get("extendedProperties") or {}).get("private") or {}
        key, version = private.get(SYNC_KEY_PROPERTY), private.get(VERSION_PROPERTY)
        if not isinstance(key, str) or not isinstance(version, str):
            return
        if (request.method == "POST") != (found.group(2) is None):
            return  # POST .../events/watch, or an update without an event id: no event written
        effect = "created" if request.method == "POST" else "updated"
        if effect == "updated" and self._last.get(key) == int(version):
            return
        self._last[key] = int(version)
        self.writes.append((key, effect, int(version)))


class GoogleBackend:
    """The Google Calendar emulator in this process; the workers reach it over HTTP with the real adapter."""

    name: BackendName = "google"

    def __init__(self, latency_ms: int) -> None:
        self.app = google.create_app(seed=33)
        self.emulator = RunningEmulator(self.app)
        self._calendars: dict[str, str] = {}  # account id: its calendar (the address)
        self.control = GoogleControl(self.emulator.url, timeout=5)
        self.settings: Mapping[str, Any] = {"google_api_endpoint": self.control.api_endpoint}
        self.effects = EffectLog()
        self._latency_ms = latency_ms
        server = self.emulator.server
        record: Callable[..., None] = server.record

        def recorded(request: Request, status: int | None, extra: Mapping[str, Any] | None = None) -> None:
            record(request, status, extra)
            self.effects.record(request, status)

        server.record = recorded  # type: ignore[method-assign]  # as the pytest plugin's stamp_arrivals does
        self.faults_off()

    def add_account(self, clients: Clients, tenant: str, n: int) -> str:
        """A Google calendar ``chaos-N@example.com`` with user credentials the emulator's token endpoint accepts."""
        secret = self.control.user_credentials(f"1//chaos-{n}", "chaos.apps.googleusercontent.com", "chaos-secret")
        address = f"chaos-{n}@example.com"
        with clients.db.write() as conn:
            account = accounts.add_account(conn, tenant_id=tenant, provider="google", address=address,
                                           credentials=clients.cipher.encrypt(secret), options={}).id  # fmt: skip
        self._calendars[account] = address
        return account

    def inject(self, n: int, entity: str) -> str:
        """503 x3, an update applied and its connection dropped, 429 x2 (Retry-After 1 s), or one update refused
        400 invalid (permanent; ``entity`` is not matched: Google's paths name the event by its own id).

        Updates, because the load creates each event once, in its first round, and changes it from then on."""
        faults: list[tuple[str, dict[str, Any]]] = [
            ("3 x 503 backendError", {"path": "/events", "status": 503, "times": 3}),
            (
                "1 x update applied, connection dropped",
                {"method": "PUT", "path": "/events/", "drop": True, "after": True, "times": 1},
            ),
            (
                "2 x 429 rateLimitExceeded, Retry-After 1 s",
                {"path": "/events", "status": 429, "retry_after": 1, "times": 2},
            ),
        ]
        if n % (len(faults) + 1) == len(faults):
            return self.refuse(entity, 1)
        what, rule = faults[n % (len(faults) + 1)]
        self.control.add_fault(**rule)
        return what

    def refuse(self, entity: str, times: int) -> str:
        """400 invalid (a permanent error) for the next ``times`` updates, whichever event they are of."""
        self.control.add_fault(method="PUT", path="/events/", status=400, reason="invalid", times=times)
        return f"{times} x update 400 invalid (permanent)"

    def faults_off(self) -> None:
        """Remove every rule; keep the latency as a delay-only rule."""
        self.control.clear_faults()
        if self._latency_ms:
            self.control.add_fault(path="/events", delay_ms=self._latency_ms)

    def unchecked(self) -> list[str]:
        """Nothing: :class:`EffectLog` keeps every write."""
        return []

    def applied(self, targets: Mapping[str, TargetId]) -> list[Applied]:
        """The writes :class:`EffectLog` saw, of known targets."""
        return [Applied(targets[key], effect, version) for key, effect, version in self.effects.writes
                if key in targets]  # fmt: skip

    def shown(self, targets: Mapping[str, TargetId]) -> dict[TargetId, Shown]:
        """Every calendar's events that are not cancelled, by their sync-key property."""
        live: list[Live] = []
        for calendar in self._calendars.values():
            for entry in self.app.events.entries(calendar):
                if entry.cancelled:
                    continue
                private = (entry.resource.get("extendedProperties") or {}).get("private") or {}
                version = private.get(VERSION_PROPERTY)
                live.append((str(private.get(SYNC_KEY_PROPERTY)), int(version) if version else None,
                             entry.resource.get("summary")))  # fmt: skip
        return shown_of(live, targets)

    def close(self) -> None:
        """Stop the emulator."""
        self.emulator.stop()
