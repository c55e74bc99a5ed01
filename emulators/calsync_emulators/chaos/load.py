"""The chaos run's load: round after round, a new version of every event for every account, until stopped.

A careful client's behaviour: a submit refused (Redis failing over, the database restarting) is sent again under
the same request key until it is accepted, so every change the load meant is accepted once, even when the answer
to a submit that committed was lost. It remembers each event's last title; the event's latest version is what
calsync's database says.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from calsync.core.producer.submit import Intake

#: How long one change is sent again before the load gives up (the report then shows it lost).
RESEND_FOR_S = 60


class Load:
    """Submits on a thread of its own through ``intake`` for ``tenant``: ``entities`` events on ``accounts``."""

    def __init__(self, intake: Intake, tenant: str, accounts: list[str], entities: list[str], every: float) -> None:
        self.titles: dict[str, str] = {}  # each event's last accepted title
        self.submitted = 0
        self.refused: list[str] = []
        self.given_up: list[str] = []
        self._stopping = threading.Event()
        self._args = (intake, tenant, accounts, entities, every)
        self._thread = threading.Thread(target=self._run, name="chaos-load", daemon=True)

    def start(self) -> None:
        """Start submitting."""
        self._thread.start()

    def stop(self) -> None:
        """Stop after the submit under way."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=RESEND_FOR_S + 10)

    def last(self, entity: str) -> None:
        """One more change of ``entity``, now, on this thread (after :meth:`stop`)."""
        self._change(entity, "last")

    def _run(self) -> None:
        entities, every = self._args[3], self._args[4]
        round_ = 0
        while not self._stopping.is_set():
            round_ += 1
            for entity in entities:
                if self._stopping.is_set():
                    return
                self._change(entity, f"round {round_}")
                time.sleep(every)

    def _change(self, entity: str, label: str) -> None:
        """Change ``entity``'s title to ``<entity> <label>``, under the request key ``<entity>-<label>``."""
        intake, tenant, accounts = self._args[:3]
        title = f"{entity} {label}"
        if self._send(intake, tenant, _change(entity, accounts, title), f"{entity}-{label.replace(' ', '-')}"):
            self.titles[entity] = title
            self.submitted += 1
        else:
            self.given_up.append(f"{entity}: {title}")

    def _send(self, intake: Intake, tenant: str, change: dict[str, Any], request_key: str) -> bool:
        deadline = time.monotonic() + RESEND_FOR_S
        while time.monotonic() < deadline:
            try:
                intake.submit(tenant, change, request_key=request_key)
                return True
            except Exception as exc:  # whatever the outage raises: a client sends it again
                self.refused.append(f"{type(exc).__name__}: {exc}"[:300])
                time.sleep(0.2)
        return False


def _change(entity: str, accounts: list[str], title: str) -> dict[str, Any]:
    event = {"title": title, "start": "2026-12-10T09:00:00", "end": "2026-12-10T10:00:00", "time_zone": "UTC"}
    return {"operation": "upsert", "entity_id": entity, "accounts": accounts, "event": event}
