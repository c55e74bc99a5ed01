"""core/config/log_lines.py: each line reaches its stream whole, even with several processes writing at once."""

from __future__ import annotations

import io
import json
import logging
import multiprocessing
import os
import sys
from pathlib import Path

import pytest

from calsync.core.config.log_lines import ATOMIC_BYTES, LineOutput
from calsync.core.config.logging import JsonFormatter

WRITERS = "abcd"
LINES_EACH = 40
SHORT = ATOMIC_BYTES - 20  # with its prefix and newline: exactly at the limit or just under
LONG = 150_000  # longer than a pipe holds (64 KiB): written to the pipe, it would be split part way


def _line(mark: str, n: int) -> str:
    # Every fourth line long; the short ones alternate between just under and exactly at the limit.
    size = LONG if n % 4 == 0 else SHORT + n % 2 * 19
    prefix = f"{mark}{n:02d}:"
    return prefix + mark * (size - len(prefix) - 1) + "\n"


def _write_lines(fd: int, elsewhere: Path, mark: str) -> None:
    with open(elsewhere, "w", encoding="utf-8") as long_lines:
        output = LineOutput(fd, long_lines=long_lines)
        for n in range(LINES_EACH):
            output.write(_line(mark, n))


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def test_lines_of_several_processes_never_interleave(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    context = multiprocessing.get_context("fork")  # as Dramatiq's worker processes: forked, sharing the pipe
    writers = [context.Process(target=_write_lines, args=(write_end, tmp_path / f"{mark}.long", mark))
               for mark in WRITERS]  # fmt: skip
    for writer in writers:
        writer.start()
    os.close(write_end)
    data = _read_all(read_end)
    os.close(read_end)
    for writer in writers:
        writer.join(timeout=60)
        assert writer.exitcode == 0
    direct = data.decode().split("\n")
    assert direct.pop() == ""
    for line in direct:
        prefix, _, body = line.partition(":")
        assert body.strip(prefix[0]) == "", f"line {prefix} has another writer's bytes inside it"
    expected = {mark: [_line(mark, n) for n in range(LINES_EACH)] for mark in WRITERS}
    for mark in WRITERS:  # each process' short lines, in its order, whole; its long ones handed over
        short = [x for x in expected[mark] if len(x) <= ATOMIC_BYTES]
        assert [line + "\n" for line in direct if line[0] == mark] == short
        assert (tmp_path / f"{mark}.long").read_text() == "".join(x for x in expected[mark] if x not in short)


def test_the_limit_counts_bytes_not_characters() -> None:
    read_end, write_end = os.pipe()
    elsewhere = io.StringIO()
    output = LineOutput(write_end, long_lines=elsewhere)
    fits = "é" * ((ATOMIC_BYTES - 1) // 2) + "\n"  # two bytes each
    too_long = "é" * (ATOMIC_BYTES // 2) + "\n"  # fewer characters than the limit, more bytes
    assert output.write(fits) == len(fits)
    assert output.write(too_long) == len(too_long)
    output.flush()
    os.close(write_end)
    assert _read_all(read_end) == fits.encode()
    os.close(read_end)
    assert elsewhere.getvalue() == too_long


def test_a_log_record_is_one_json_line_on_the_descriptor() -> None:
    read_end, write_end = os.pipe()
    handler = logging.StreamHandler(LineOutput(write_end, long_lines=io.StringIO()))
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.log_lines")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("synced %s", "évènement", extra={"fields": {"effect": "create"}})
    finally:
        logger.removeHandler(handler)
        os.close(write_end)
    [line] = _read_all(read_end).decode().splitlines()
    os.close(read_end)
    entry = json.loads(line)
    assert (entry["message"], entry["effect"], entry["level"]) == ("synced évènement", "create", "warning")


def test_stdout_is_the_processes_original_descriptor(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    original = os.fdopen(write_end, "w")
    relay = io.StringIO()  # what Dramatiq points sys.stdout at: a pipe to its parent
    monkeypatch.setattr(sys, "__stdout__", original)
    monkeypatch.setattr(sys, "stdout", relay)
    output = LineOutput.stdout()
    assert isinstance(output, LineOutput) and output.fd == write_end and output.long_lines is relay
    output.write("straight\n")
    original.close()
    assert _read_all(read_end) == b"straight\n"
    os.close(read_end)


def test_stdout_without_a_descriptor_falls_back_to_sys_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = io.StringIO()
    monkeypatch.setattr(sys, "stdout", stand_in)
    monkeypatch.setattr(sys, "__stdout__", None)
    assert LineOutput.stdout() is stand_in
