"""Dead letters as an operator selects them in the console, and bulk actions on a whole selection.

A selection (``criteria``, read and checked by core.console.pages.dead_letter_bulk.selection) is the dead-letter
page's query: the same words are the filter form's fields, the confirmation's hidden fields and a bulk action's
record, so what the operator saw is what is acted on.

A bulk action (:class:`BulkActions`) replays or discards the open records a selection matched when the operator
confirmed it, and no others: the highest id matched then bounds it (a later dead letter has a higher id), and only
open records are touched. Why it runs as it does:

- batches of :data:`BATCH` records, each through ``ApiServices.replay`` / ``ApiServices.discard`` (the code the API
  and the CLI run), each followed by one audit row with the count that batch changed (the service commits itself);
- in a daemon thread of the serve process that accepted the confirmation, holding a Redis lease renewed per batch;
- its state (how far, how many changed and skipped, why) in Redis, written after each batch, so any serve process's
  progress page shows it and a reload loses nothing. If the process ends, the lease expires and the progress page
  offers to resume from the last id handled; records handled already are no longer open, so nothing runs twice
  (a batch cut short before its state was written is missing from the counts and the audit log, not repeated).
"""

from __future__ import annotations

import json
import logging
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Final, Literal, cast, get_args

import redis

from calsync.core.api.services import ApiServices
from calsync.core.model.dlq_reports import SkippedOut
from calsync.core.model.vocabulary import DeadLetterKind
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.scripts import LuaScript
from calsync.core.store import audit, dead_letters
from calsync.core.store.dead_letters import DeadLetter, DeadLetterFilter, DeadLetterStatus

log = logging.getLogger(__name__)

Action = Literal["replay", "discard"]
ACTIONS: Final[tuple[Action, ...]] = get_args(Action)
BATCH: Final = 500  # records per batch: one page read, one service call, one audit row
LEASE_MS: Final = 60_000  # a batch of 500 replays takes a few seconds; a lease this long outlives a slow one
KEPT_SECONDS: Final = 7 * 86400  # a bulk action's record in Redis
FLASH_SECONDS: Final = 600
MAX_REASONS: Final = 20  # distinct reasons a bulk action keeps for its progress page


def act(api: ApiServices, action: Action, records: list[DeadLetter], *, actor: str) -> tuple[int, list[SkippedOut]]:
    """Replay or discard ``records`` through the API's own services: how many changed, and the skipped entries
    (``id``, ``job_id``, ``why``)."""
    if action == "replay":
        replayed = api.replay(records)
        return len(replayed.replayed), replayed.skipped
    discarded = api.discard(records, f"discarded from the console by {actor}")
    return len(discarded.discarded), discarded.skipped


def number(value: object, *, most: int = 2**31 - 1) -> int | None:
    """``value`` as a whole number of ``0`` … ``most`` written in ASCII digits (a cursor, a count in a form); None
    for anything else (``int`` alone takes other scripts' digits, and refuses thousands of digits with an error)."""
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > len(str(most)):
        return None
    return int(value) if int(value) <= most else None


def filter_of(criteria: Mapping[str, str], *, open_only: bool = False, up_to_id: int | None = None) -> DeadLetterFilter:
    """The store's filter for a selection; ``open_only`` for an action (whatever status the page showed)."""
    status = "open" if open_only else criteria.get("status", "open")
    return DeadLetterFilter(
        status=None if status == "all" else cast(DeadLetterStatus, status),
        tenant_id=criteria.get("tenant_id"),
        account_id=criteria.get("account_id"),
        provider=criteria.get("provider"),
        kind=cast(DeadLetterKind | None, criteria.get("kind")),
        error_class=criteria.get("error_class"),
        q=criteria.get("q"),
        up_to_id=up_to_id,
    )


def describe(criteria: Mapping[str, str]) -> str:
    """A selection in words for people and the audit log: ``tenant_id="t1" q="timeout"``, or ``every record``."""
    given = [f"{name}={json.dumps(value)}" for name, value in criteria.items() if name != "status"]
    return " ".join(given) or "every record"


@dataclass
class BulkAction:
    """One bulk action: what, by whom, on which selection, the count confirmed, and how far it got."""

    id: str
    action: Action
    actor: str
    criteria: dict[str, str]
    total: int  # open records matched when confirmed
    up_to_id: int  # the highest id among them
    started_at: float
    cursor: int = 0  # the last id handled
    changed: int = 0  # replayed or discarded
    skipped: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # why records were skipped, and how many
    finished_at: float | None = None
    error: str | None = None  # why the last run stopped, when it failed

    @property
    def handled(self) -> int:
        """Records the action has come to: changed or skipped."""
        return self.changed + self.skipped

    @property
    def vanished(self) -> int:
        """Once finished: confirmed records it never came to, closed by someone else meanwhile."""
        return max(0, self.total - self.handled) if self.finished_at is not None else 0

    def count_skipped(self, entries: list[SkippedOut]) -> None:
        """Add a batch's skipped entries to the counts, by reason (the first :data:`MAX_REASONS` reasons by name)."""
        self.skipped += len(entries)
        for entry in entries:
            key = entry.why if entry.why in self.reasons or len(self.reasons) < MAX_REASONS else "other reasons"
            self.reasons[key] = self.reasons.get(key, 0) + 1


