"""Errors are values: every failure the pipeline can meet is one of these classes.

The worker decides retry-or-dead-letter by class alone, never by comparing messages::

    CalsyncError
    ├── TemporaryError                 retried on the schedule; unknown exceptions count as this
    │   ├── RateLimited(retry_after)   provider asked us to slow down (429, 403 rateLimitExceeded, ServerBusy)
    │   │   └── ProviderThrottled      ... for the whole app, every account (Google's per-project quota)
    │   ├── ProviderUnavailable        5xx, connection refused/reset, provider-side timeouts
    │   ├── ProviderTimeout            our own deadline (PROVIDER_TIMEOUT) expired
    │   ├── LockBusy                   another worker holds the resource lock
    │   └── StoreUnavailable           the database or Redis could not be reached
    ├── PermanentError                 dead-lettered at once; a human must act, then replay
    │   ├── InvalidPayload             corrupt message or unknown schema (carries the ids it could read)
    │   │   └── MalformedMessage       bytes on a queue that are no runnable message: quarantined, never run
    │   ├── InvalidChange              a change file / submit call that breaks the contract
    │   │   └── IdempotencyKeyReused   a request key already used for a different change
    │   ├── EntityNotFound             the referenced event, target or account does not exist
    │   ├── AuthRevoked                credentials rejected for good: the account needs re-authorization
    │   ├── AccountInactive            the account is disabled or awaits re-authorization
    │   ├── Forbidden                  the provider refuses this operation for this account
    │   ├── InvalidRequest             the provider rejected the request as malformed
    │   ├── UnrepresentableEvent       the adapter cannot put the event's content into a request (a time out of its
    │   │                              range, a value its library refuses): nothing was sent
    │   ├── QuotaExceeded              the mailbox is full (Exchange ErrorQuotaExceeded)
    │   ├── FullSyncRequired           the provider invalidated a sync token: list everything again
    │   └── ConfigurationError         a setting or secret is missing or wrong
    │       ├── AppCredentialsRejected an app's secret/certificate is wrong or expired, or the app is unknown
    │       │                          (also an AuthRevoked: the account stops until re-authorized)
    │       └── SecretKeyMismatch      no configured secret key opens stored credentials (a worker holds the job)
    └── Deferred                       not a failure: re-enqueued later without using an attempt
        ├── TargetLocked               another delivery holds the target's lock; bounded, gives up as LockBusy
        └── Held(retry_after)          traffic control holds the job for retry_after s: unbounded, never a failure
            ├── ConcurrencyLimited     the account's concurrency slots are taken (ours, or Graph's MailboxConcurrency)
            ├── OverRate               a token bucket (account, tenant or provider) is empty
            ├── BackingOff             the provider asked every job of the account (or provider) to wait
            ├── CircuitOpen            the account's or provider's circuit breaker is open (or its probe is out)
            ├── OutageSuspected        a temporary failure blamed on the provider (another job's failed too, or
            │                          the job's first failure of the attempt): excused, bounded per attempt
            └── CredentialsUnreadable  this worker's secret keys open none of the account's credentials: held
                                       until a worker with the right key takes it, never dead-lettered for it

``reason`` is the short, stable text shown in the DLQ and used as a metric label.
"""

from __future__ import annotations

from typing import ClassVar


class CalsyncError(Exception):
    """Base of every error calsync raises on purpose, so callers can catch ours and only ours."""

    reason: ClassVar[str] = "error"

    @property
    def error_class(self) -> str:
        """Name recorded in the DLQ and in metrics; the class name keeps it stable and greppable."""
        return type(self).__name__


class TemporaryError(CalsyncError):
    """Worth retrying later: the same request may succeed once the world recovers."""

    reason = "temporary failure"

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimited(TemporaryError):
    """The provider throttled us; ``retry_after`` (seconds) is its hint, honoured by the retry schedule."""

    reason = "rate limited"


class ProviderThrottled(RateLimited):
    """The provider throttles the app as a whole: ``retry_after`` holds every account of the provider, not one."""

    reason = "provider throttled"


class ProviderUnavailable(TemporaryError):
    """The provider failed on its side or the network dropped the call."""

    reason = "provider unavailable"


class ProviderTimeout(TemporaryError):
    """The provider did not answer within PROVIDER_TIMEOUT."""

    reason = "provider timeout"


class LockBusy(TemporaryError):
    """Another worker is syncing the same target right now."""

    reason = "lock busy"


class StoreUnavailable(TemporaryError):
    """Our own database or Redis is unreachable; nothing was decided, so retrying is safe."""

    reason = "store unavailable"


class PermanentError(CalsyncError):
    """Retrying cannot help; the job goes to the dead-letter queue with everything needed to replay it."""

    reason = "permanent failure"


