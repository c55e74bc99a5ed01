"""A worker process loads an adapter's client library when it first serves an account of that provider.

exchangelib, the Google client and msal cost a process about 0.5 s to import and 38 MB of memory
(measured 2026-12-02); a deployment that syncs only Google calendars never loads the Exchange stacks.
"""

from __future__ import annotations

import json
import os
from typing import Any

from calsync.core.config.settings import Settings
from tests.support import python_in_a_new_process

# Builds the worker of this process from the CALSYNC_* environment, then the adapters named in argv, in
# turn; prints the client libraries loaded after each step.
_WORKER = """
import json, sys
from calsync.actors.worker import build_worker
from calsync.core.config.settings import load_settings
LIBRARIES = {"exchangelib", "googleapiclient", "httplib2", "msal"}
def loaded():
    return sorted({name.split(".")[0] for name in sys.modules} & LIBRARIES)
worker = build_worker(load_settings())
steps = [loaded()]
for name in sys.argv[1:]:
    worker.providers.get(name)
    steps.append(loaded())
worker.close()
print(json.dumps(steps))
"""


def _loaded_by_step(settings: Settings, *adapters: str) -> list[list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALSYNC_")} | settings.as_environment()
    steps: list[list[str]] = json.loads(python_in_a_new_process(_WORKER, *adapters, env=env))
    return steps


def test_each_adapter_s_library_is_loaded_when_its_adapter_is_first_used(pipeline: Any) -> None:
    steps = _loaded_by_step(pipeline.settings, "memory", "google", "exchange", "graph")
    assert steps == [
        [],  # the worker built: middleware, actors, the registry
        [],  # the memory calendar
        ["googleapiclient", "httplib2"],
        ["exchangelib", "googleapiclient", "httplib2"],
        ["exchangelib", "googleapiclient", "httplib2", "msal"],
    ]
