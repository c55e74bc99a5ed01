"""In-memory stand-ins for the producer's Redis markers and broker, so its branches run with no services."""

from __future__ import annotations

from collections.abc import Sequence

from calsync.core.model.payload import JobPayload, Operation
from calsync.core.model.vocabulary import Lane
from calsync.core.producer.dedup import Claim, Claimed, Mark


class MemoryMarkers:
    """Enqueue markers in a dict (no TTL: a test is shorter than any DEDUP_TTL)."""

    def __init__(self) -> None:
        self.marks: dict[Mark, str] = {}

    def claim_all(self, claims: Sequence[Claim]) -> list[Claimed]:
        """Per claim, the job id of the identical enqueue that came first, or a new one (now marked, no delay)."""
        return [Claimed(self._claim(*claim)) for claim in claims]

    def _claim(self, mark: Mark, job_id: str) -> str | None:
        earlier = self.marks.get(mark)
        if earlier is None:
            self.marks[mark] = job_id
        return earlier

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed."""
        self.marks.pop(mark, None)


class MemoryQueue:
    """Collects enqueued payloads; ``failing`` makes every enqueue raise, like a broker that is down."""

    def __init__(self) -> None:
        self.payloads: list[JobPayload] = []
        self.lanes: list[Lane] = []
        self.failing = False

    def __call__(self, payload: JobPayload, lane: Lane, delay_ms: int | None) -> None:
        if self.failing:
            raise ConnectionError("broker unavailable")
        self.payloads.append(payload)
        self.lanes.append(lane)

    def jobs(self) -> dict[str, tuple[Operation, str]]:
        """Enqueued jobs by account: (operation, idempotency key) of the latest one."""
        return {p.account_id: (p.operation, p.idempotency_key) for p in self.payloads}
