"""The two lanes of sync jobs: the normal queue and its bulk overflow (docs/notes/fairness.md).

Both are ordinary Dramatiq queues. A worker consumes each with a consumer thread and a prefetch of its
own, so the bulk lane's backlog never stands in front of a message on the normal lane. Only the sync
actor travels on the bulk lane; a retry or a lock wait stays on the lane it came from (Dramatiq
re-enqueues to ``<queue>.DQ`` and moves it back to ``<queue>``).
"""

from __future__ import annotations

from dataclasses import dataclass

from calsync.core.config.settings import Settings
from calsync.core.model.vocabulary import Lane


@dataclass(frozen=True)
class Lanes:
    """The queue names of the two lanes."""

    normal: str
    bulk: str

    def queue(self, lane: Lane) -> str:
        """The queue a job on ``lane`` is enqueued to."""
        return self.bulk if lane == "bulk" else self.normal

    @property
    def queues(self) -> tuple[str, str]:
        """Both queues, normal first (what workers consume, readings report)."""
        return (self.normal, self.bulk)

    @property
    def overflow(self) -> dict[str, str]:
        """Each overflow queue and the queue whose sync actor it also carries (for the envelope check)."""
        return {self.bulk: self.normal}


def lanes_of(settings: Settings) -> Lanes:
    """The lanes the settings name: ``QUEUE`` and ``BULK_QUEUE``."""
    return Lanes(settings.queue, settings.effective_bulk_queue)