class InvalidPayload(PermanentError):
    """The message cannot be parsed as a job payload of a schema we know."""

    reason = "invalid payload"

    def __init__(self, message: str = "", *, ids: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.ids = dict(ids or {})  # the ids the rejected payload did carry (job_id, trace_id, ...), for logs


class MalformedMessage(InvalidPayload):
    """What arrived on a queue is not a message calsync can run (``refusal`` says why); it is quarantined."""

    reason = "malformed message"

    def __init__(self, message: str, *, refusal: str) -> None:
        super().__init__(message)
        self.refusal = refusal


class InvalidChange(PermanentError):
    """A submitted change breaks the contract; nothing was saved."""

    reason = "invalid change"


class IdempotencyKeyReused(InvalidChange):
    """A request key (Idempotency-Key, intake request id) already accepted a different change."""

    reason = "idempotency key reused"


class EntityNotFound(PermanentError):
    """The job references an event, target or account that does not exist (or not for this tenant)."""

    reason = "entity not found"


class AuthRevoked(PermanentError):
    """The provider rejected the credentials for good; the account is marked ``needs_reauth``."""

    reason = "needs re-authorization"


class AccountInactive(PermanentError):
    """The account is disabled or waits for re-authorization, so no call is attempted."""

    reason = "account inactive"


class Forbidden(PermanentError):
    """The provider refuses the operation for this account (permissions, policy)."""

    reason = "forbidden"


class InvalidRequest(PermanentError):
    """The provider rejected our request as malformed; a code or data fix is needed."""

    reason = "invalid request"


class UnrepresentableEvent(PermanentError):
    """The event's content cannot be written in the provider's format; retrying the same content cannot help.

    Submit refuses such content (core/model/content.py); this catches what still reaches an adapter (an event
    stored under older rules): a ValueError or OverflowError while building the request becomes this, not a retry.
    """

    reason = "unrepresentable event"


class FullSyncRequired(PermanentError):
    """The provider no longer honours a sync token (Google's 410 fullSyncRequired): repeating the call cannot help."""

    reason = "full sync required"


class ConfigurationError(PermanentError):
    """A setting, secret or credentials file is missing or malformed."""

    reason = "configuration error"


class QuotaExceeded(PermanentError):
    """The mailbox (or calendar) is over its storage quota: a human must free space, then replay."""

    reason = "quota exceeded"


class AppCredentialsRejected(ConfigurationError, AuthRevoked):
    """The token endpoint refused the app itself (wrong or expired secret, unknown app): fix the app, re-authorize."""

    reason = "app credentials rejected"


class SecretKeyMismatch(ConfigurationError):
    """Stored credentials cannot be decrypted with any configured secret key (CALSYNC_SECRET_KEY, _KEYS)."""

    reason = "secret key mismatch"


class InvalidWebhookEndpoint(PermanentError):
    """A webhook endpoint as given cannot be registered (no or unknown event types, a bad URL)."""

    reason = "invalid webhook endpoint"


class InvalidWebhookUrl(InvalidWebhookEndpoint):
    """A webhook URL that is not https, or that resolves to a refused address (SSRF), is not registered."""

    reason = "invalid webhook URL"


class WebhookEndpointNotFound(PermanentError):
    """No webhook endpoint of that id (for that tenant)."""

    reason = "webhook endpoint not found"


class Deferred(CalsyncError):
    """The job cannot run yet: re-enqueued after a short delay without using an attempt, a bounded number of times."""

    reason = "deferred"

    def give_up(self, waits: int) -> TemporaryError:
        """The failure this becomes after ``waits`` deferrals: from then on the retry schedule handles it."""
        return TemporaryError(f"{self} (still deferred after {waits} waits)")


class TargetLocked(Deferred):
    """Another delivery holds the target's lock right now."""

    reason = "lock busy"

    def give_up(self, waits: int) -> LockBusy:
        """A lock still busy after every wait is a LockBusy failure, retried (and dead-lettered) like any other."""
        return LockBusy(f"lock still busy after {waits} waits")


class Held(Deferred):
    """Traffic control (core/traffic/), or a key the worker lacks, holds the job: it runs again after
    ``retry_after`` s, unbounded."""

    reason = "held by traffic control"

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConcurrencyLimited(Held):
    """Every concurrency slot of the mailbox is taken (ours, or the provider's MailboxConcurrency throttle)."""

    reason = "concurrency limited"

    def give_up(self, waits: int) -> RateLimited:
        """Still no slot after every wait: a throttle, retried (and dead-lettered) like any other."""
        return RateLimited(f"{self} (no free slot after {waits} waits)", retry_after=self.retry_after)


class OverRate(Held):
    """A token bucket is empty: the account's, the tenant's or the provider's request rate is used up."""

    reason = "over rate"


class BackingOff(Held):
    """A Retry-After or back-off another job received holds every job of the account (or of the provider)."""

    reason = "backing off"


class CircuitOpen(Held):
    """The account's or the provider's circuit breaker is open, or half-open with its one probe out."""

    reason = "circuit open"


class OutageSuspected(Held):
    """A temporary failure traffic control blames on the provider, not the job: retried without an attempt."""

    reason = "outage suspected"


class CredentialsUnreadable(Held):
    """The worker's secret keys open none of the account's stored credentials: a configuration problem of the
    worker, not of the job, so the job waits (no attempt used) for a worker with the right key."""

    reason = "credentials unreadable"


def is_permanent(exc: BaseException) -> bool:
    """Only our explicit permanent errors skip the retry schedule; anything unknown is retried (bounded)."""
    return isinstance(exc, PermanentError)


def reason_of(exc: BaseException) -> str:
    """Short stable reason for DLQ records and metric labels, for our errors and foreign ones alike."""
    if isinstance(exc, CalsyncError):
        return exc.reason
    return "unexpected error"


def error_class_of(exc: BaseException) -> str:
    """Class name of an exception as recorded in error histories."""
    return type(exc).__name__
