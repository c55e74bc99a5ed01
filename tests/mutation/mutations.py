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
    "tests/model",
    "tests/worker",
    "tests/redis",
    "tests/producer",
    "tests/store",
    "tests/integration/test_pipeline.py",
)

BACKOFF = "core/model/backoff.py"
PLANNER = "core/model/planner.py"
REDACTION = "core/model/redaction.py"
LOCKS = "core/redis/locks.py"
LOCK_ACQUIRE = "core/redis/lock_acquire.lua"
LOCK_RELEASE = "core/redis/lock_release.lua"
LOCK_EXTEND = "core/redis/lock_extend.lua"
JOB = "core/worker/job.py"
RETRIES = "core/worker/middleware/retries.py"
MESSAGES = "core/messaging/messages.py"
FAILURES = "core/worker/failures.py"
DEAD_LETTERS = "core/worker/middleware/dead_letters.py"
SUBMIT = "core/producer/submit.py"
DEDUP = "core/producer/dedup.py"
CLAIM_MARKERS = "core/producer/claim_markers.lua"
TARGETS = "core/store/targets.py"
ACCOUNT_REMOVAL = "core/store/account_removal.py"
GATE = "core/traffic/gate.py"
SETTLE_SCRIPT = "core/traffic/settle.lua"

_UNIFORM = "uniform(1 - jitter, 1 + jitter)"
_BASE = "base = schedule[min(retries_so_far, len(schedule) - 1)]"
_FLOOR = "return max(delay, retry_after) if retry_after is not None else delay"
_OWNED_EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire'"
_OWNED_RELEASE = "if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end\n"
_RECORD = "        idempotency.record_success(\n"
_IDEMPOTENCY_RECORD = (
    "            tx, payload.idempotency_key, job_id=payload.job_id, result=result, ttl_seconds=parts.idempotency_ttl\n"
    "        )\n"
)
_RESULT_TX = "    with parts.db.write() as tx:\n        won = targets.record_synced(\n"
# (a): the idempotency record in a transaction of its own, committed before the sync result's.
_OWN_TX = "    with parts.db.write() as tx:\n" + _RECORD + _IDEMPOTENCY_RECORD
_RESULT_BODY = (
    "            tx,\n"
    "            target.key,\n"
    "            version=event.version,\n"
    "            external_id=ref.external_id if ref else None,\n"
    "            etag=ref.etag if ref else target.external_etag,\n"
    '            final_status="deleted" if effect == "delete" else "synced",\n'
    "        )\n"
)
_DEFER_OPTIONS = "{DEFERRALS_OPTION: waits + 1}"
_SAME_ATTEMPT = 'delivery.payload.model_copy(update={"scheduled_at": later})'
_DEDUP_SET = '"NX", "EX", ARGV[1])'

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
    # planner
    Mutation("planner-unwanted-not-deleted", PLANNER, "if cancelled or not wanted_present:", "if cancelled:",
             "a target no longer wanted is deleted"),
    Mutation("planner-cancelled-not-deleted", PLANNER, "if cancelled or not wanted_present:", "if not wanted_present:",
             "a cancelled event's targets are deleted"),
    Mutation("planner-always-create", PLANNER,
             'return "update" if target is not None and target.external_id is not None else "create"',
             'return "create"', "a target with an external id is updated, not created again"),
    Mutation("planner-create-key-reused", PLANNER,
             'if operation == "create" and target is not None and (', "if False and (",
             "a create label (its key has no version) only while no earlier job holds the key"),
    Mutation("planner-lost-jobs-never-create", PLANNER, "(not earlier_jobs_lost or target.synced_version > 0)",
             "True", "the reconciler re-plans a never-synced target as a create"),
    # locks
    Mutation("locks-no-renewer", LOCKS, "            if self._renewer is None:\n", "            if False:\n",
             "a held lock is renewed past its TTL"),
    Mutation("locks-renew-once-per-ttl", LOCKS, "self._ttl_ms / 3000", "self._ttl_ms / 1000",
             "renewal comes before the TTL runs out"),
    Mutation("locks-not-exclusive", LOCK_ACQUIRE, "'set', KEYS[1], token, 'NX', 'PX'", "'set', KEYS[1], token, 'PX'",
             "one owner at a time"),
    Mutation("locks-extend-anyones", LOCK_EXTEND, _OWNED_EXTEND, "if true then return redis.call('pexpire'",
             "only the owner extends"),
    Mutation("locks-release-anyones", LOCK_RELEASE, _OWNED_RELEASE, "",
             "only the owner releases"),
    Mutation("locks-lost-not-marked", LOCKS, "            if not extended and not released:\n",
             "            if extended is None and not released:\n",
             "a lock renewal finds taken is marked lost"),
    Mutation("locks-release-not-marked", LOCKS, "        if not released:\n", "        if released is None:\n",
             "a release that finds the lock taken marks it lost"),
    Mutation("locks-lost-answer", LOCK_ACQUIRE, "  if current ~= token then", "  if true then",
             "a take whose answer was lost is recognised as ours"),
    Mutation("locks-handover-kept-while-held", LOCK_ACQUIRE,
             "redis.call('set', KEYS[3], 'unknown', 'EX', ARGV[3], 'GET')", "redis.call('get', KEYS[3])",
             "a held lock's handover says unknown until its holder says what it left"),
    # job: guards
    Mutation("job-already-done-ignored", JOB, "        if snapshot.already_done:\n", "        if False:\n",
             "a done effect is never repeated"),
    Mutation("job-stale-ignored", JOB, "        if _superseded(snapshot, payload, repair=delivery.repair):\n",
             "        if False:\n", "a superseded or already-synced version makes no provider call"),
    Mutation("stale-same-version-skipped", JOB, "snapshot.event.version > wanted", "snapshot.event.version >= wanted",
             "the newest version's job runs"),
    Mutation("stale-repair-skipped", JOB, " and not repair)", ")",
             "a repair sync bypasses the already-synced check"),
    Mutation("stale-synced-resynced", JOB, "synced_version >= wanted and not repair",
             "synced_version > wanted and not repair",
             "a version already synced is not synced again"),
    Mutation("job-tenant-unchecked", JOB, "if account is None or account.tenant_id != payload.tenant_id:",
             "if account is None:", "a job never crosses tenants"),
    Mutation("job-reauth-unchecked", JOB, 'if account.status == "needs_reauth":', "if False:",
             "no provider call for an account awaiting re-authorization"),
    Mutation("job-disabled-unchecked", JOB, 'if account.status == "disabled":', "if False:",
             "no provider call for a disabled account"),
    Mutation("job-absent-not-deleted", JOB, 'wanted = target.wanted == "present" and account.status != "removing"',
             "wanted = True", "a removed account's event is deleted"),
    Mutation("job-leaving-not-deleted", JOB, 'wanted = target.wanted == "present" and account.status != "removing"',
             'wanted = target.wanted == "present"', "an account being removed gets no event back"),
    Mutation("job-cancel-not-deleted", JOB, 'cancelled=event.status == "cancelled"', "cancelled=False",
             "a cancelled event is deleted"),
    Mutation("job-lock-not-released", JOB, "parts.locks.release(held, leaves=leaves)", "None",
             "the target lock is freed when the job ends"),
    # job: the result
    Mutation("job-idempotency-own-tx", JOB, _RESULT_TX + _RESULT_BODY + _RECORD + _IDEMPOTENCY_RECORD,
             _OWN_TX + _RESULT_TX + _RESULT_BODY, "the idempotency record commits with the sync result"),
    Mutation("job-no-idempotency-record", JOB, _RECORD + _IDEMPOTENCY_RECORD, "",
             "a done effect is recorded under its key"),
    Mutation("job-etag-dropped", JOB, "etag=ref.etag if ref else target.external_etag,", "etag=None,",
             "the provider's etag is kept"),
    Mutation("targets-unconditional-cas", TARGETS,
             '.where(BY_KEY, or_(t.c.synced_version < bindparam("v_version"), _REASSERTED))', ".where(BY_KEY)",
             "synced_version only grows (a drift repair re-asserts the synced version once)"),
    Mutation("job-no-repair", JOB, "if latest is None or latest.synced_version <= version:", "if True:",
             "a lost compare-and-set enqueues a repair"),
    Mutation("job-repair-not-marked", MESSAGES, "options={REPAIR_OPTION: True}", "options={}",
             "a repair bypasses the already-synced check"),
    Mutation("job-repair-old-version", JOB, "operation, latest.synced_version, key)", "operation, version, key)",
             "a repair syncs the newest recorded version"),
    Mutation("job-repair-never-deletes", JOB, '= "delete" if latest.wanted == "absent" else "update"', '= "update"',
             "a repair of a removal is labelled delete"),
    # retries
    Mutation("retries-index-plus-one", RETRIES, "self.settings.retry_schedule, retries, jitter",
             "self.settings.retry_schedule, retries + 1, jitter", "retry n waits schedule[n-1]"),
    Mutation("retries-no-jitter", RETRIES, "jitter=self.settings.retry_jitter, retry_after=hint",
             "jitter=0, retry_after=hint", "retries spread by the jitter"),
    Mutation("retries-hint-dropped", RETRIES, "retry_after=hint\n", "retry_after=None\n",
             "a retry-after hint is a floor"),
    Mutation("retries-one-too-many", RETRIES, "if retries >= len(self.settings.retry_schedule):",
             "if retries > len(self.settings.retry_schedule):", "max_retries = the schedule's length"),
    Mutation("retries-count-frozen", RETRIES, "message.options[RETRIES_OPTION] = retries + 1",
             "message.options[RETRIES_OPTION] = retries", "retries run out"),
    Mutation("retries-permanent-retried", RETRIES, "        if is_permanent(error):\n", "        if False:\n",
             "a permanent error is dead-lettered at once"),
    Mutation("retries-last-error-unredacted", RETRIES, "message=error_message(cause) if", "message=str(cause) if",
             "no secret in a waiting target's last_error"),
    Mutation("retries-history-oldest-kept", RETRIES, "[-HISTORY_LIMIT:]", "[:HISTORY_LIMIT]",
             "the history keeps the newest entries"),
    Mutation("retries-due-now", RETRIES, "due_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay),",
             "due_at=dt.datetime.now(dt.UTC),", "a waiting retry's target is not overdue for the reconciler"),
    Mutation("retries-attempt-not-advanced", RETRIES, "[delivery.payload.next_attempt(delay).to_message_arg()]",
             "[delivery.payload.to_message_arg()]", "a retry is the next attempt"),
    Mutation("retries-noted-on-no-version", RETRIES, "version=p.target_version,", "version=0,",
             "a waiting retry is noted on its target"),
    Mutation("retries-enqueue-failure-lost", RETRIES,
             "                self._dead_letter(message, delivery, DeadLetterCause.ENQUEUE_FAILED)\n", "",
             "a retry that can be neither enqueued nor marked owed is dead-lettered, not lost"),
    Mutation("retries-enqueue-failure-not-owed", RETRIES,
             "targets.mark_unqueued(conn, TargetKey(p.tenant_id, p.entity_id, p.account_id))", "None",
             "a retry the broker refused is owed to the reconciler"),
    Mutation("retries-worker-bug-retried", RETRIES, "        elif is_worker_bug(before, entry, error):",
             "        elif False:",
             "the same error twice before any provider request is dead-lettered as a worker bug"),
    # retries: deferral of a busy lock
    Mutation("defer-busy-lock-is-failure", RETRIES, "        if isinstance(error, Deferred):\n", "        if False:\n",
             "a busy lock defers the job instead of failing it"),
    Mutation("defer-burns-retry", RETRIES, _DEFER_OPTIONS,
             "{DEFERRALS_OPTION: waits + 1, RETRIES_OPTION: int(message.options.get(RETRIES_OPTION, 0)) + 1}",
             "a deferral uses no retry"),
    Mutation("defer-burns-attempt", RETRIES, _SAME_ATTEMPT, "ctx.payload.next_attempt(delay)",
             "a deferral keeps the payload's attempt"),
    Mutation("defer-unbounded", RETRIES, "if waits >= self.settings.lock_max_waits:", "if False:",
             "deferrals are bounded by LOCK_MAX_WAITS"),
    Mutation("defer-one-too-many", RETRIES, "if waits >= self.settings.lock_max_waits:",
             "if waits > self.settings.lock_max_waits:", "at most LOCK_MAX_WAITS deferrals"),
    Mutation("defer-count-frozen", RETRIES, _DEFER_OPTIONS, "{DEFERRALS_OPTION: waits}",
             "deferrals are counted"),
    Mutation("defer-no-jitter", RETRIES, "delay = jittered(wait, self.settings.retry_jitter)", "delay = wait",
             "deferrals behind one lock are spread by the jitter"),
    Mutation("defer-at-once", RETRIES, "options=options), delay=int(delay * 1000))", "options=options))",
             "a deferred job waits LOCK_RETRY_DELAY"),
    # failures (history entries, stored messages, causes)
    Mutation("failures-unredacted", FAILURES, "return redact(str(error))[:MESSAGE_LIMIT]",
             "return str(error)[:MESSAGE_LIMIT]", "no secret in last_error, the DLQ record or its history"),
    Mutation("failures-unbounded", FAILURES, "return redact(str(error))[:MESSAGE_LIMIT]", "return redact(str(error))",
             "a stored error message is bounded"),
    Mutation("failures-history-unredacted", FAILURES, '"message": error_message(error),', '"message": str(error),',
             "no secret in the error history"),
    Mutation("failures-worker-bug-despite-io", FAILURES, "if entry.get(PROVIDER_IO) is not False or ", "if ",
             "an error after a provider request walks the schedule"),
    Mutation("failures-worker-bug-on-outage", FAILURES, " or isinstance(error, OWN_OUTAGES)", "",
             "an outage of calsync's own store keeps the schedule"),
    Mutation("failures-invalid-payload-permanent", FAILURES,
             "DeadLetterCause.INVALID_PAYLOAD if isinstance(error, InvalidPayload) else", "",
             "an invalid payload is dead-lettered as such"),
    # traffic control: whose failure, and how far it reaches
    Mutation("gate-own-error-counted", GATE, ") if sent.count else (", ") if True else (",
             "a failure before any provider request counts toward no breaker"),
    Mutation("breaker-any-account", SETTLE_SCRIPT, "  spread = math.min(redis.call('SCARD', KEYS[6]), ",
             "  spread = math.max(redis.call('SCARD', KEYS[6]), ",
             "one account's or one event's failures never open the provider's breaker"),
    # dead letters
    Mutation("dlq-last-error-unredacted", DEAD_LETTERS, "last_error=error_message(error) + (",
             "last_error=str(error) + (", "no secret in a DLQ record"),
    Mutation("dlq-no-reauth-mark", DEAD_LETTERS, "            if isinstance(error, AuthRevoked):\n",
             "            if False:\n", "revoked credentials mark the account"),
    Mutation("dlq-target-not-failed", DEAD_LETTERS, "version=payload.target_version, error_class=",
             "version=0, error_class=", "a dead-lettered target is marked failed"),
    Mutation("dlq-cause-ignored", DEAD_LETTERS, "delivery.dead_letter_cause or rejection_cause(error))",
             "rejection_cause(error))", "the reason says retries were exhausted"),
    Mutation("dlq-reauth-over-disabled", DEAD_LETTERS, 'reauth = account is not None and account.status == "active"',
             "reauth = account is not None", "revoked credentials never re-enable a disabled account"),
    Mutation("dlq-history-duplicated", DEAD_LETTERS, 'if not history or history[-1].get("attempt") != attempt:',
             "if True:", "one history entry per attempt"),
    Mutation("dlq-history-dropped", DEAD_LETTERS, "history = history_option(message.options)",
             "history = []", "the DLQ record keeps every attempt's error"),
    # producer
    Mutation("submit-tenant-unchecked", SUBMIT, "known = {a: s for a, s in found.items() if s.tenant_id == tenant_id}",
             "known = dict(found)", "a change names only its tenant's accounts"),
    Mutation("submit-disabled-accepted", SUBMIT, "            if refused:\n", "            if False:\n",
             "a disabled account is refused"),
    Mutation("submit-removing-accepted", SUBMIT, '(("disabled", "disabled"), ("removing", "being removed"))',
             '(("disabled", "disabled"),)', "an account being removed is refused"),
    Mutation("removal-not-quiet", ACCOUNT_REMOVAL, 'or_(t.c.status != "deleted", t.c.updated_at >= quiet_since)',
             't.c.status != "deleted"', "an account stays until a delete's re-run has found it"),
    Mutation("removal-keeps-create-keys", ACCOUNT_REMOVAL, "conn.execute(delete(r).where(r.c.key.in_(chunk)))",
             "pass", "an account registered again under a removed id creates its events afresh"),
    Mutation("submit-marker-kept-after-failed-enqueue", SUBMIT, "            self.markers.release(Mark.of(job))\n",
             "            pass\n", "a failed enqueue does not suppress the next attempt"),
    Mutation("marker-without-version", DEDUP, "operation, job.target_version)", "operation, 1)",
             "an older version's marker never suppresses a new job"),
    Mutation("dedup-forever", CLAIM_MARKERS, _DEDUP_SET, '"NX")', "the dedup marker expires after DEDUP_TTL"),
    Mutation("dedup-overwritten", CLAIM_MARKERS, _DEDUP_SET, '"EX", ARGV[1])',
             "an identical enqueue returns the first job"),
    Mutation("dedup-create-apart", DEDUP, '"update" if job.operation == "create" else job.operation', "job.operation",
             "an identical resubmit finds the first submission's create job, even claiming before it"),
    # redaction
    Mutation("redact-registered-ignored", REDACTION, "for secret in (*given, *_secrets_snapshot):",
             "for secret in given:", "registered secrets are masked"),
    Mutation("redact-given-ignored", REDACTION, "for secret in (*given, *_secrets_snapshot):",
             "for secret in _secrets_snapshot:", "the call's own secrets are masked"),
    Mutation("redact-short-secrets-skipped", REDACTION, "if secret and maskable(value):",
             "if secret and maskable(value, 60):", "every credential string is registered"),
    Mutation("redact-words-masked", REDACTION, "(len(value) >= _WORD_MAX or _WORD.fullmatch(value) is None)", "True",
             "an ordinary word is never masked, whatever was registered"),
    Mutation("redact-shortest-first", REDACTION, "sorted(_secrets, key=len, reverse=True)", "sorted(_secrets, key=len)",
             "a secret containing another is masked whole"),
    Mutation("redact-nested-skipped", REDACTION, "yield from _strings(item, secret or is_secret_field(str(name)))",
             "yield from _strings(item, is_secret_field(str(name)))",
             "secrets nested in a credentials mapping are registered"),
    Mutation("redact-lines-skipped", REDACTION, "if len(line.strip()) >= _MIN_LINE)", "if False)",
             "each long line of a multi-line secret is registered"),
    Mutation("redact-patterns-off", REDACTION, "    for pattern in _PATTERNS:\n", "    for pattern in ():\n",
             "token-shaped strings are masked unregistered"),
)
# fmt: on
