"""calsync: retry-safe calendar sync jobs.

The public API for Python services that submit changes: ``submit_change`` saves the intent and
enqueues the sync jobs, and returns a :class:`Receipt`. It reads ``CALSYNC_*`` settings by default; a
service configured otherwise passes ``clients=connect(Settings(...))`` and closes them when it stops.

What a submitter can be raised, from the error tree (:mod:`calsync.core.model.errors`)::

    CalsyncError
    ├── TemporaryError
    │   └── StoreUnavailable       the database or Redis could not be reached: try again later
    └── PermanentError
        ├── InvalidChange          the change breaks the contract (docs/PROTOCOL.md); the message says where
        │   └── IdempotencyKeyReused  the request key was used for a different change
        ├── EntityNotFound         a delete or update names an event that does not exist
        └── ConfigurationError     a setting or secret is missing or wrong

A change whose enqueue fails after its commit is not an error: the :class:`Receipt` names the deferred
accounts, and the reconciler enqueues them. Everything else under ``calsync.*`` is internal and may move
between releases.
"""

from calsync.core.clients import Clients, connect
from calsync.core.config.settings import Settings
from calsync.core.model.change import Change, EventFields
from calsync.core.model.errors import (
    CalsyncError,
    ConfigurationError,
    EntityNotFound,
    IdempotencyKeyReused,
    InvalidChange,
    PermanentError,
    StoreUnavailable,
    TemporaryError,
)
from calsync.core.producer.receipts import Receipt
from calsync.core.producer.submit import submit_change

__all__ = [
    "CalsyncError",
    "Change",
    "Clients",
    "ConfigurationError",
    "EntityNotFound",
    "EventFields",
    "IdempotencyKeyReused",
    "InvalidChange",
    "PermanentError",
    "Receipt",
    "Settings",
    "StoreUnavailable",
    "TemporaryError",
    "connect",
    "submit_change",
]
