"""Errors are values: every failure the pipeline can meet is one of these classes.

The worker decides retry-or-dead-letter by class alone, never by comparing messages::

    CalsyncError                       ``retry_after``: seconds to wait before trying again, when known
    ├── TemporaryError                 retried on the schedule; unknown exceptions count as this
    │   ├── RateLimited                provider asked us to slow down (429, 403 rateLimitExceeded, ServerBusy)
    │   │   └── ProviderThrottled      ... for the whole app, every account (Google's per-project quota)
    │   ├── ProviderUnavailable        5xx, connection refused/reset, provider-side timeouts
    │   ├── ProviderTimeout            our own deadline (PROVIDER_TIMEOUT) expired
    │   ├── LockBusy                   another worker holds the resource lock
    │   └── StoreUnavailable           the database or Redis could not be reached
    ├── PermanentError                 dead-lettered at once; a human must act, then replay
    │   ├── InvalidPayload             corrupt message or unknown schema (carries the ids it could read)
    │   │   └── MalformedMessage       bytes on a queue that are no runnable message: quarantined, never run
    │   ├── UnknownActor               a message names an actor this worker does not define (core/worker/failures.py)
    │   ├── InvalidChange              a change file / submit call that breaks the contract
    │   │   └── IdempotencyKeyReused   a request key already used for a different change
    │   ├── EntityNotFound             the referenced event, target or account does not exist
    │   │   └── MailboxNotEnabled      no Exchange Online mailbox behind the address (providers/graph/classification.py)
    │   ├── AuthRevoked                credentials rejected for good: the account needs re-authorization
    │   ├── AccountInactive            the account is disabled or awaits re-authorization
    │   ├── Forbidden                  the provider refuses this operation for this account
    │   │   └── AccessPolicyDenied     outside the app's access policy (providers/graph/classification.py)
    │   ├── InvalidRequest             the provider rejected the request as malformed
    │   ├── UnrepresentableEvent       the adapter cannot put the event's content into a request (a time out of its
    │   │                              range, a value its library refuses): nothing was sent
    │   ├── QuotaExceeded              the mailbox is full (Exchange ErrorQuotaExceeded)
    │   ├── FullSyncRequired           the provider invalidated a sync token: list everything again
    │   ├── ConfigurationError         a setting or secret is missing or wrong
    │   │   ├── AppCredentialsRejected an app's secret/certificate is wrong or expired, or the app is unknown
    │   │   │                          (also an AuthRevoked: the account stops until re-authorized)
    │   │   └── SecretKeyMismatch      no configured secret key opens stored credentials (a worker holds the job)
    │   ├── InvalidWebhookEndpoint     a webhook endpoint as given cannot be registered
    │   │   └── InvalidWebhookUrl      not https, or it resolves to a refused address (SSRF)
    │   ├── WebhookEndpointNotFound    no webhook endpoint of that id for the tenant
    │   ├── JobCancelled               an operator cancelled the queued job: its target is dead-lettered, replayable
    │   ├── JobNotCancellable          the job runs, finished or is dead-lettered: nothing waits to be cancelled
    │   └── AccountStatusConflict      an account cannot be enabled or disabled from its status (being removed)
    └── Deferred                       not a failure: re-enqueued later without using an attempt
        ├── TargetLocked               another delivery holds the target's lock; bounded, gives up as LockBusy
        └── Held                       traffic control holds the job for retry_after s: unbounded, never a failure
            ├── ConcurrencyLimited     the account's concurrency slots are taken (ours, or Graph's MailboxConcurrency)
            ├── OverRate               a token bucket (account, tenant or provider) is empty
            ├── BackingOff             the provider asked every job of the account (or provider) to wait
            ├── CircuitOpen            the account's or provider's circuit breaker is open (or its probe is out)
            ├── OutageSuspected        a temporary failure blamed on the provider (another job's failed too, or
            │                          the job's first failure of the attempt): excused, bounded per attempt
            └── CredentialsUnreadable  this worker's secret keys open none of the account's credentials: held
                                       until a worker with the right key takes it, never dead-lettered for it

``reason`` is the short, stable text shown in the DLQ and used as a metric label: every class states its own
(``class LockBusy(TemporaryError, reason="lock busy")``).
"""

