"""Single-point mutations of the invariant modules: each one a bug the suite must notice."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    """Replace ``old`` (which must occur exactly once in ``path``) by ``new``."""

    name: str
    path: str
    old: str
    new: str
    why: str  # the invariant it breaks
    tests: tuple[str, ...] = ()  # empty: SELECTION


SELECTION = (
    "tests/worker",
    "tests/redis",
    "tests/producer",
    "tests/config",
    "tests/unit/test_backoff.py",
    "tests/unit/test_locks.py",
    "tests/unit/test_middlewares.py",
    "tests/unit/test_secrets.py",
    "tests/integration/test_pipeline.py",
)

BACKOFF = "core/model/backoff.py"
LOCKS = "core/redis/locks.py"
RETRIES = "core/worker/middleware/retries.py"
STALE = "core/worker/middleware/stale.py"
IDEMPOTENCY = "core/worker/middleware/idempotency.py"
DEAD_LETTERS = "core/worker/middleware/dead_letters.py"
JOB = "core/worker/job.py"
SUBMIT = "core/producer/submit.py"
LOGGING = "core/config/logging.py"
TARGETS = "core/store/targets.py"

_UNIFORM = "uniform(1 - jitter, 1 + jitter)"
_BASE = "base = schedule[min(retries_so_far, len(schedule) - 1)]"
_FLOOR = "return max(delay, retry_after) if retry_after is not None else delay"
_OWNED_EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire'"
_OWNED_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end"
_RESULT_TX = "    with runtime.db.direct_write() as tx:\n        won = targets.record_synced("
_OWN_TX = (
    "    with runtime.db.direct_write() as tx:\n"
    "        idempotency.record_success(tx, payload.idempotency_key, job_id=payload.job_id, result=result,"
    " ttl_seconds=runtime.settings.idempotency_ttl)\n" + _RESULT_TX
)
_SYNCED_SKIP = 'if snapshot.target.synced_version >= wanted and not message.options.get("repair"):'

# fmt: off
MUTATIONS: tuple[Mutation, ...] = (
    # backoff
    Mutation("backoff-no-jitter", BACKOFF, f"return seconds * (rng or random).{_UNIFORM}", "return seconds",
             "retries after an outage spread by the jitter"),
    Mutation("backoff-jitter-lopsided", BACKOFF, _UNIFORM, "uniform(1 - jitter, 1 + 2 * jitter)",
             "the jitter window is ± RETRY_JITTER"),
    Mutation("backoff-index-plus-one", BACKOFF, _BASE, "base = schedule[min(retries_so_far + 1, len(schedule) - 1)]",
             "retry n waits schedule[n-1]"),
    Mutation("backoff-last-not-repeated", BACKOFF, _BASE, "base = schedule[min(retries_so_far, len(schedule) - 2)]",
             "the schedule's last entry repeats"),
    Mutation("backoff-hint-ignored", BACKOFF, _FLOOR, "return delay", "a retry-after hint is a floor"),
    Mutation("backoff-hint-ceiling", BACKOFF, _FLOOR, _FLOOR.replace("max(", "min("), "a retry-after hint is a floor"),
    # locks
    Mutation("locks-no-renewer", LOCKS, "        self._ensure_renewer()\n        return held", "        return held",
             "a held lock is renewed past its TTL"),
    Mutation("locks-renew-once-per-ttl", LOCKS, "self._ttl_ms / 3000", "self._ttl_ms / 1000",
             "renewal comes before the TTL runs out"),
    Mutation("locks-not-exclusive", LOCKS, '"SET", key, token, "NX", "PX"', '"SET", key, token, "PX"',
             "one owner at a time"),
    Mutation("locks-extend-anyones", LOCKS, _OWNED_EXTEND, "if true then return redis.call('pexpire'",
             "only the owner extends"),
    Mutation("locks-release-anyones", LOCKS, _OWNED_RELEASE, "return redis.call('del', KEYS[1])",
             "only the owner releases"),
    Mutation("locks-lost-not-marked", LOCKS, "            if not extended:\n", "            if extended is None:\n",
             "a lock renewal finds taken is marked lost"),
    Mutation("locks-release-not-marked", LOCKS, "        if not released:\n", "        if released is None:\n",
             "a release that finds the lock taken marks it lost"),
    Mutation("locks-lost-answer", LOCKS, 'self._call(*take) or self._call("GET", key) == token.encode()',
             "self._call(*take)", "a SET whose answer was lost is recognised as ours"),
    # retries
    Mutation("retries-index-plus-one", RETRIES, "retry_delay(settings.retry_schedule, retries,",
             "retry_delay(settings.retry_schedule, retries + 1,", "retry n waits schedule[n-1]"),
    Mutation("retries-no-jitter", RETRIES, "jitter=settings.retry_jitter", "jitter=0",
             "retries spread by the jitter"),
    Mutation("retries-hint-dropped", RETRIES, "retry_after=hint)", "retry_after=None)",
             "a retry-after hint is a floor"),
    Mutation("retries-one-too-many", RETRIES, "if retries >= self.runtime.settings.max_retries:",
             "if retries > self.runtime.settings.max_retries:", "max_retries = the schedule's length"),
    Mutation("retries-count-frozen", RETRIES, 'message.options["retries"] = retries + 1',
             'message.options["retries"] = retries', "retries run out"),
    Mutation("retries-permanent-retried", RETRIES, "        if is_permanent(error):\n", "        if False:\n",
             "a permanent error is dead-lettered at once"),
    Mutation("retries-last-error-unredacted", RETRIES, "message=redact(str(error))[:MESSAGE_LIMIT],",
             "message=str(error)[:MESSAGE_LIMIT],", "no secret in last_error"),
    Mutation("retries-history-unredacted", RETRIES, '"message": redact(str(error))[:MESSAGE_LIMIT],',
             '"message": str(error)[:MESSAGE_LIMIT],', "no secret in the DLQ history"),
    Mutation("retries-history-oldest-kept", RETRIES, "[-HISTORY_LIMIT:]", "[:HISTORY_LIMIT]",
             "the history keeps the newest entries"),
    Mutation("retries-due-now", RETRIES, "dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay),",
             "dt.datetime.now(dt.UTC),", "a waiting retry's target is not overdue for the reconciler"),
    # stale / idempotency
    Mutation("stale-same-version-skipped", STALE, "if snapshot.event.version > wanted:",
             "if snapshot.event.version >= wanted:", "the newest version's job runs"),
    Mutation("stale-repair-skipped", STALE, _SYNCED_SKIP, "if snapshot.target.synced_version >= wanted:",
             "a repair sync bypasses the already-synced check"),
    Mutation("stale-synced-resynced", STALE, _SYNCED_SKIP, _SYNCED_SKIP.replace(">=", ">"),
             "a version already synced is not synced again"),
    Mutation("idempotency-guard-off", IDEMPOTENCY, "if job_snapshot(self.runtime, ctx).already_done:", "if False:",
             "a done effect is never repeated"),
    # job
    Mutation("job-tenant-unchecked", JOB, "if account is None or account.tenant_id != payload.tenant_id:",
             "if account is None:", "a job never crosses tenants"),
    Mutation("job-reauth-unchecked", JOB, 'if account.status == "needs_reauth":', "if False:",
             "no provider call for an account awaiting re-authorization"),
    Mutation("job-disabled-unchecked", JOB, 'if account.status == "disabled":', "if False:",
             "no provider call for a disabled account"),
    Mutation("job-absent-not-deleted", JOB, 'if event.status == "cancelled" or target.wanted == "absent":',
             'if event.status == "cancelled":', "a removed account's event is deleted"),
    Mutation("job-always-create", JOB, 'return "create" if target.external_id is None else "update"',
             'return "create"', "the effect is named from state (metrics label)"),
    Mutation("job-idempotency-own-tx", JOB, _RESULT_TX, _OWN_TX,
             "the idempotency record commits with the sync result"),
    Mutation("job-no-repair", JOB, "if latest is not None and latest.synced_version > event.version:",
             "if False:", "a lost compare-and-set enqueues a repair"),
    Mutation("job-repair-not-marked", JOB, 'options={"repair": True}', "options={}",
             "a repair bypasses the already-synced check"),
    Mutation("job-repair-never-deletes", JOB, 'operation="delete" if latest.wanted == "absent" else "update",',
             'operation="update",', "a repair of a removal is labelled delete"),
    Mutation("job-etag-dropped", JOB, "etag=ref.etag if ref else target.external_etag,", "etag=None,",
             "the provider's etag is kept"),
    Mutation("targets-unconditional-cas", TARGETS, '.where(_BY_KEY, t.c.synced_version < bindparam("v_version"))',
             ".where(_BY_KEY)", "synced_version only grows"),
    # dead letters
    Mutation("dlq-last-error-unredacted", DEAD_LETTERS, "last_error = redact(str(error))[:MESSAGE_LIMIT]",
             "last_error = str(error)[:MESSAGE_LIMIT]", "no secret in a DLQ record"),
    Mutation("dlq-no-reauth-mark", DEAD_LETTERS, "            if isinstance(error, AuthRevoked):\n",
             "            if False:\n", "revoked credentials mark the account"),
    Mutation("dlq-target-not-failed", DEAD_LETTERS, "version=payload.target_version, error_class=",
             "version=0, error_class=", "a dead-lettered target is marked failed"),
    Mutation("dlq-reason-not-exhausted", DEAD_LETTERS, "exhausted=bool(exhausted)", "exhausted=False",
             "the reason says retries were exhausted"),
    Mutation("dlq-history-duplicated", DEAD_LETTERS, 'if not history or history[-1].get("attempt") != attempt:',
             "if True:", "one history entry per attempt"),
    # producer
    Mutation("submit-tenant-unchecked", SUBMIT, "if account is None or account.tenant_id != tenant_id:",
             "if account is None:", "a change names only its tenant's accounts"),
    Mutation("submit-disabled-accepted", SUBMIT, 'if account.status == "disabled":', "if False:",
             "a disabled account is refused"),
    Mutation("submit-dedup-forever", SUBMIT, "nx=True, ex=self.runtime.settings.dedup_ttl", "nx=True",
             "the dedup marker expires after DEDUP_TTL"),
    Mutation("submit-dedup-overwritten", SUBMIT, "nx=True, ex=self.runtime.settings.dedup_ttl",
             "ex=self.runtime.settings.dedup_ttl", "an identical enqueue returns the first job"),
    # redaction
    Mutation("redact-registered-ignored", LOGGING, "    for secret in _secrets_snapshot:\n", "    for secret in ():\n",
             "registered secrets are masked"),
    Mutation("redact-short-secrets-skipped", LOGGING, "if len(value) >= 6:", "if len(value) >= 60:",
             "every credential string is registered"),
    Mutation("redact-shortest-first", LOGGING, "key=len, reverse=True", "key=len",
             "a secret containing another is masked whole"),
)
# fmt: on
