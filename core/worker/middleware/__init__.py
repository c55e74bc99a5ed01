"""calsync's cross-cutting Dramatiq middlewares, one concern per module: the delivery's lifecycle (logs,
counts), retries and deferrals, the durable DLQ. Their order is set in ``core.worker.stack``; the job
itself is ``core.worker.job.run_sync``."""
