"""One Redis connection per thread for the per-job commands, sent without the client's per-command machinery.

A hand-written fast path (issue 15): redis-py's client checks a connection out of its pool and back in,
inspects the arguments, wraps the command in its retry loop and telemetry hooks for every command; for
the lock and traffic scripts of a job that machinery cost more CPU than the round trip itself
(benchmarks/pipeline.py). Here each thread keeps one connection of the client's pool until :meth:`close`;
a command is packed by ``hiredis.pack_command`` (what redis-py's own packer calls, minus its per-argument
checks) and sent with ``send_packed_command``, its answer read with ``read_response``. Measured gain
(2026-12-02, 2 shared vCPUs, load ≈ 0.8, alternating runs): a governed job's Redis work in one process (lock
acquire, admit, settle, release) took 506 Python function calls, 174-248 µs CPU and 3 waited round trips
with the traffic scripts on the client; 151 calls, 106-122 µs and 2 round trips here with the success's
settle sent later (278 calls with redis-py's packer). An ungoverned job's (the lock alone): 118 → 76 calls.

``send_later`` sends a command without waiting for its answer: the answer is read, and handed to its
``on_answer`` (the reply, or the error Redis or the connection gave), before this thread's next
``call``/``script`` reads its own. One connection answers in the order it was sent, so answers are
read oldest first and never taken for another command's; Redis also runs them in that order, so a
command sent later always lands before anything this thread sends next. Nothing orders it against
other connections' commands.

A dropped connection (a Redis restart, an idle timeout) is disconnected and the error reaches the
caller; the next command opens a new socket. Answers not yet read on a dropped or reopened connection
(reopened by us or by redis-py itself, e.g. after a failed health check) are handed a ConnectionError:
whether their commands ran is unknown, and their owners say what that means (a lock then expires by
its TTL, a traffic slot by its lease). :meth:`close` never hands the pool a connection with unread
answers. ``on_answer`` runs on the reading thread and must not send commands itself.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final, cast

import hiredis
import redis
from redis.exceptions import NoScriptError

log = logging.getLogger(__name__)

#: What a command sent later is answered with: its reply, or the exception Redis or the connection gave.
OnAnswer = Callable[[Any], None]
Arg = str | int | float | bytes
#: The errors of a dropped connection (redis-py wraps socket errors; OSError for what it does not).
DROPPED: Final = (redis.ConnectionError, redis.TimeoutError, OSError)
_MAX_UNREAD: Final = 32  # answers left unread on one connection before send_later reads them first
# The command as Redis reads it (hiredis' stub types its argument as a 1-tuple).
_pack = cast("Callable[[tuple[Arg, ...]], bytes]", hiredis.pack_command)


def script_sha(text: str) -> str:
    """The SHA1 Redis caches a script under (EVALSHA's first argument)."""
    return hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest()


class _Line:
    """One thread's connection and the callbacks of the answers it has not read yet, oldest first."""

    __slots__ = ("__weakref__", "connection", "unread")

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.unread: list[OnAnswer] = []
        connection.register_connect_callback(self.reopened)  # a weak reference: ThreadConnections keeps us

    def reopened(self, _connection: Any) -> None:
        # Any (re)connect, ours or redis-py's own: answers due on the old socket will never come.
        self.lost(redis.ConnectionError("the connection was reopened before its answers were read"))

    def lost(self, error: BaseException) -> None:
        unread, self.unread = self.unread, []
        for on_answer in unread:
            _hand(on_answer, error)

    def drop(self, error: BaseException) -> None:
        self.connection.disconnect()
        self.lost(error)

    def read_unread(self) -> None:
        # A connection error here drops the connection (whether those commands ran is unknown; their owners
        # decide what that means) and the caller's own command goes on a new one.
        unread, self.unread = self.unread, []
        handed = 0
        try:
            for on_answer in unread:
                try:
                    answer = self.connection.read_response()
                except redis.ResponseError as exc:
                    answer = exc  # a complete answer: the next one follows it
                handed += 1
                _hand(on_answer, answer)
        except BaseException as exc:  # a dropped connection, or an interrupt (a job's time limit) mid-read
            self.connection.disconnect()  # the answers still due must not be read as later commands' own
            for rest in unread[handed:]:
                _hand(rest, exc)
            if not isinstance(exc, DROPPED):
                raise
            log.warning("lost the answers to commands sent without waiting", extra={"fields": {
                "commands": len(unread) - handed, "error": type(exc).__name__}})  # fmt: skip


class ThreadConnections:
    """Each calling thread's own connection from ``client``'s pool; shared by everything a worker thread sends."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._local = threading.local()
        self._lines: list[_Line] = []
        self._guard = threading.Lock()

    def call(self, *args: Arg) -> Any:
        """One command and its answer (earlier unread answers are read first); Redis errors are raised."""
        line = self._line()
        line.read_unread()
        try:
            line.connection.send_packed_command([_pack(args)])
            return line.connection.read_response()
        except redis.ResponseError:
            raise  # a complete answer: the connection is fine
        except BaseException:
            # Dropped, or interrupted between send and read: its answer would be taken for the next command's.
            line.connection.disconnect()
            raise

    def script(self, sha: str, text: str, keys: Sequence[str], args: Sequence[Arg]) -> Any:
        """Run a script by its SHA; EVAL it when Redis forgot it (a restart or SCRIPT FLUSH), which caches it again."""
        try:
            return self.call("EVALSHA", sha, len(keys), *keys, *args)
        except NoScriptError:
            return self.call("EVAL", text, len(keys), *keys, *args)

    def send_later(self, args: Sequence[Arg], on_answer: OnAnswer) -> None:
        """Send a command without waiting; ``on_answer`` gets its reply (or error) before this thread's next call.

        A connection error while sending is raised (the command did not reach Redis, so it can be sent
        again); the connection is dropped and earlier unread answers are handed the error.
        """
        line = self._line()
        if len(line.unread) >= _MAX_UNREAD:
            line.read_unread()
        try:
            # No health-check PING while answers are unread: it would read one of them as its PONG.
            line.connection.send_packed_command([_pack(tuple(args))], check_health=not line.unread)
            line.unread.append(on_answer)
        except BaseException as exc:
            line.drop(exc)
            raise

    def connection(self) -> Any:
        """This thread's connection (taken from the pool on first use)."""
        return self._line().connection

    def _line(self) -> _Line:
        line: _Line | None = getattr(self._local, "line", None)
        if line is None:
            line = self._local.line = _Line(self._client.connection_pool.get_connection())
            with self._guard:
                self._lines.append(line)
        return line

    def close(self) -> None:
        """Give the threads' connections back to the pool, disconnecting any with answers still unread."""
        with self._guard:
            lines, self._lines = self._lines, []
            self._local = threading.local()  # a thread calling after close takes a new connection
        for line in lines:
            line.connection.deregister_connect_callback(line.reopened)
            if line.unread:
                line.drop(redis.ConnectionError("closed before the answers were read"))
            self._client.connection_pool.release(line.connection)


def _hand(on_answer: OnAnswer, answer: Any) -> None:
    try:
        on_answer(answer)
    except Exception:
        log.warning("handling an answer read later failed", exc_info=True)
