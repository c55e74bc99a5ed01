"""The brokers' signals reach exactly the hooks Dramatiq's own emit would call, in Dramatiq's order."""

from __future__ import annotations

import logging
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.middleware import Middleware, MiddlewareError

from calsync.core.messaging.hooks import HookedEmitter, hooks_for
from calsync.core.messaging.rabbitmq_consumer import SafeRabbitmqBroker
from calsync.core.messaging.redis_consumer import SafeRedisBroker


class HookedStub(HookedEmitter, StubBroker):
    """The mixin on Dramatiq's stub broker: no server needed."""


def _recording(name: str, calls: list[tuple[str, str]], *, fail: BaseException | None = None) -> Middleware:
    class Recorder(Middleware):
        def before_process_message(self, broker: dramatiq.Broker, message: Any) -> None:
            calls.append((name, "before_process_message"))
            if fail is not None:
                raise fail

        def after_process_message(self, broker: dramatiq.Broker, message: Any, **kwargs: Any) -> None:
            calls.append((name, "after_process_message"))
            if fail is not None:
                raise fail

        def after_ack(self, broker: dramatiq.Broker, message: Any) -> None:
            calls.append((name, "after_ack"))

    return Recorder()


def _emit_all(broker: dramatiq.Broker) -> None:
    for signal in ("process_message", "ack"):
        broker.emit_before(signal, "message")
        broker.emit_after(signal, "message")


def test_the_calls_and_their_order_are_dramatiqs() -> None:
    ours: list[tuple[str, str]] = []
    theirs: list[tuple[str, str]] = []
    hooked = HookedStub(middleware=[_recording("a", ours), Middleware(), _recording("b", ours)])
    plain = StubBroker(middleware=[_recording("a", theirs), Middleware(), _recording("b", theirs)])
    _emit_all(hooked)
    _emit_all(plain)
    assert ours == theirs
    assert ours[:2] == [("a", "before_process_message"), ("b", "before_process_message")]
    assert ours[2:4] == [("b", "after_process_message"), ("a", "after_process_message")]


def test_only_overridden_hooks_are_kept() -> None:
    calls: list[tuple[str, str]] = []
    recorder = _recording("a", calls)
    silent = Middleware()
    assert [m for m, _ in hooks_for([silent, recorder], "before_process_message")] == [recorder]
    assert hooks_for([silent, recorder], "before_ack") == ()


def test_a_hook_set_on_the_instance_is_called() -> None:
    calls: list[str] = []
    patched = Middleware()
    patched.before_ack = lambda broker, message: calls.append("patched")  # type: ignore[method-assign]
    HookedStub(middleware=[patched]).emit_before("ack", "message")
    assert calls == ["patched"]


def test_a_middleware_added_later_gets_the_signals() -> None:
    calls: list[tuple[str, str]] = []
    broker = HookedStub(middleware=[])
    broker.emit_before("process_message", "message")  # resolves the signal with no middleware
    broker.add_middleware(_recording("late", calls))
    broker.emit_before("process_message", "message")
    assert calls == [("late", "before_process_message")]


def test_middleware_errors_escape_before_hooks_and_other_errors_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    calls: list[tuple[str, str]] = []
    broker = HookedStub(middleware=[_recording("boom", calls, fail=RuntimeError("boom")), _recording("next", calls)])
    with caplog.at_level(logging.CRITICAL):
        broker.emit_before("process_message", "message")
        broker.emit_after("process_message", "message")
    assert ("next", "before_process_message") in calls and ("next", "after_process_message") in calls
    assert sum("Unexpected failure" in r.getMessage() for r in caplog.records) == 2
    stopping = HookedStub(middleware=[_recording("stop", [], fail=MiddlewareError("skip")), _recording("never", calls)])
    calls.clear()
    with pytest.raises(MiddlewareError):
        stopping.emit_before("process_message", "message")
    assert calls == []


@pytest.mark.parametrize("broker_class", [SafeRedisBroker, SafeRabbitmqBroker])
def test_the_workers_brokers_emit_through_the_table(broker_class: type) -> None:
    assert issubclass(broker_class, HookedEmitter)
    assert broker_class.emit_before is HookedEmitter.emit_before
    assert broker_class.emit_after is HookedEmitter.emit_after
