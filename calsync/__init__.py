"""calsync: retry-safe calendar sync jobs.

The public API for Python services that submit changes: ``submit_change`` saves the intent and
enqueues the sync jobs, and returns a :class:`Receipt`; failures are raised as the classes of the
error tree (see :mod:`calsync.core.model.errors`). It reads ``CALSYNC_*`` settings by default; a
service configured otherwise passes ``runtime=Runtime(Settings(...))``. Everything else under
``calsync.*`` is internal and may move between releases.
"""

from calsync.core.config.settings import Settings
from calsync.core.model.change import Change, EventFields
from calsync.core.model.errors import (
    AccountInactive,
    AppCredentialsRejected,
    AuthRevoked,
    BackingOff,
    CalsyncError,
    CircuitOpen,
    ConcurrencyLimited,
    ConfigurationError,
    Deferred,
    EntityNotFound,
    Forbidden,
    FullSyncRequired,
    Held,
    IdempotencyKeyReused,
    InvalidChange,
    InvalidPayload,
    InvalidRequest,
    InvalidWebhookEndpoint,
    InvalidWebhookUrl,
    LockBusy,
    MalformedMessage,
    OutageSuspected,
    OverRate,
    PermanentError,
    ProviderThrottled,
    ProviderTimeout,
    ProviderUnavailable,
    QuotaExceeded,
    RateLimited,
    StoreUnavailable,
    TargetLocked,
    TemporaryError,
    UnrepresentableEvent,
    WebhookEndpointNotFound,
)
from calsync.core.producer.receipts import Receipt
from calsync.core.producer.submit import submit_change
from calsync.core.runtime import Runtime

__all__ = [
    "AccountInactive",
    "AppCredentialsRejected",
    "AuthRevoked",
    "BackingOff",
    "CalsyncError",
    "Change",
    "CircuitOpen",
    "ConcurrencyLimited",
    "ConfigurationError",
    "Deferred",
    "EntityNotFound",
    "EventFields",
    "Forbidden",
    "FullSyncRequired",
    "Held",
    "IdempotencyKeyReused",
    "InvalidChange",
    "InvalidPayload",
    "InvalidRequest",
    "InvalidWebhookEndpoint",
    "InvalidWebhookUrl",
    "LockBusy",
    "MalformedMessage",
    "OutageSuspected",
    "OverRate",
    "PermanentError",
    "ProviderThrottled",
    "ProviderTimeout",
    "ProviderUnavailable",
    "QuotaExceeded",
    "RateLimited",
    "Receipt",
    "Runtime",
    "Settings",
    "StoreUnavailable",
    "TargetLocked",
    "TemporaryError",
    "UnrepresentableEvent",
    "WebhookEndpointNotFound",
    "submit_change",
]
