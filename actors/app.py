"""The module the ``dramatiq`` CLI loads in every worker process (``calsync worker`` points it here).

Importing it configures JSON logging (each line written whole to the process' own stdout, not relayed
by Dramatiq's parent: core/config/log_lines.py), checks that metrics will reach the exposition port (the
environment ``calsync worker`` prepares), and builds this process's worker from the environment's
settings: runtime, adapters, broker and actors.
"""

from __future__ import annotations

import logging

from calsync.actors.worker import build_worker
from calsync.core.config.log_lines import LOCK_NAME, LineOutput
from calsync.core.config.logging import configure_logging
from calsync.core.config.settings import load_settings
from calsync.core.worker.metrics import require_multiprocess

settings = load_settings()
log_output = LineOutput.stdout(lock=settings.effective_heartbeat_dir / LOCK_NAME)
configure_logging(settings.log_level, log_output)
if not isinstance(log_output, LineOutput):
    logging.getLogger(__name__).warning(
        "log lines go through Dramatiq's parent process: this process has no stdout descriptor, or no lock file "
        "can be made in CALSYNC_HEARTBEAT_DIR (%s)", settings.effective_heartbeat_dir,
    )
require_multiprocess(settings)
worker = build_worker(settings)
broker = worker.broker
