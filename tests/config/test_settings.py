"""Configuration: one settings class, and bad values fail at start-up naming the variable."""

from __future__ import annotations

import pytest

from calsync.core.config.settings import Settings, load_settings
from calsync.core.model.errors import ConfigurationError
from calsync.core.store.crypto import generate_key


def test_defaults_follow_the_seed() -> None:
    settings = load_settings()
    assert settings.retry_schedule == (10, 30, 120, 300, 900)
    assert len(settings.retry_schedule) == 5  # one retry per entry: the failure budget
    assert (settings.retry_jitter, settings.lock_ttl, settings.idempotency_ttl) == (0.2, 60, 86400)
    assert (settings.dedup_ttl, settings.provider_timeout) == (300, 10)
    assert settings.broker_url is None and settings.uses_embedded_redis


def test_the_retry_schedules_are_read_from_comma_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALSYNC_RETRY_SCHEDULE", "1, 2.5,60")
    monkeypatch.setenv("CALSYNC_WEBHOOK_RETRY_SCHEDULE", "0, 5")
    settings = load_settings()
    assert settings.retry_schedule == (1, 2.5, 60) and settings.webhook_retry_schedule == (0, 5)


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("CALSYNC_RETRY_SCHEDULE", "10,abc", "CALSYNC_RETRY_SCHEDULE"),
        ("CALSYNC_RETRY_SCHEDULE", "10,-5", "positive"),
        ("CALSYNC_RETRY_SCHEDULE", " , ", "at least one delay"),
        ("CALSYNC_WEBHOOK_RETRY_SCHEDULE", " , ", "at least one delay"),
        ("CALSYNC_RETRY_JITTER", "1.5", "CALSYNC_RETRY_JITTER"),
        ("CALSYNC_LOCK_TTL", "soon", "CALSYNC_LOCK_TTL"),
        ("CALSYNC_BROKER_URL", "http://example.com", "CALSYNC_BROKER_URL"),
        ("CALSYNC_REDIS_URL", "amqp://x", "CALSYNC_REDIS_URL"),
        ("CALSYNC_DATABASE_URL", "mysql://x", "CALSYNC_DATABASE_URL"),
        ("CALSYNC_PROVIDER_TIMEOUT", "0", "CALSYNC_PROVIDER_TIMEOUT"),
        ("CALSYNC_JOB_TIME_LIMIT", "90", "CALSYNC_LOCK_TTL must be greater than CALSYNC_JOB_TIME_LIMIT"),
        ("CALSYNC_LOG_LEVEL", "LOUD", "CALSYNC_LOG_LEVEL"),
        ("CALSYNC_QUEUE", "a:b", "CALSYNC_QUEUE"),
    ],
)
def test_invalid_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, complaint: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    assert complaint in str(caught.value)


def test_a_child_process_gets_exactly_the_same_settings(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = generate_key(), generate_key()
    original = Settings(
        retry_schedule=(0.5, 2), secret_key=second, secret_keys=(first, second), lock_ttl=65,
        broker_url="redis://h:1/0", embedded_redis=True, account_rate={"google": 2.5}, dead_letter_retention=2592001.5,
    )  # fmt: skip
    for name, value in original.as_environment().items():
        monkeypatch.setenv(name, value)
    assert load_settings() == original


def test_redis_defaults_to_the_broker_and_is_required_with_rabbitmq() -> None:
    from calsync.core.clients import resolve_redis_url

    assert resolve_redis_url(Settings(broker_url="redis://h:1/0"), "redis://h:1/0") == "redis://h:1/0"
    with pytest.raises(ConfigurationError, match="CALSYNC_REDIS_URL"):
        resolve_redis_url(Settings(broker_url="amqp://guest@h//"), "amqp://guest@h//")