class BulkActions:
    """Starts, runs, resumes and reads bulk actions on dead letters; keeps the console's post-redirect-get messages."""

    def __init__(
        self, client: redis.Redis, keys: RedisKeys, api: ApiServices, *, batch: int = BATCH, lease_ms: int = LEASE_MS
    ) -> None:
        self._redis, self._keys, self._api = client, keys, api
        self._batch, self._lease_ms = batch, lease_ms
        self._extend = LuaScript(client, "calsync.core.redis", "lock_extend.lua")
        self._release = LuaScript(client, "calsync.core.redis", "lock_release.lua")

    # --- messages of post-redirect-get ---------------------------------------------------------------------------

    def flash(self, text: str) -> str:
        """Keep ``text`` for the page a redirect leads to; the token the redirect carries (``?done=``)."""
        token = secrets.token_urlsafe(12)
        self._redis.set(self._keys.console_flash(token), text, ex=FLASH_SECONDS)
        return token

    def flashed(self, token: str | None) -> str | None:
        """The text kept under ``token``, None for none (or a token that is no token of ours)."""
        if not token or len(token) > 32 or not token.replace("-", "").replace("_", "").isalnum():
            return None
        raw = self._redis.get(self._keys.console_flash(token))
        return None if raw is None else raw.decode() if isinstance(raw, bytes) else str(raw)

    # --- bulk actions --------------------------------------------------------------------------------------------

    def start(self, action: Action, actor: str, criteria: dict[str, str], *, total: int, up_to_id: int) -> BulkAction:
        """Record a confirmed bulk action and start running it in this process."""
        bulk = self.create(action, actor, criteria, total=total, up_to_id=up_to_id)
        self.resume(bulk.id)
        return bulk

    def create(self, action: Action, actor: str, criteria: dict[str, str], *, total: int, up_to_id: int) -> BulkAction:
        """Record a confirmed bulk action, not running (:meth:`resume` runs it; :meth:`start` does both)."""
        bulk = BulkAction(secrets.token_hex(8), action, actor, criteria, total, up_to_id, started_at=time.time())
        self._save(bulk)
        return bulk

    def get(self, bulk_id: str) -> BulkAction | None:
        """A bulk action as last recorded; None for an unknown (or expired) one."""
        if not bulk_id.isalnum() or len(bulk_id) > 32:
            return None
        raw = self._redis.get(self._keys.console_bulk(bulk_id))
        return None if raw is None else BulkAction(**json.loads(raw))

    def running(self, bulk_id: str) -> bool:
        """Whether a serve process holds the action's lease (is running it)."""
        return bool(self._redis.exists(self._keys.console_bulk_lease(bulk_id)))

    def resume(self, bulk_id: str) -> bool:
        """Run an unfinished action in a thread of this process unless one runs it already; whether this one does."""
        token = secrets.token_hex(8)
        if not self._redis.set(self._keys.console_bulk_lease(bulk_id), token, nx=True, px=self._lease_ms):
            return False
        threading.Thread(target=self._run, args=(bulk_id, token), name=f"console-bulk-{bulk_id}", daemon=True).start()
        return True

    def _run(self, bulk_id: str, token: str) -> None:
        lease = self._keys.console_bulk_lease(bulk_id)
        bulk = None
        try:
            while self._extend([lease], [token, self._lease_ms]):
                bulk = self.get(bulk_id)
                if bulk is None or not self.step(bulk):
                    return
        except Exception as exc:
            log.exception("console bulk action stopped", extra={"fields": {"bulk": bulk_id}})
            if bulk is not None:
                bulk.error = f"{type(exc).__name__}: {exc}"[:500]
                self._save(bulk)
        finally:
            self._release([lease], [token])

    def step(self, bulk: BulkAction) -> bool:
        """Run one batch of ``bulk`` and record it; False once nothing is left (the action is then finished)."""
        confirmed = filter_of(bulk.criteria, open_only=True, up_to_id=bulk.up_to_id)  # what is left: past the cursor
        with self._api.db.read() as conn:
            records = dead_letters.page(conn, confirmed, after_id=bulk.cursor, limit=self._batch)
        if not records:
            bulk.finished_at, bulk.error = time.time(), None
            self._save(bulk)
            return False
        changed, skipped = act(self._api, bulk.action, records, actor=bulk.actor)
        detail = {"bulk": bulk.id, "skipped": len(skipped), "ids": [records[0].id, records[-1].id]}
        with self._api.db.write() as conn:
            audit.record(conn, actor=bulk.actor, action=f"dead_letters.{bulk.action}",
                         subject=f"filter: {describe(bulk.criteria)}", count=changed, detail=detail)  # fmt: skip
        bulk.cursor, bulk.changed, bulk.error = records[-1].id, bulk.changed + changed, None
        bulk.count_skipped(skipped)
        self._save(bulk)
        return True

    def _save(self, bulk: BulkAction) -> None:
        self._redis.set(self._keys.console_bulk(bulk.id), json.dumps(asdict(bulk)), ex=KEPT_SECONDS)