from __future__ import annotations

from typing import Any, ClassVar


class CalsyncError(Exception):
    """Base of every error calsync raises on purpose, so callers can catch ours and only ours."""

    reason: ClassVar[str] = "error"

    def __init_subclass__(cls, *, reason: str, **kwargs: Any) -> None:
        """Every error class states its reason (a subclass inheriting its parent's would blur the metric label)."""
        super().__init_subclass__(**kwargs)
        cls.reason = reason

    def __init__(self, message: str = "", *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @classmethod
    def with_subclasses(cls) -> list[type[CalsyncError]]:
        """This class and every class derived from it (the tree below it, walked depth first)."""
        return [cls, *(sub for direct in cls.__subclasses__() for sub in direct.with_subclasses())]


class TemporaryError(CalsyncError, reason="temporary failure"):
    """Worth retrying later: the same request may succeed once the world recovers."""


class RateLimited(TemporaryError, reason="rate limited"):
    """The provider throttled us; ``retry_after`` (seconds) is its hint, honoured by the retry schedule."""


class ProviderThrottled(RateLimited, reason="provider throttled"):
    """The provider throttles the app as a whole: ``retry_after`` holds every account of the provider, not one."""


class ProviderUnavailable(TemporaryError, reason="provider unavailable"):
    """The provider failed on its side or the network dropped the call."""


class ProviderTimeout(TemporaryError, reason="provider timeout"):
    """The provider did not answer within PROVIDER_TIMEOUT."""


class LockBusy(TemporaryError, reason="lock busy"):
    """Another worker is syncing the same target right now."""


class StoreUnavailable(TemporaryError, reason="store unavailable"):
    """Our own database or Redis is unreachable; nothing was decided, so retrying is safe."""


class PermanentError(CalsyncError, reason="permanent failure"):
    """Retrying cannot help; the job goes to the dead-letter queue with everything needed to replay it."""


class InvalidPayload(PermanentError, reason="invalid payload"):
    """The message cannot be parsed as a job payload of a schema we know."""

    def __init__(self, message: str = "", *, ids: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.ids = dict(ids or {})  # the ids the rejected payload did carry (job_id, trace_id, ...), for logs


class MalformedMessage(InvalidPayload, reason="malformed message"):
    """What arrived on a queue is not a message calsync can run (``refusal`` says why); it is quarantined."""

    def __init__(self, message: str, *, refusal: str) -> None:
        super().__init__(message)
        self.refusal = refusal


class InvalidChange(PermanentError, reason="invalid change"):
    """A submitted change breaks the contract; nothing was saved."""


class IdempotencyKeyReused(InvalidChange, reason="idempotency key reused"):
    """A request key (Idempotency-Key, intake request id) already accepted a different change."""


class EntityNotFound(PermanentError, reason="entity not found"):
    """The job references an event, target or account that does not exist (or not for this tenant)."""


class AuthRevoked(PermanentError, reason="needs re-authorization"):
    """The provider rejected the credentials for good; the account is marked ``needs_reauth``."""


class AccountInactive(PermanentError, reason="account inactive"):
    """The account is disabled or waits for re-authorization, so no call is attempted."""


class Forbidden(PermanentError, reason="forbidden"):
    """The provider refuses the operation for this account (permissions, policy)."""


class InvalidRequest(PermanentError, reason="invalid request"):
    """The provider rejected our request as malformed; a code or data fix is needed."""


class UnrepresentableEvent(PermanentError, reason="unrepresentable event"):
    """The event's content cannot be written in the provider's format; retrying the same content cannot help.

    Submit refuses such content (core/model/content.py); this catches what still reaches an adapter (an event
    stored under older rules): a ValueError or OverflowError while building the request becomes this, not a retry.
    """


class FullSyncRequired(PermanentError, reason="full sync required"):
    """The provider no longer honours a sync token (Google's 410 fullSyncRequired): repeating the call cannot help."""


class ConfigurationError(PermanentError, reason="configuration error"):
    """A setting, secret or credentials file is missing or malformed."""


class QuotaExceeded(PermanentError, reason="quota exceeded"):
    """The mailbox (or calendar) is over its storage quota: a human must free space, then replay."""


class AppCredentialsRejected(ConfigurationError, AuthRevoked, reason="app credentials rejected"):
    """The token endpoint refused the app itself (wrong or expired secret, unknown app): fix the app, re-authorize."""


class SecretKeyMismatch(ConfigurationError, reason="secret key mismatch"):
    """Stored credentials cannot be decrypted with any configured secret key (CALSYNC_SECRET_KEY, _KEYS)."""


class InvalidWebhookEndpoint(PermanentError, reason="invalid webhook endpoint"):
    """A webhook endpoint as given cannot be registered (no or unknown event types, a bad URL)."""


class InvalidWebhookUrl(InvalidWebhookEndpoint, reason="invalid webhook URL"):
    """A webhook URL that is not https, or that resolves to a refused address (SSRF), is not registered."""


class WebhookEndpointNotFound(PermanentError, reason="webhook endpoint not found"):
    """No webhook endpoint of that id (for that tenant)."""


class JobCancelled(PermanentError, reason="cancelled by operator"):
    """An operator cancelled a queued or deferred job: its target is dead-lettered, replayable like any other."""


class JobNotCancellable(PermanentError, reason="job not cancellable"):
    """The job is running, finished or dead-lettered already: only a job waiting on the queue can be cancelled."""


class AccountStatusConflict(PermanentError, reason="account status conflict"):
    """An account cannot be enabled or disabled from the status it is in (being removed, awaiting re-authorization)."""


class Deferred(CalsyncError, reason="deferred"):
    """The job cannot run yet: re-enqueued after a short delay without using an attempt, a bounded number of times."""

    def give_up(self, waits: int) -> TemporaryError:
        """The failure this becomes after ``waits`` deferrals: from then on the retry schedule handles it."""
        return TemporaryError(f"{self} (still deferred after {waits} waits)")


class TargetLocked(Deferred, reason="lock busy"):
    """Another delivery holds the target's lock right now."""

    def give_up(self, waits: int) -> LockBusy:
        """A lock still busy after every wait is a LockBusy failure, retried (and dead-lettered) like any other."""
        return LockBusy(f"lock still busy after {waits} waits")


class Held(Deferred, reason="held by traffic control"):
    """Traffic control (core/traffic/), or a key the worker lacks, holds the job: it runs again after
    ``retry_after`` s, unbounded."""


class ConcurrencyLimited(Held, reason="concurrency limited"):
    """Every concurrency slot of the mailbox is taken (ours, or the provider's MailboxConcurrency throttle)."""

    def give_up(self, waits: int) -> RateLimited:
        """Still no slot after every wait: a throttle, retried (and dead-lettered) like any other."""
        return RateLimited(f"{self} (no free slot after {waits} waits)", retry_after=self.retry_after)


class OverRate(Held, reason="over rate"):
    """A token bucket is empty: the account's, the tenant's or the provider's request rate is used up."""


class BackingOff(Held, reason="backing off"):
    """A Retry-After or back-off another job received holds every job of the account (or of the provider)."""


class CircuitOpen(Held, reason="circuit open"):
    """The account's or the provider's circuit breaker is open, or half-open with its one probe out."""


class OutageSuspected(Held, reason="outage suspected"):
    """A temporary failure traffic control blames on the provider, not the job: retried without an attempt."""


class CredentialsUnreadable(Held, reason="credentials unreadable"):
    """The worker's secret keys open none of the account's stored credentials: a configuration problem of the
    worker, not of the job, so the job waits (no attempt used) for a worker with the right key."""


def is_permanent(exc: BaseException) -> bool:
    """Only our explicit permanent errors skip the retry schedule; anything unknown is retried (bounded)."""
    return isinstance(exc, PermanentError)


def reason_of(exc: BaseException) -> str:
    """Short stable reason for DLQ records and metric labels, for our errors and foreign ones alike."""
    return exc.reason if isinstance(exc, CalsyncError) else "unexpected error"


def error_class_of(exc: BaseException) -> str:
    """Class name of an exception as recorded in error histories."""
    return type(exc).__name__
