"""Adapters are released once when the worker stops: the registry's close and the worker's shutdown hook."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from calsync.providers.memory import MemoryProvider
from calsync.providers.registry import ProviderRegistry
from tests.support import Pipeline, make_settings


class RecordingProvider(MemoryProvider):
    """A memory calendar that notes every close in a shared log."""

    def __init__(self, log: list[str], label: str, *, fail: bool = False) -> None:
        super().__init__()
        self.log, self.label, self.fail = log, label, fail

    def close(self) -> None:
        self.log.append(self.label)
        if self.fail:
            raise RuntimeError(f"{self.label} cannot let go")


def test_the_registry_closes_given_and_built_adapters_each_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    shared = RecordingProvider(log, "shared")
    registry = ProviderRegistry(make_settings(tmp_path), {"google": shared, "exchange": shared})
    built = registry.get("memory")
    monkeypatch.setattr(MemoryProvider, "close", lambda self: log.append("built" if self is built else "other"))

    registry.close()

    assert sorted(log) == ["built", "shared"]


def test_one_adapter_failing_to_close_does_not_keep_the_others_open(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []
    registry = ProviderRegistry(
        make_settings(tmp_path),
        {"google": RecordingProvider(log, "google", fail=True), "memory": RecordingProvider(log, "memory")},
    )
    with caplog.at_level(logging.ERROR, logger="calsync.providers.registry"):
        registry.close()
    assert log == ["google", "memory"]
    assert "closing the adapter of google failed" in caplog.text


def test_stopping_the_dramatiq_worker_closes_the_adapters(settings_factory: Any) -> None:
    log: list[str] = []
    pipeline = Pipeline(settings_factory(), provider=RecordingProvider(log, "memory"))
    try:
        with pipeline.worker(threads=1):
            assert log == []
        assert log == ["memory"]
    finally:
        pipeline.close()


def test_worker_close_closes_the_adapters_before_the_clients(
    settings_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    pipeline = Pipeline(settings_factory(), provider=RecordingProvider(log, "memory"))
    real_dispose = pipeline.clients.db.dispose
    monkeypatch.setattr(pipeline.clients.db, "dispose", lambda: (log.append("database"), real_dispose()))
    pipeline.app.close()
    assert log == ["memory", "database"]
