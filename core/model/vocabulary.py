"""The pipeline's closed vocabularies, each defined once: job outcomes, sync statuses,
dead-letter causes. Logs, Redis counters, metric labels, the DLQ and ``calsync status`` all spell them
from here."""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal, get_args

from calsync.core.model.errors import InvalidPayload, reason_of


class Outcome(StrEnum):
    """How one delivery of a job ended (``calsync_jobs_total{outcome}``, the per-minute counters)."""

    SUCCESS = "success"
    ALREADY_DONE = "already_done"
    STALE = "stale"
    RETRY_SCHEDULED = "retry_scheduled"
    LOCK_BUSY = "lock_busy"  # the target's lock is held: waits again (bounded by LOCK_MAX_WAITS)
    DEFERRED = "deferred"  # held by traffic control (limits, back-off, circuit breaker): no attempt used
    DEAD_LETTERED = "dead_lettered"


SyncStatus = Literal["pending", "synced", "failed", "deleted"]
SYNC_STATUSES: Final[tuple[SyncStatus, ...]] = get_args(SyncStatus)
# Targets still to sync (pending) or dead-lettered (failed): what ``calsync status`` and the exporter count. Their
# number follows the work in flight; synced and deleted ones pile up with history (docs/notes/scale.md).
OUTSTANDING_STATUSES: Final[tuple[SyncStatus, ...]] = ("pending", "failed")

# Why a pending target waits (``event_targets.wait_reason``; ``calsync events show``, GET /v1/events/{id}): a retry
# after a temporary failure, the target's lock held by another delivery, a hold of traffic control (the Held
# error's ``reason``: a limit, a back-off, an open breaker, an outage), or an enqueue that failed after the commit.
WaitReason = Literal[
    "retry", "lock busy", "held by traffic control", "concurrency limited", "over rate", "backing off",
    "circuit open", "outage suspected", "credentials unreadable", "deferred", "not enqueued",
]  # fmt: skip
WAIT_REASONS: Final[tuple[WaitReason, ...]] = get_args(WaitReason)


# What a target's job is doing, as GET /v1/events and GET /v1/jobs/{job_id} say it: queued and due (pending), waiting
# without using an attempt (deferred: a busy lock, traffic control, an enqueue that failed), waiting to retry after
# a temporary failure (retrying), done (synced: shown or removed as wanted), or in the DLQ (dead-lettered, cancelled
# by an operator included). Read from the sync status and the wait reason (core/store/job_lookup.py).
JobState = Literal["pending", "deferred", "retrying", "synced", "dead-lettered"]
JOB_STATES: Final[tuple[JobState, ...]] = get_args(JobState)


def as_wait_reason(text: str) -> WaitReason:
    """A reason as the vocabulary spells it; an unknown one (a newer release's) reads as ``deferred``."""
    return text if text in WAIT_REASONS else "deferred"


# A dead letter is a job that failed for good, a message quarantined because it is not a job at all, or a
# webhook delivery that failed for good (kind 'webhook': the receiver's status and a truncated body).
DeadLetterKind = Literal["job", "quarantined", "webhook"]
DEAD_LETTER_KINDS: Final[tuple[DeadLetterKind, ...]] = get_args(DeadLetterKind)

# The tables housekeeping deletes from (``calsync_housekeeping_rows_purged_total{table}``), and how a pass ended:
# everything due went, more was due than one pass may delete (``behind``), or it failed.
PrunedTable = Literal[
    "idempotency_records", "intake_requests", "dead_letters", "events", "event_targets",
    "webhook_notifications", "webhook_deliveries", "provider_accounts", "drift_findings", "operator_sessions",
]  # fmt: skip
PRUNED_TABLES: Final[tuple[PrunedTable, ...]] = get_args(PrunedTable)
MaintenanceResult = Literal["caught_up", "behind", "failed"]
MAINTENANCE_RESULTS: Final[tuple[MaintenanceResult, ...]] = get_args(MaintenanceResult)

# What an HTTP API key may do: submit changes, read state, or also operate the DLQ.
ApiScope = Literal["submit", "read", "admin"]
API_SCOPES: Final[tuple[ApiScope, ...]] = get_args(ApiScope)

# Which queue a sync job takes: the normal one, or the bulk lane of a tenant over its enqueue rate.
# An operator of the console (core/console/): a viewer reads every page; an operator also acts (replay, discard,
# cancel, pause, disable) and every such action is written to the audit log.
OperatorRole = Literal["viewer", "operator"]
OPERATOR_ROLES: Final[tuple[OperatorRole, ...]] = get_args(OperatorRole)

Lane = Literal["normal", "bulk"]

