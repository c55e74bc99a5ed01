"""A ``MessageProxy`` whose message fields are plain properties.

Dramatiq's ``MessageProxy`` reaches the message's fields through ``__getattr__``, which Python calls
only after the normal lookup has failed and built an ``AttributeError`` with its formatted text: 1.04 µs
per read against 0.09 µs for these properties (timeit, 2026-12-02). The worker, its middleware and the job
read those fields about 32 times per delivery. The message is a frozen dataclass, so read-only
properties behave exactly as the delegation did; everything else still goes through ``__getattr__``.
"""

from __future__ import annotations

from typing import Any

from dramatiq.broker import MessageProxy

__all__ = ["FieldedProxy"]


def _field(name: str) -> property:
    def read(self: FieldedProxy) -> Any:
        return getattr(self._message, name)

    read.__name__ = name
    read.__doc__ = f"The message's {name}."
    return property(read)


class FieldedProxy(MessageProxy):
    """Dramatiq's proxy, with the message's fields read without a failed lookup each."""

    queue_name = _field("queue_name")
    actor_name = _field("actor_name")
    args = _field("args")
    kwargs = _field("kwargs")
    options = _field("options")
    message_id = _field("message_id")
    message_timestamp = _field("message_timestamp")
