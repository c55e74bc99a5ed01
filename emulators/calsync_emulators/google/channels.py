"""Push notifications: ``events.watch`` opens a channel, ``channels.stop`` closes it, changes are POSTed to it.

Documented (Google's "Push notifications" guide and the Channel schema): a watch request carries ``id``,
``type`` (``web_hook``), ``address``, optional ``token``, ``expiration`` (ms) and ``params.ttl`` (s); the answer
is the Channel with ``resourceId``, ``resourceUri`` and ``expiration``; a ``sync`` message (number 1) follows
the creation, then one per change; messages are POSTs without a body carrying ``X-Goog-Channel-ID``,
``X-Goog-Channel-Token`` (when set), ``X-Goog-Channel-Expiration`` (RFC 1123), ``X-Goog-Resource-ID``,
``X-Goog-Resource-URI``, ``X-Goog-Resource-State`` (``sync``, ``exists``, ``not_exists``) and
``X-Goog-Message-Number``; ``channels.stop`` takes ``id`` and ``resourceId``.

Inferred or chosen: every change of the watched calendar's events sends one ``exists`` message (Google may
coalesce; ``not_exists`` is for a watched resource that is gone, and the events collection of a calendar
never is, so it is never sent); message numbers count up by one (Google only promises they increase); the
default lifetime is one week (``params.ttl`` or ``expiration`` shorten or lengthen it, uncapped); plain
``http`` addresses are accepted (Google requires HTTPS; the tests' receivers are local); a failed delivery is
logged and not retried (Google retries with exponential backoff); an existing channel id answers 400
``channelIdNotUnique`` (reported); stopping an unknown channel answers 404.
"""

from __future__ import annotations

import collections
import email.utils
import http.client
import queue
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from calsync_emulators.google.errors import ApiError
from calsync_emulators.google.schema import conform, schema

DEFAULT_CHANNEL_TTL = 7 * 86400.0
_DELIVERY_TIMEOUT = 5.0
DELIVERY_LOG_LIMIT = 10_000  # push deliveries remembered (the newest)
_RESOURCE_BASE = "https://www.googleapis.com/calendar/v3/calendars"


@dataclass
class Channel:
    """One open watch channel on a calendar's events."""

    id: str
    resource_id: str
    resource_uri: str
    address: str
    token: str | None
    expiration_ms: int
    calendar_id: str
    messages: int = 0

    def resource(self) -> dict[str, Any]:
        """The Channel resource ``events.watch`` answers with."""
        answer = {
            "kind": "api#channel",
            "id": self.id,
            "resourceId": self.resource_id,
            "resourceUri": self.resource_uri,
            "expiration": str(self.expiration_ms),
        }
        return {**answer, "token": self.token} if self.token is not None else answer

    def headers(self, state: str, number: int) -> dict[str, str]:
        """The headers of one notification."""
        headers = {
            "X-Goog-Channel-ID": self.id,
            "X-Goog-Channel-Expiration": email.utils.formatdate(self.expiration_ms / 1000, usegmt=True),
            "X-Goog-Resource-ID": self.resource_id,
            "X-Goog-Resource-URI": self.resource_uri,
            "X-Goog-Resource-State": state,
            "X-Goog-Message-Number": str(number),
        }
        return {**headers, "X-Goog-Channel-Token": self.token} if self.token is not None else headers


def _expiration_ms(body: Mapping[str, Any], now: float) -> int:
    ttl = (body.get("params") or {}).get("ttl")
    if ttl is not None:
        try:
            return int((now + float(ttl)) * 1000)
        except ValueError as exc:
            raise ApiError(400, "invalid", "Invalid value for: params.ttl") from exc
    if body.get("expiration") is not None:
        return int(body["expiration"])
    return int((now + DEFAULT_CHANNEL_TTL) * 1000)


