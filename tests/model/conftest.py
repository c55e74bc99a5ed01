"""Model tests are unit tests: no Redis, no database, no broker, no emulator (docs/TESTING.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

_HERE = Path(__file__).parent

SERVICE_FIXTURES = {
    "redis_url", "namespace", "database", "db", "broker_kind", "settings_factory", "pipeline",
    "postgres_available", "rabbitmq_available", "google_server", "ews_server", "start_emulator",
}  # fmt: skip


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a model test that asks for a service: it belongs to the layer that owns that service."""
    for item in items:
        used = SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if used and item.path.is_relative_to(_HERE):
            raise pytest.UsageError(f"{item.nodeid} is a model test but uses {sorted(used)}: move it to its layer")
