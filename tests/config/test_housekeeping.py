"""The housekeeping settings: retentions outlive the idempotency promise; interval 0 turns passes off."""

from __future__ import annotations

import re
from typing import Any

import pytest

from calsync.core.config.housekeeping import HousekeepingSettings
from calsync.core.config.settings import Settings, load_settings
from calsync.core.model.errors import ConfigurationError


@pytest.mark.parametrize("field", ["cancelled_event_retention", "webhook_retention"])
def test_a_retention_below_the_idempotency_ttl_is_refused(field: str) -> None:
    wording = f"CALSYNC_{field.upper()} must be 0 (keep) or at least CALSYNC_IDEMPOTENCY_TTL (3600 < 86400)"
    with pytest.raises(ConfigurationError, match=re.escape(wording)):
        load_settings(**{field: 3600}, idempotency_ttl=86400)
    for kept in (0, 86400):
        values: dict[str, Any] = {"cancelled_event_retention": kept, "webhook_retention": kept}
        values["idempotency_ttl"] = 86400
        assert getattr(Settings(**values), field) == kept


@pytest.mark.parametrize("webhooks", [0, 8 * 86400])
def test_notifications_never_outlive_the_cancelled_events_whose_ids_they_carry(webhooks: float) -> None:
    with pytest.raises(ConfigurationError, match="CALSYNC_WEBHOOK_RETENTION must be at most"):
        load_settings(webhook_retention=webhooks, cancelled_event_retention=7 * 86400)
    assert Settings(webhook_retention=webhooks, cancelled_event_retention=0).webhook_retention == webhooks


def test_an_interval_of_zero_turns_the_workers_passes_off() -> None:
    assert not HousekeepingSettings(maintenance_interval=0).maintenance_enabled
    assert Settings().maintenance_enabled


def test_a_delete_re_run_before_the_provider_timeout_is_refused() -> None:
    wording = "CALSYNC_DELETE_VERIFY_DELAY must be 0 (never) or at least CALSYNC_PROVIDER_TIMEOUT (5 < 10)"
    with pytest.raises(ConfigurationError, match=re.escape(wording)):
        load_settings(delete_verify_delay=5, provider_timeout=10)
    assert Settings(delete_verify_delay=0, provider_timeout=10).delete_verify_delay == 0


def test_a_cancelled_event_retention_within_the_delete_re_run_is_refused() -> None:
    wording = (
        "CALSYNC_CANCELLED_EVENT_RETENTION must be 0 (keep) or greater than CALSYNC_DELETE_VERIFY_DELAY (120 <= 120)"
    )
    with pytest.raises(ConfigurationError, match=re.escape(wording)):
        load_settings(cancelled_event_retention=120, idempotency_ttl=60, delete_verify_delay=120)