class Channels:
    """Open channels and the one thread that delivers their notifications in order."""

    def __init__(self) -> None:
        self._channels: dict[str, Channel] = {}
        self._lock = threading.Lock()
        self._outbox: queue.Queue[tuple[Channel, str, int]] = queue.Queue()
        self._deliveries: collections.deque[dict[str, Any]] = collections.deque(maxlen=DELIVERY_LOG_LIMIT)
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """Close every channel (queued messages of closed channels are dropped) and forget the delivery log."""
        with self._lock:
            self._channels.clear()
            self._deliveries.clear()

    def watch(self, calendar_id: str, body: Any, *, strict: bool) -> dict[str, Any]:
        """Open a channel on ``calendar_id``'s events and queue its ``sync`` message."""
        if not isinstance(body, dict):
            raise ApiError(400, "parseError", "Parse Error")
        body = conform(body, schema("Channel"), "", strict=strict)
        for name in ("id", "address"):
            if not body.get(name):
                raise ApiError(400, "required", f"Required {name}", location=name)
        if body.get("type") not in ("web_hook", "webhook"):
            raise ApiError(400, "invalid", "Invalid value for: type", location="type")
        if not str(body["address"]).startswith(("https://", "http://")):
            raise ApiError(400, "invalid", "Invalid value for: address", location="address")
        now = time.time()
        channel = Channel(
            id=body["id"],
            resource_id=secrets.token_urlsafe(20),
            resource_uri=f"{_RESOURCE_BASE}/{quote(calendar_id, safe='')}/events?alt=json",
            address=body["address"],
            token=body.get("token"),
            expiration_ms=_expiration_ms(body, now),
            calendar_id=calendar_id,
        )
        with self._lock:
            if channel.id in self._channels:
                raise ApiError(400, "channelIdNotUnique", "Channel id not unique.")
            self._channels[channel.id] = channel
            self._send(channel, "sync")
        return channel.resource()

    def stop(self, body: Any) -> None:
        """Close the channel named by ``id`` and ``resourceId`` (404 when no such channel is open)."""
        if not isinstance(body, dict):
            raise ApiError(400, "parseError", "Parse Error")
        with self._lock:
            channel = self._channels.get(str(body.get("id")))
            if channel is None or channel.resource_id != body.get("resourceId"):
                raise ApiError(404, "notFound", f"Channel '{body.get('id')}' not found for project")
            del self._channels[channel.id]

    def changed(self, calendar_id: str) -> None:
        """Queue one ``exists`` message on every live channel of the calendar."""
        now_ms = time.time() * 1000
        with self._lock:
            for channel in list(self._channels.values()):
                if channel.calendar_id == calendar_id and channel.expiration_ms > now_ms:
                    self._send(channel, "exists")

    def deliveries(self) -> list[dict[str, Any]]:
        """What was delivered so far: channel, state, number and the receiver's status (None when unreachable)."""
        with self._lock:
            return list(self._deliveries)

    def _send(self, channel: Channel, state: str) -> None:
        channel.messages += 1
        self._outbox.put((channel, state, channel.messages))
        if self._thread is None:
            self._thread = threading.Thread(target=self._deliver_forever, name="google-push", daemon=True)
            self._thread.start()

    def _deliver_forever(self) -> None:
        while True:
            channel, state, number = self._outbox.get()
            with self._lock:
                live = self._channels.get(channel.id) is channel
            if live:
                self._deliver(channel, state, number)

    def _deliver(self, channel: Channel, state: str, number: int) -> None:
        # http.client, not urllib: urllib re-capitalises header names ("X-goog-channel-id"), Google does not.
        address = urlsplit(channel.address)
        kind = http.client.HTTPSConnection if address.scheme == "https" else http.client.HTTPConnection
        connection = kind(address.netloc, timeout=_DELIVERY_TIMEOUT)
        target = (address.path or "/") + (f"?{address.query}" if address.query else "")
        status: int | None
        try:
            connection.request(
                "POST", target, body=b"", headers={**channel.headers(state, number), "Content-Length": "0"}
            )
            status = connection.getresponse().status
        except (OSError, http.client.HTTPException):
            status = None
        finally:
            connection.close()
        with self._lock:
            self._deliveries.append({"channel": channel.id, "state": state, "number": number, "status": status})
