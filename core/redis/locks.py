"""Per-resource locks in Redis: owner token, TTL, renewal while held, release only by the owner.

``SET key token NX PX ttl`` takes a lock; small Lua scripts extend and release it only if the token
still matches, so a worker whose lock expired can never free (or extend) someone else's. One renewer
thread per process extends every held lock every TTL/3; a lock it fails to extend is marked lost.

In a worker process the token also names its owner: the process' heartbeat key (core/worker/heartbeat.py),
recorded only if that key exists when the lock is taken. A lock found busy is taken over, in the same
script, when its recorded owner's heartbeat key is gone: that process has not beaten for ``HEARTBEAT_TTL``,
so it is dead (or stuck, and about to be restarted). A lock with no recorded owner waits for its TTL.
Operations stay idempotent regardless (the job checks its idempotency record under the lock), since a
paused holder can lose its lock while still running (docs/notes/locks.md).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.exceptions import NoScriptError

from calsync.core.redis.periodic import start_repeating

log = logging.getLogger(__name__)

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""
# KEYS: the lock, this process' heartbeat key; ARGV: the token's unique part, TTL in ms. Returns the
# token set and 0 (taken) or 1 (taken over from a dead owner), or nil (busy).
_ACQUIRE = """
local owner = ''
if redis.call('exists', KEYS[2]) == 1 then owner = KEYS[2] end
local token = owner .. '|' .. ARGV[1]
if redis.call('set', KEYS[1], token, 'NX', 'PX', ARGV[2]) then return {token, 0} end
local holder = string.match(redis.call('get', KEYS[1]) or '', '^(.*)|')
if holder == nil or holder == '' or redis.call('exists', holder) == 1 then return nil end
redis.call('set', KEYS[1], token, 'PX', ARGV[2])
return {token, 1}
"""
_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


@dataclass
class HeldLock:
    """A lock this process holds; ``lost`` turns true if renewal found it taken or expired."""

    key: str
    token: str
    lost: bool = field(default=False)
    taken_over: bool = field(default=False)  # from an owner whose heartbeat was gone


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode(), usedforsecurity=False).hexdigest()


class LockManager:
    """Takes, renews and releases locks for one process."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: float) -> None:
        self._client = client
        self._ttl_ms = int(ttl_seconds * 1000)
        # Each worker thread sends its per-job commands on a connection of its own (see _call).
        self._local = threading.local()
        self._connections: list[Any] = []
        self._unread: dict[int, list[HeldLock]] = {}  # per connection: releases sent, answers not yet read
        self._owner: Callable[[], str] | None = None
        self._release_sha = _sha(_RELEASE)
        self._acquire_sha = _sha(_ACQUIRE)
        self._extend = client.register_script(_EXTEND)
        # Tokens only need to be unique: a random per-process part and a counter make them so without a
        # getrandom() call per job. next() on itertools.count is atomic under the GIL.
        self._nonce = secrets.token_hex(12)
        self._serial = itertools.count(1)
        self._held: dict[str, HeldLock] = {}
        self._held_lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def owned_by(self, heartbeat_key: Callable[[], str]) -> None:
        """Record this process' heartbeat key in the locks it takes, so they can be taken over once it is gone."""
        self._owner = heartbeat_key

    def acquire(self, key: str) -> HeldLock | None:
        """Take the lock (or take it over from a dead owner), or return None if a live one holds it."""
        unique = f"{self._nonce}:{next(self._serial)}"
        try:
            taken = self._take(key, unique)
        except (redis.ConnectionError, redis.TimeoutError):
            # The connection was dropped (a restart, an idle timeout): try once more on a new one. The first
            # attempt may have landed before its answer was lost; then the lock is already ours.
            taken = self._take(key, unique)
            if taken is None:
                current = self._call("GET", key)
                taken = (current.decode(), 0) if current and current.endswith(f"|{unique}".encode()) else None
        if taken is None:
            return None
        token, taken_over = taken
        held = HeldLock(key, token, taken_over=bool(taken_over))
        if held.taken_over:
            log.warning("lock taken over from a dead owner", extra={"fields": {"lock_key": key}})
        with self._held_lock:
            self._held[token] = held
        self._ensure_renewer()
        return held

    def release(self, held: HeldLock) -> bool:
        """Free the lock if we still own it; False means it had expired or been taken over."""
        with self._held_lock:
            self._held.pop(held.token, None)
        try:
            released = self._free(held)
        except (redis.ConnectionError, redis.TimeoutError):
            released = self._free(held)  # once more on a new connection (a lost answer just reads as not ours)
        if not released:
            held.lost = True
        return released

    def release_later(self, held: HeldLock) -> None:
        """Free the lock without waiting for Redis' answer, which this thread reads before its next lock command.

        A job's release then costs no round trip of its own (benchmarks/worker.py, docs/notes/performance.md).
        Commands on one connection run in order, so the release lands before anything this thread sends
        next; ``held.lost`` is set once the answer is read. If it cannot be sent, :meth:`release` runs.
        """
        with self._held_lock:
            self._held.pop(held.token, None)
        connection = self._connection()
        try:
            self._read_unread(connection)
            connection.send_command("EVAL", _RELEASE, 1, held.key, held.token)  # EVAL: no NOSCRIPT answer to redo
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            connection.disconnect()
            self.release(held)
            return
        self._unread.setdefault(id(connection), []).append(held)

    def renew_all(self) -> None:
        """Extend every held lock once (the renewer thread calls this every TTL/3)."""
        with self._held_lock:
            held = list(self._held.values())
        if not held:
            return
        pipe = self._client.pipeline(transaction=False)
        for lock in held:
            self._extend(keys=[lock.key], args=[lock.token, self._ttl_ms], client=pipe)
        for lock, extended in zip(held, pipe.execute(), strict=True):
            if not extended:
                lock.lost = True
                log.warning("lock lost before release", extra={"fields": {"lock_key": lock.key}})

    def _take(self, key: str, unique: str) -> tuple[str, int] | None:
        if self._owner is None:  # no heartbeat in this process: a plain lock, never taken over
            token = f"|{unique}"
            return (token, 0) if self._call("SET", key, token, "NX", "PX", self._ttl_ms) else None
        taken = self._script(self._acquire_sha, _ACQUIRE, [key, self._owner()], [unique, self._ttl_ms])
        return (taken[0].decode(), int(taken[1])) if taken else None

    def _free(self, held: HeldLock) -> bool:
        return bool(self._script(self._release_sha, _RELEASE, [held.key], [held.token]))

    def _script(self, sha: str, text: str, keys: list[str], args: list[str | int]) -> Any:
        try:
            return self._call("EVALSHA", sha, len(keys), *keys, *args)
        except NoScriptError:  # a restarted or flushed Redis forgot the script; EVAL caches it again
            return self._call("EVAL", text, len(keys), *keys, *args)

    def _call(self, *args: str | int) -> Any:
        # One command on this thread's own connection, without the client's per-command machinery
        # (pool checkout and check-in, argument inspection, retries, telemetry hooks): that machinery
        # cost a job more CPU than the round trip itself (benchmarks/pipeline.py). A connection error
        # drops the connection (the next call opens a new one) and reaches the caller.
        connection = self._connection()
        try:
            self._read_unread(connection)
            connection.send_command(*args)
            return connection.read_response()
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            connection.disconnect()
            raise

    def _connection(self) -> Any:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._client.connection_pool.get_connection()
            with self._held_lock:
                self._connections.append(connection)
        return connection

    def _read_unread(self, connection: Any) -> None:
        # The answers to this connection's earlier release_later() calls, oldest first.
        unread = self._unread.pop(id(connection), None)
        if not unread:
            return
        try:
            for held in unread:
                try:
                    released = connection.read_response()
                except redis.ResponseError:
                    released = False  # a complete answer (an error): the next one follows it
                if not released:
                    held.lost = True
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            # Released or not, those locks expire by their TTL; the caller's command goes on a new connection.
            connection.disconnect()
            log.warning("lost the answers to lock releases", extra={"fields": {"locks": len(unread)}})

    def _ensure_renewer(self) -> None:
        if self._renewer is not None:
            return
        with self._held_lock:
            if self._renewer is None:
                self._renewer = start_repeating("calsync-lock-renewer", self._stop, self._ttl_ms / 3000, self.renew_all,
                                                log=log, failure="lock renewal failed; will retry",
                                                errors=(redis.RedisError,))  # fmt: skip

    def close(self) -> None:
        """Stop the renewer thread (held locks then expire by TTL) and give back the threads' connections."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        with self._held_lock:
            connections, self._connections = self._connections, []
        for connection in connections:
            if self._unread.pop(id(connection), None):
                connection.disconnect()  # never hand the pool a connection with answers still to read
            self._client.connection_pool.release(connection)
