"""The moment a cancellation is complete: the last target of a cancelled event was deleted at its provider.

:func:`target_deleted` runs after every committed delete of a cancelled event's target (core/worker/job.py)
and tells whether every target of the event is now gone (core/store/cancelled_events.py). It is
asked after the commit, so when the last two deletes commit at the same time both may answer True:
whatever is emitted here (the ``event.cancelled`` notification) must be keyed by (tenant, event,
cancelled version) so the duplicate collapses. Asked inside the result transaction instead, two
concurrent last deletes would each see the other's target still pending and neither would answer True.
"""

from __future__ import annotations

import logging

from calsync.core.model.calendar import EventState
from calsync.core.store import cancelled_events
from calsync.core.store.database import Database

log = logging.getLogger(__name__)


def target_deleted(db: Database, event: EventState) -> bool:
    """After a cancelled event's target was deleted: True when no target of the event is left anywhere."""
    with db.read() as conn:
        gone = cancelled_events.removed_everywhere(conn, event.tenant_id, event.id)
    if gone:
        log.info("cancelled event removed from every account", extra={"fields": {"version": event.version}})
    return gone
