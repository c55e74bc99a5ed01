"""The module the ``dramatiq`` CLI loads in every worker process (``calsync worker`` points it here).

Importing it configures JSON logging (each line written whole to the process' own stdout, not relayed
by Dramatiq's parent: core/config/log_lines.py), checks that metrics will reach the exposition port (the
environment ``calsync worker`` prepares), and builds this process's worker from the environment's
settings (actors/worker.py: the composition root).
"""

from __future__ import annotations

from calsync.actors.worker import build_worker
from calsync.core.config.log_lines import LineOutput
from calsync.core.config.logging import configure_logging
from calsync.core.config.settings import load_settings
from calsync.core.worker.metrics import require_multiprocess

settings = load_settings()
configure_logging(settings.log_level, LineOutput.stdout())
require_multiprocess(settings)
worker = build_worker(settings)
broker = worker.clients.broker
