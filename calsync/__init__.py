"""calsync: retry-safe calendar sync jobs.

The public API for Python services that submit changes: ``submit_change`` saves the intent and
enqueues the sync jobs, and returns a :class:`Receipt`; failures are raised as the classes of the
error tree (see :mod:`calsync.core.model.errors`). Everything else under ``calsync.*`` is internal
and may move between releases.
"""

from calsync.core.model.change import Change, EventFields
from calsync.core.model.errors import (
    AccountInactive,
    AuthRevoked,
    CalsyncError,
    ConfigurationError,
    EntityNotFound,
    Forbidden,
    InvalidChange,
    InvalidPayload,
    InvalidRequest,
    LockBusy,
    PermanentError,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    StoreUnavailable,
    TemporaryError,
)
from calsync.core.producer.submit import Receipt, submit_change

__all__ = [
    "AccountInactive",
    "AuthRevoked",
    "CalsyncError",
    "Change",
    "ConfigurationError",
    "EntityNotFound",
    "EventFields",
    "Forbidden",
    "InvalidChange",
    "InvalidPayload",
    "InvalidRequest",
    "LockBusy",
    "PermanentError",
    "ProviderTimeout",
    "ProviderUnavailable",
    "RateLimited",
    "Receipt",
    "StoreUnavailable",
    "TemporaryError",
    "submit_change",
]