# What a webhook notification tells a tenant's services (docs/PROTOCOL.md, "Webhooks").
WebhookEventType = Literal[
    "sync.succeeded", "sync.dead_lettered", "event.cancelled", "account.needs_reauth", "event.drifted",
]  # fmt: skip
WEBHOOK_EVENT_TYPES: Final[tuple[WebhookEventType, ...]] = get_args(WebhookEventType)
# An endpoint is enabled, or disabled by its breaker (``auto``) or by an operator.
WebhookEndpointStatus = Literal["enabled", "disabled"]
WEBHOOK_ENDPOINT_STATUSES: Final[tuple[WebhookEndpointStatus, ...]] = get_args(WebhookEndpointStatus)
WebhookDisabledBy = Literal["auto", "operator"]
# One (notification, endpoint) delivery: still trying, done (2xx), or failed for good (in the DLQ).
WebhookDeliveryStatus = Literal["pending", "delivered", "failed"]
WEBHOOK_DELIVERY_STATUSES: Final[tuple[WebhookDeliveryStatus, ...]] = get_args(WebhookDeliveryStatus)
# Deliveries still to make (pending) or dead-lettered (failed): what ``calsync status`` and the exporter count, as
# OUTSTANDING_STATUSES of targets (delivered ones pile up until housekeeping prunes them).
OUTSTANDING_DELIVERY_STATUSES: Final[tuple[WebhookDeliveryStatus, ...]] = ("pending", "failed")


class WebhookOutcome(StrEnum):
    """How one delivery attempt ended (``calsync_webhook_deliveries_total{outcome}``)."""

    DELIVERED = "delivered"  # 2xx
    RETRY_SCHEDULED = "retry_scheduled"  # 5xx, 408, 429, timeout, connection error: tried again later
    PERMANENT = "permanent"  # another 4xx: dead-lettered at once
    EXHAUSTED = "exhausted"  # retries ran out: dead-lettered
    REFUSED = "refused"  # the URL now resolves to a refused address (SSRF): dead-lettered
    SKIPPED = "skipped"  # the endpoint is disabled or gone, or the delivery is already done


class DeadLetterCause(StrEnum):
    """Why a message went to the dead-letter queue."""

    PERMANENT = "permanent"  # a PermanentError: retrying cannot help
    EXHAUSTED = "exhausted"  # a temporary error outlived the retry schedule
    ENQUEUE_FAILED = "enqueue_failed"  # the next attempt could not be enqueued
    UNKNOWN_ACTOR = "unknown_actor"  # no actor of that name in this worker
    INVALID_PAYLOAD = "invalid_payload"  # the message is not a job of a schema we know
    QUARANTINED = "quarantined"  # the bytes on the queue are no runnable message (kind 'quarantined')
    WORKER_BUG = "worker_bug"  # the same error on two attempts in a row, neither of which reached the provider
    CANCELLED = "cancelled"  # an operator cancelled the queued or deferred job (POST /v1/jobs/{job_id}/cancel)

    def reason(self, error: BaseException | None) -> str:
        """The DLQ record's ``reason`` and the ``calsync_dead_letters_total{reason}`` label: one text for both."""
        if self is DeadLetterCause.PERMANENT:
            return reason_of(error) if error is not None else "permanent failure"
        if self is DeadLetterCause.QUARANTINED:
            return f"{self.value}: {getattr(error, 'refusal', 'malformed')}"
        return _REASONS[self]

    def detail(self, attempts: int) -> str | None:
        """What the DLQ record's ``last_error`` adds after the error's own message."""
        if self is DeadLetterCause.EXHAUSTED:
            return f"retries exhausted after {attempts} attempts"
        if self is DeadLetterCause.ENQUEUE_FAILED:
            return "the retry could not be enqueued"
        if self is DeadLetterCause.WORKER_BUG:
            return f"the same error on attempts {attempts - 1} and {attempts}, before any provider request"
        return None


_REASONS: Final = {
    DeadLetterCause.EXHAUSTED: "retries exhausted",
    DeadLetterCause.ENQUEUE_FAILED: "retry enqueue failed",
    DeadLetterCause.UNKNOWN_ACTOR: "unknown actor",
    DeadLetterCause.INVALID_PAYLOAD: InvalidPayload.reason,
    DeadLetterCause.WORKER_BUG: "worker bug",
    DeadLetterCause.CANCELLED: "cancelled by operator",
}
_CAUSES_BY_REASON: Final = {reason: cause for cause, reason in _REASONS.items()}


class Refusal(StrEnum):
    """Why a message was quarantined instead of run (the DLQ reason is ``quarantined: <refusal>``)."""

    TOO_LARGE = "too large"
    NOT_UTF8 = "not UTF-8"
    NOT_JSON = "not JSON"
    NOT_ENVELOPE = "not a message envelope"
    WRONG_QUEUE = "wrong queue"
    UNKNOWN_ACTOR = "unknown actor"
    BAD_ARGUMENTS = "arguments do not fit the actor"
    BAD_OPTION = "bad option"
    BROKER_ID = "broker message id mismatch"
    NO_BODY = "no body"


def cause_of_reason(reason: str) -> DeadLetterCause:
    """The cause a stored DLQ ``reason`` states (every reason that is not one of the causes' own is permanent)."""
    if reason.startswith(f"{DeadLetterCause.QUARANTINED.value}:"):
        return DeadLetterCause.QUARANTINED
    return _CAUSES_BY_REASON.get(reason, DeadLetterCause.PERMANENT)
