"""A ``calsync`` command loads only what it uses: scripts and CronJobs pay the start-up on every call.

Importing the adapters' client libraries (exchangelib, the Google client, msal), Alembic or pika cost
a command about half a second of its one to two (benchmarks/cli_startup.py); the commands that need
them import them where they run (``accounts add --verify``, ``worker``, ``migrate``, a RabbitMQ broker).
"""

from __future__ import annotations

import json

from calsync.actors.cli.main import BUILT_IN
from tests.support import python_in_a_new_process

# Loaded where needed, never by importing a command's module: the adapters, migrations, the RabbitMQ client.
DEFERRED = {"exchangelib", "googleapiclient", "google_auth_httplib2", "httplib2", "msal", "alembic", "mako", "pika"}
# `calsync serve` is the HTTP intake, a long-running server: its framework is its reason to exist.
SERVER_MODULES = {"serve"}

_IMPORT_ALL = """
import importlib, json, sys
for module in sys.argv[1:]:
    importlib.import_module(f"calsync.actors.cli.{module}")
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


def test_no_command_module_loads_an_adapter_library_alembic_or_pika() -> None:
    modules = sorted({target.partition(":")[0] for target in BUILT_IN.values()} - SERVER_MODULES)
    loaded = set(json.loads(python_in_a_new_process(_IMPORT_ALL, "main", *modules)))
    assert "sqlalchemy" in loaded and "click" in loaded  # the probe saw the imports it made
    assert loaded & DEFERRED == set()
