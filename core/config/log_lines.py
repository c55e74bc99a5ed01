"""Log lines written whole to the process' own stdout, so Dramatiq's parent process need not relay them.

Dramatiq's CLI points each worker process' ``sys.stdout`` at a pipe to its parent, which reads every
line and writes it again to its stderr: a second process' CPU per job line (docs/notes/dramatiq.md §logs).
A worker's JSON lines go instead straight to the descriptor the process was started with (``calsync
worker``'s stdout, the container's), one ``write`` per line.

Lines of several processes sharing that descriptor must not interleave. A write of at most
``PIPE_BUF`` bytes to a pipe is atomic, and so is an append to a file; a longer write to a pipe can be
split when the pipe is full, and another process' line lands inside it. So only lines of at most
``PIPE_BUF`` bytes (a job's line is about 400) are written directly; a longer one (a traceback) goes
to the stream it would have gone to anyway, Dramatiq's relay, whose one writer keeps it whole.
"""

from __future__ import annotations

import os
import select
import sys
from typing import TextIO

__all__ = ["LineOutput"]

ATOMIC_BYTES = select.PIPE_BUF  # the longest write a pipe takes whole, whoever else writes


class LineOutput:
    """A text stream for ``logging.StreamHandler`` that writes each ``write()`` whole to a descriptor.

    ``long_lines``: where a line longer than :data:`ATOMIC_BYTES` goes instead. The handler's own lock
    already serialises this process' threads.
    """

    def __init__(self, fd: int, *, long_lines: TextIO) -> None:
        self.fd = fd
        self.long_lines = long_lines

    @classmethod
    def stdout(cls) -> LineOutput | TextIO:
        """The process' original stdout as a line output (``sys.stdout`` itself when it has no descriptor)."""
        try:
            return cls(sys.__stdout__.fileno(), long_lines=sys.stdout)  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):  # none, closed, or a stream without a descriptor
            return sys.stdout

    def write(self, text: str) -> int:
        """Write ``text`` (one formatted record and its newline) with nothing of another writer inside it."""
        data = text.encode("utf-8", errors="replace")
        if len(data) > ATOMIC_BYTES:
            self.long_lines.write(text)
            self.long_lines.flush()
            return len(text)
        view = memoryview(data)
        while view:  # a signal can cut a write to a file or terminal short (a pipe takes such a line whole)
            view = view[os.write(self.fd, view) :]
        return len(text)

    def flush(self) -> None:
        """Nothing is buffered: every ``write`` reached the descriptor."""
