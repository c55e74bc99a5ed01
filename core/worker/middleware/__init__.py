"""calsync's Dramatiq middlewares, one concern per module, in the order set by ``core.worker.broker.worker_middleware``.

Before-hooks run top to bottom and after-hooks bottom to top (Dramatiq's rule), so:

0. in workers, ``first``: Dramatiq's ``Prometheus``, ``core.worker.metrics.WorkerMetrics``,
   ``core.worker.heartbeat.Heartbeat``
   (see ``core.worker.broker.observed_worker_middleware`` and docs/METRICS.md);
1. ``JobLifecycle`` — opens the delivery context; its ack/nack hooks run last, logging the outcome;
2. ``TimeLimit`` — Dramatiq's, set above the provider timeout so a hung call is interrupted;
3. ``ShutdownNotifications`` — Dramatiq's, lets SIGTERM stop idle threads cleanly;
4. ``PayloadValidation`` — corrupt payloads → DLQ at once;
5. ``DeadLetterRecorder`` — durable DLQ record before every nack (nack hooks only);
6. ``ScheduledRetries`` — decides retry-or-DLQ after a failure (after-hook only);
7. ``ResourceLocking`` — busy → re-enqueued later without burning an attempt; placed after Retries so
   that its after-hook releases the lock before Retries enqueues the next attempt;
8. ``IdempotencyGuard`` — under the lock: effect already recorded → ack as ``already_done``;
9. ``StaleVersionSkip`` — under the lock: newer version exists / already synced → ``stale``.

8 and 9 read the delivery's state once, in one statement (``core.worker.snapshot.job_snapshot``); the actor
uses the same read.
"""
