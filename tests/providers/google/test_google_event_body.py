"""What the adapter counts as a difference between the event Google holds and the state it wants."""

from __future__ import annotations

from calsync.core.model.calendar import Target
from calsync.providers.google.event_body import event_body, shows
from tests.providers.google.gcal_support import make_event


def test_times_are_compared_as_instants_not_strings() -> None:
    event = make_event()  # 09:00-10:00 Europe/Berlin, sent without an offset
    wanted = event_body(event, Target(event_id=event.id, account_id="a", tenant_id=event.tenant_id))
    answered = {
        **wanted,
        "start": {"dateTime": "2026-12-01T08:00:00Z", "timeZone": "Europe/Berlin"},
        "end": {"dateTime": "2026-12-01T18:00:00+09:00", "timeZone": "Europe/Berlin"},
    }
    moved = {**answered, "start": {"dateTime": "2026-12-01T09:00:00Z", "timeZone": "Europe/Berlin"}}
    assert shows(answered, wanted, "primary")
    assert not shows(moved, wanted, "primary")
    assert not shows({**answered, "summary": "Edited in Google"}, wanted, "primary")
