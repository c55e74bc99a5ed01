"""``calsync emulator exchange|graph``: one process serving EWS over http and Graph + Entra over https."""

from __future__ import annotations

import os
import re
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

EMULATORS = Path(__file__).resolve().parents[3] / "emulators"


@pytest.mark.parametrize("kind", ["exchange", "graph"])
def test_the_emulator_command_serves_ews_and_graph_on_one_port(kind: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(EMULATORS), os.environ.get("PYTHONPATH")) if p)}
    child = subprocess.Popen([sys.executable, "-m", "calsync_emulators", "emulator", kind, "--port", "0"],
                             env=env, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stderr is not None
        url = re.search(r"listening on (\S+)", child.stderr.readline())
        ca_file = re.search(r"CALSYNC_GRAPH_CA_FILE=(\S+)", child.stderr.readline())
        assert url and ca_file
        https = url.group(1).replace("http://", "https://")
        with httpx.Client(verify=ssl.create_default_context(cafile=ca_file.group(1)), timeout=10) as http:
            config = http.get(f"{https}/example-tenant/v2.0/.well-known/openid-configuration").json()
            assert config["token_endpoint"] == f"{https}/example-tenant/oauth2/v2.0/token"
            assert http.get(f"{https}/v1.0/users/a@example.com/events").status_code == 401
        assert httpx.get(f"{url.group(1)}/EWS/Exchange.asmx").status_code == 405  # EWS answers POST only
    finally:
        child.terminate()
        child.wait(timeout=10)
