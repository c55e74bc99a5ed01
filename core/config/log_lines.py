"""Log lines written whole to the process' own stdout, so Dramatiq's parent process need not relay them.

Dramatiq's CLI points each worker process' ``sys.stdout`` at a pipe to its parent, which reads every
line and writes it again to its stderr: a second process' CPU per job line (about 6 % of a deployed
worker's CPU, docs/notes/dramatiq.md §logs). A worker's JSON lines go instead straight to
the descriptor the process was started with (``calsync worker``'s stdout, the container's), one
``write`` per line.

Lines of several processes sharing that descriptor must not interleave. A pipe write of at most
``PIPE_BUF`` bytes is atomic, but a longer one (a traceback) can be split when the pipe is full, and
another process' line lands inside it. So every line is written under an exclusive ``flock`` on a
lock file the processes of one worker share (``HEARTBEAT_DIR/log-lines.lock``): two system calls per
line, against the relay's five and a process switch.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from typing import IO

__all__ = ["LOCK_NAME", "LineOutput"]

LOCK_NAME = "log-lines.lock"  # in HEARTBEAT_DIR: the directory the worker processes of one pod share


class LineOutput:
    """A text stream for ``logging.StreamHandler`` that writes each ``write()`` whole to a descriptor.

    ``lock``: the file whose ``flock`` serialises writers in other processes (None: this process writes
    alone). The handler's own lock already serialises this process' threads.
    """

    def __init__(self, fd: int, *, lock: Path | None) -> None:
        self.fd = fd
        self._lock_fd: int | None = None
        if lock is not None:
            lock.parent.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)

    @classmethod
    def stdout(cls, *, lock: Path | None) -> LineOutput | IO[str]:
        """The process' original stdout as a line output (``sys.stdout`` when it has no descriptor or no lock)."""
        original = sys.__stdout__
        try:
            fd = original.fileno() if original is not None else -1
        except (OSError, ValueError):  # closed, or a stream without a descriptor
            fd = -1
        if fd < 0:
            return sys.stdout
        try:
            return cls(fd, lock=lock)
        except OSError:  # the lock file cannot be made (a read-only directory): the relay keeps lines whole
            return sys.stdout

    def write(self, text: str) -> int:
        """Write ``text`` (one formatted record and its newline) with nothing of another writer inside it."""
        data = text.encode("utf-8", errors="replace")
        if self._lock_fd is None:
            self._write_all(data)
            return len(text)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            self._write_all(data)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        return len(text)

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def flush(self) -> None:
        """Nothing is buffered: every ``write`` reached the descriptor."""

    def close(self) -> None:
        """Close the lock file (the descriptor written to belongs to the process)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None
