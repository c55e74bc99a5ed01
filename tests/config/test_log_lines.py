"""core/config/log_lines.py: each line reaches the descriptor whole, even from several processes at once."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import sys
from pathlib import Path

import pytest

from calsync.core.config.log_lines import LineOutput
from calsync.core.config.logging import JsonFormatter

# Longer than a pipe holds (64 KiB): each write blocks part way, where an unserialised writer gets in.
LINE_BYTES = 150_000
WRITERS = 4
LINES_EACH = 8


def _write_lines(fd: int, lock: Path, mark: str) -> None:
    output = LineOutput(fd, lock=lock)
    for n in range(LINES_EACH):
        output.write(f"{mark}{n}:" + mark * LINE_BYTES + "\n")
    output.close()


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def test_lines_of_several_processes_never_interleave(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    context = multiprocessing.get_context("fork")  # as Dramatiq's worker processes: forked, sharing the pipe
    writers = [context.Process(target=_write_lines, args=(write_end, tmp_path / "log.lock", mark))
               for mark in "abcd"[:WRITERS]]  # fmt: skip
    for writer in writers:
        writer.start()
    os.close(write_end)
    data = _read_all(read_end)
    os.close(read_end)
    for writer in writers:
        writer.join(timeout=60)
        assert writer.exitcode == 0
    lines = data.decode().split("\n")
    assert lines.pop() == ""
    assert len(lines) == WRITERS * LINES_EACH
    for line in lines:
        mark = line[0]
        prefix, _, body = line.partition(":")
        assert body == mark * LINE_BYTES, f"line {prefix} has another writer's bytes inside it"
    assert sorted(line.partition(":")[0] for line in lines) == sorted(
        f"{mark}{n}" for mark in "abcd"[:WRITERS] for n in range(LINES_EACH)
    )


def test_a_log_record_is_one_json_line_on_the_descriptor(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    output = LineOutput(write_end, lock=tmp_path / "locks" / "log.lock")  # the lock's directory is created
    handler = logging.StreamHandler(output)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.log_lines")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("synced %s", "évènement", extra={"fields": {"effect": "create"}})
    finally:
        logger.removeHandler(handler)
        output.close()
        os.close(write_end)
    [line] = _read_all(read_end).decode().splitlines()
    os.close(read_end)
    entry = json.loads(line)
    assert (entry["message"], entry["effect"], entry["level"]) == ("synced évènement", "create", "warning")
    assert (tmp_path / "locks" / "log.lock").exists()


def test_without_a_lock_it_writes_alone() -> None:
    read_end, write_end = os.pipe()
    output = LineOutput(write_end, lock=None)
    assert output.write("one line\n") == len("one line\n")
    output.flush()
    output.close()
    os.close(write_end)
    assert _read_all(read_end) == b"one line\n"
    os.close(read_end)


def test_stdout_is_the_processes_original_descriptor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    original = os.fdopen(write_end, "w")
    monkeypatch.setattr(sys, "__stdout__", original)
    monkeypatch.setattr(sys, "stdout", object())  # what Dramatiq points it at: a pipe to its parent
    output = LineOutput.stdout(lock=tmp_path / "log.lock")
    assert isinstance(output, LineOutput) and output.fd == write_end
    output.write("straight\n")
    output.close()
    original.close()
    assert _read_all(read_end) == b"straight\n"
    os.close(read_end)


def test_stdout_without_a_descriptor_falls_back_to_sys_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = object()
    monkeypatch.setattr(sys, "stdout", stand_in)
    monkeypatch.setattr(sys, "__stdout__", None)
    assert LineOutput.stdout(lock=None) is stand_in


def test_stdout_without_a_lock_file_falls_back_to_sys_stdout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_in = object()
    monkeypatch.setattr(sys, "stdout", stand_in)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")  # the lock's directory cannot be made under a file
    assert LineOutput.stdout(lock=blocked / "log.lock") is stand_in
