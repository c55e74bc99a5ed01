"""Every Redis key calsync reads or writes is named here, and only here.

All keys share the namespace prefix (setting ``REDIS_NAMESPACE``, default ``calsync``), which is
also the Dramatiq broker namespace, so one Redis can host several isolated deployments.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RedisKeys:
    """Builds key names for one namespace."""

    namespace: str

    def lock(self, tenant_id: str, entity_id: str, account_id: str) -> str:
        """String holding the owner token of a per-target lock: ``<owner's heartbeat key>|<unique part>``.

        Written (SET NX PX or taken over from a dead owner, renewed, deleted by token) by
        :class:`core.redis.locks.LockManager` in workers; read by the same lock scripts only.
        """
        return f"{self.namespace}:lock:{tenant_id}:{entity_id}:{account_id}"

    def handover(self, tenant_id: str, entity_id: str, account_id: str) -> str:
        """String holding what the last holder of a target's lock left it as: ``<synced version>:<create sent>``.

        ``unknown`` while a holder has the lock (or after a release that did not know); EX ``HANDOVER_TTL``.
        Written by the lock scripts of :class:`core.redis.locks.LockManager` (acquire: ``unknown``; release:
        the state the job says it left); read by the acquire script, whose answer tells the job whether its
        read before the lock is still current (core.worker.snapshot).
        """
        return f"{self.namespace}:handover:{tenant_id}:{entity_id}:{account_id}"

    def dedup(self, tenant_id: str, entity_id: str, account_id: str, operation: str, version: int) -> str:
        """Marker that a job for this target version was enqueued recently (TTL ``DEDUP_TTL``).

        Written with SET NX EX by the producer; read by the producer only. An optimisation, never the truth.
        """
        return f"{self.namespace}:dedup:{tenant_id}:{entity_id}:{account_id}:{operation}:v{version}"

    def coalesce(self, tenant_id: str, entity_id: str, account_id: str) -> str:
        """The coalesce marker: when a target's coalesce window opened (Redis time, ms); PX ``COALESCE_WINDOW``.

        Written (set when absent or older than ``COALESCE_MAX_WAIT``, else its PX refreshed) and read by the
        producer only, in the one script call that claims the dedup markers too (core.producer.dedup):
        absent, the job goes out at once; present, it is delayed by the window so only the newest edit writes.
        """
        return f"{self.namespace}:coalesce:{tenant_id}:{entity_id}:{account_id}"

    def tenant_enqueues(self, tenant_id: str, window: int) -> str:
        """Count of sync jobs a tenant enqueued in one fixed window (number ``window``; TTL two windows).

        Written (INCRBY, never decremented) and read by the producer's lane choice (core.producer.lanes).
        """
        return f"{self.namespace}:fair:{tenant_id}:{window}"

    def stats(self, minute: int) -> str:
        """Hash of job outcome counts for one minute (field ``outcome``), expiring after a day.

        Written (HINCRBY) by workers, batched once a second (core.redis.stats); read by ``calsync status`` and
        ``calsync demo``.
        """
        return f"{self.namespace}:stats:{minute}"

    def ready_queue(self, queue: str) -> str:
        """Dramatiq's list of ready message ids (what KEDA scales on).

        Written by Dramatiq (producers and workers); read by the queue exporter and KEDA.
        """
        return f"{self.namespace}:{queue}"

    def queue_messages(self, queue: str) -> str:
        """Dramatiq's hash of ready and in-flight message bodies.

        Written by Dramatiq; read by the exporter.
        """
        return f"{self.namespace}:{queue}.msgs"

    def delayed_messages(self, queue: str) -> str:
        """Dramatiq's hash of delayed (retry) message bodies, including those held in worker memory.

        Written by Dramatiq; read by the exporter (its LLEN twin reads 0 while workers hold the messages).
        """
        return f"{self.namespace}:{queue}.DQ.msgs"

    def delayed_queue(self, queue: str) -> str:
        """Dramatiq's list of delayed message ids no worker has prefetched yet.

        Written by Dramatiq and the producer's batch enqueue (delayed enqueues: settling targets) and by
        ``calsync retry-now`` (which removes the ids it moves);
        read by Dramatiq's delay-queue consumer.
        """
        return f"{self.namespace}:{queue}.DQ"

    def pulled_forward(self, queue: str, redis_message_id: str) -> str:
        """Marks a delayed message a worker holds whose ready copy ``calsync retry-now`` pushed (TTL: a day).

        Written and read by ``calsync retry-now`` only, so a second run does not copy the same message again.
        """
        return f"{self.namespace}:retry-now:{queue}:{redis_message_id}"

    def worker_heartbeat(self, worker: str) -> str:
        """String marking one live worker process (``host:pid``), set with a TTL of ``HEARTBEAT_TTL``.

        Written (SET PX, every ``HEARTBEAT_INTERVAL``; deleted at graceful shutdown) by that process's
        heartbeat thread; read by the exporter and ``calsync status`` (found through :meth:`workers`), and
        (EXISTS) by the lock scripts, which take over a lock whose owner's key is gone. Dramatiq's own
        ``__heartbeats__`` set cannot count workers: producers write it too.
        """
        return f"{self.namespace}:heartbeat:{worker}"

    def workers(self) -> str:
        """Set of the worker names (``host:pid``) whose heartbeat key may be live (core/redis/live_workers.py)."""
        return f"{self.namespace}:workers"

    def paused(self) -> str:
        """String holding the pause switch (JSON: since, by, reason); absent means processing runs.

        Written (SET NX) by ``calsync pause`` and deleted by ``calsync resume`` (core.redis.pause); read by every
        worker process' pause gate (about once a second) and by ``calsync status``.
        """
        return f"{self.namespace}:paused"

    def slots(self, key: str) -> str:
        """Sorted set of the concurrency leases of one key (member: holder token, score: lease expiry in ms).

        Written (ZADD under a Lua check, ZREM on release) by :class:`core.redis.limiter.RedisLimiter` in
        workers; read by the same limiter (ZCARD) and by tests. Graph adapters use ``graph:{app}:{mailbox}``.
        """
        return f"{self.namespace}:slots:{key}"

    def traffic_account(self, provider: str, account_id: str) -> str:
        """Hash of one account's traffic state: token bucket, "blocked until", circuit breaker (ms, Redis time).

        Written by the admit and settle scripts of :class:`core.traffic.store.TrafficStore` in workers; read by
        the same scripts and by ``calsync status`` / the exporter (core.observability.pipeline_state). TTL a day.
        """
        return f"{self.namespace}:traffic:account:{provider}:{account_id}"

    def traffic_slots(self, provider: str, account_id: str) -> str:
        """Sorted set of one account's in-flight provider calls (member: admission token, score: lease expiry ms).

        Written (ZADD on admission, ZREM on settle) by :class:`core.traffic.store.TrafficStore`; read by it.
        """
        return f"{self.namespace}:traffic:slots:{provider}:{account_id}"

    def traffic_tenant(self, tenant_id: str) -> str:
        """Hash of one tenant's token bucket. Written and read by the admit script of ``TrafficStore``."""
        return f"{self.namespace}:traffic:tenant:{tenant_id}"

    def traffic_provider(self, provider: str) -> str:
        """Hash of one provider's traffic state (bucket, "blocked until", breaker), shared by all its accounts.

        Written by ``TrafficStore``'s scripts in workers; read by them, ``calsync status`` and the exporter.
        """
        return f"{self.namespace}:traffic:provider:{provider}"

    def traffic_open_accounts(self, provider: str) -> str:
        """Sorted set of a provider's accounts whose breaker is not closed (score: when it may probe, ms).

        Written by ``TrafficStore``'s scripts (ZADD on open, ZREM on close); read by ``calsync status`` and
        the exporter, which count and list them.
        """
        return f"{self.namespace}:traffic:open:{provider}"

    def maintenance_lease(self) -> str:
        """String holding the token of the worker process running the housekeeping pass (TTL: the interval).

        Written (SET NX PX) by :class:`core.worker.maintenance.Maintenance` in every worker process, so one
        pass runs per ``MAINTENANCE_INTERVAL`` across the deployment; read by the same SET NX only (never
        deleted: it expires, which spaces the passes).
        """
        return f"{self.namespace}:maintenance"

    def traffic_excused(self, job_id: str) -> str:
        """Hash of one job's temporary failures excused as a provider outage (field: attempt, value: count).

        Written and read by ``TrafficStore``'s settle script in workers (at most BREAKER_FAILURES per attempt).
        TTL a day.
        """
        return f"{self.namespace}:traffic:excused:{job_id}"

    def traffic_streak(self, provider: str, what: str) -> str:
        """Set of the ``accounts`` (or ``events``, tenant/entity) whose calls failed in the provider's current
        failure streak, since its last success anywhere.

        Written (SADD on a failure, DEL on a success or when the provider's breaker opens) and read (SCARD) by
        ``TrafficStore``'s settle script in workers: the provider's breaker and outage excuse need several of
        each (docs/notes/traffic.md, "Blast radius"). TTL a day.
        """
        return f"{self.namespace}:traffic:streak:{provider}:{what}"

    def console_bulk(self, bulk_id: str) -> str:
        """String holding one console bulk action on dead letters as JSON: what, by whom, the filter, the count
        confirmed, how far it got (core.console.bulk). TTL a week.

        Written by the serve process running the action (the holder of :meth:`console_bulk_lease`, after each batch)
        and by the page that starts it; read by the console's progress page in any serve process.
        """
        return f"{self.namespace}:console:bulk:{bulk_id}"

    def console_bulk_lease(self, bulk_id: str) -> str:
        """String holding the token of the serve process running a console bulk action (PX, renewed per batch).

        Written (SET NX PX, renewed by compare-and-set) by core.console.bulk's runner; read by the progress page,
        which offers to resume an unfinished action whose lease expired (its process ended).
        """
        return f"{self.namespace}:console:bulk-lease:{bulk_id}"

    def console_flash(self, token: str) -> str:
        """String holding what a console action did, as the page it redirects to shows it (post-redirect-get),
        under a random token the redirect carries: the text is the server's, never the URL's. EX ten minutes.

        Written by the console's action handlers, read by the page redirected to (core.console.bulk).
        """
        return f"{self.namespace}:console:flash:{token}"
