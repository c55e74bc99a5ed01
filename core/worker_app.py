"""The module the ``dramatiq`` CLI loads in every worker process (``calsync worker`` points it here).

Importing it configures JSON logging, checks that metrics will reach the exposition port (the
environment ``calsync worker`` prepares), builds this process's runtime and broker from the
environment's settings, and declares the actors.
"""

from __future__ import annotations

import actors
from core.logs import configure_logging
from core.metrics import require_multiprocess
from core.runtime import Runtime
from core.settings import load_settings

settings = load_settings()
configure_logging(settings.log_level)
require_multiprocess(settings)
runtime = Runtime(settings, role="worker")
broker = runtime.broker
actors.declare(broker, runtime)
