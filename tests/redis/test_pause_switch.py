"""The pause switch as stored: the first pause wins, resume says what it removed, and a value it cannot read still
pauses."""

from __future__ import annotations

import redis

from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.pause import PauseState, PauseSwitch


def test_the_first_pause_wins_and_resume_returns_it(client: redis.Redis, namespace: str) -> None:
    switch = PauseSwitch(client, RedisKeys(namespace))
    assert switch.state() is None and switch.resume() is None

    first, created = switch.pause("ann@host", "deploy")
    again, created_again = switch.pause("bob@host", None)
    assert created and not created_again and again == first == switch.state()
    assert (first.by, first.reason, first.since > 0) == ("ann@host", "deploy", True)
    assert switch.resume() == first and switch.state() is None


def test_a_value_it_cannot_read_still_pauses_and_says_so(client: redis.Redis, namespace: str) -> None:
    switch = PauseSwitch(client, RedisKeys(namespace))
    for unreadable in ("not json", "[1, 2]", '{"since": "yesterday", "by": "ann"}', '{"by": null}'):
        client.set(RedisKeys(namespace).paused(), unreadable)
        state = switch.state()
        assert state is not None and (state.by, state.reason) == ("unknown", "unreadable pause switch value")
        assert state.as_json()["since"] == "1970-01-01T00:00:00+00:00"
    client.set(RedisKeys(namespace).paused(), '{"since": 60, "by": "ann"}')  # written by hand: the rest defaults
    assert switch.state() == PauseState(since=60, by="ann", reason=None)
