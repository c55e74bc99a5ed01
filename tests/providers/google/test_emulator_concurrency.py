"""The emulator counts API requests in flight per calendar (the surge benchmark reads the highest per account)."""

from __future__ import annotations

import dataclasses

from calsync.core.model.calendar import Account
from calsync.providers.google.provider import GoogleProvider
from tests.providers.google.gcal_support import Emulator, make_event, target_for


def test_the_highest_number_in_flight_is_kept_per_calendar_until_reset(
    emulator: Emulator, provider: GoogleProvider, account: Account
) -> None:
    other = dataclasses.replace(account, id="acc-other", address="other@example.com")
    for n, owner in enumerate((account, account, other)):
        event = make_event(f"ev-{n}")
        provider.upsert(owner, event, target_for(event, owner))
    assert emulator.highest_concurrency() == {account.address: 1, other.address: 1}  # one call at a time
    emulator.reset()
    assert emulator.highest_concurrency() == {}
