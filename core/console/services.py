"""What the console uses, handed in by its composition root: the HTTP API's services (database, DLQ operations, a
job's cancel, webhooks), the pipeline's live state, the pause switch, the job outcome counters and the console's
own settings (sessions' idle expiry, the trusted proxy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, cast

from fastapi import Depends, Request

from calsync.core.api.services import ApiServices, services_from_clients
from calsync.core.clients import Clients
from calsync.core.console.bulk import BulkActions
from calsync.core.console.settings import ConsoleSettings
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.redis.pause import PauseSwitch
from calsync.core.redis.stats import JobStats
from calsync.core.traffic import TrafficStore


@dataclass(frozen=True)
class ConsoleServices:
    """The parts the console's pages read and act through."""

    api: ApiServices
    state: StateReader
    pause: PauseSwitch
    traffic: TrafficStore  # the accounts page's breakers
    stats: JobStats  # the workers' per-minute job outcome counters (the overview's sparklines)
    access: ConsoleSettings  # sign-in: the sessions' idle expiry, the trusted proxy (the process's Settings)
    bulk: BulkActions  # dead letters' bulk actions and the pages' post-redirect-get messages


def console_services_from_clients(clients: Clients, api: ApiServices | None = None) -> ConsoleServices:
    """The console's services bound to ``clients`` (which the caller closes), sharing ``api`` when given."""
    api = api or services_from_clients(clients)
    return ConsoleServices(
        api=api,
        state=StateReader(clients),
        pause=PauseSwitch(clients.redis, clients.keys),
        traffic=TrafficStore(clients.redis, clients.keys),
        stats=JobStats(clients.redis, clients.keys),
        access=clients.settings,
        bulk=BulkActions(clients.redis, clients.keys, api),
    )


def console_services(request: Request) -> ConsoleServices:
    """The services the console was created with (a page's ``Console`` dependency)."""
    return cast(ConsoleServices, request.app.state.console)


Console = Annotated[ConsoleServices, Depends(console_services)]
